package containerimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadVersion(t *testing.T) {
	for content, want := range map[string]string{
		"0.1.0\n":         "0.1.0",
		"1.2.3-rc.1+b5\n": "1.2.3-rc.1+b5",
		"v0.1.0\n":        `VERSION:1:1: "v0.1.0" is not a semantic version`,
		"0.1\n":           `VERSION:1:1: "0.1" is not a semantic version`,
		"":                `VERSION:1:1: "" is not a semantic version`,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadVersion(dir)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Errorf("VERSION %q: got %q, want %q", content, got, want)
		}
	}
	if _, err := ReadVersion(t.TempDir()); err == nil {
		t.Error("a missing VERSION file was accepted")
	}
}

func TestReadSource(t *testing.T) {
	dir := t.TempDir()
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(nil, "init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("0.3.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(nil, "add", "VERSION")
	date := []string{"GIT_COMMITTER_DATE=2026-11-02T03:04:05Z", "GIT_AUTHOR_DATE=2020-01-01T00:00:00Z",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
	run(date, "commit", "-q", "-m", "v0.3.0")
	head := run(nil, "rev-parse", "HEAD")

	t.Setenv("SOURCE_DATE_EPOCH", "")
	src, err := ReadSource(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Source{Version: "0.3.0", Revision: head, Created: time.Date(2026, 11, 2, 3, 4, 5, 0, time.UTC)}
	if src != want {
		t.Errorf("clean checkout: %+v, want %+v (the committer date)", src, want)
	}

	// An untracked file changes nothing; a changed tracked file marks the revision dirty.
	if err := os.WriteFile(filepath.Join(dir, "untracked"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if src, _ := ReadSource(context.Background(), dir); src.Revision != head {
		t.Errorf("untracked file: revision %q", src.Revision)
	}
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("0.3.0 \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	src, err = ReadSource(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if src.Revision != head+"-dirty" || !src.Created.Equal(time.Unix(1700000000, 0)) || src.Created.Location() != time.UTC {
		t.Errorf("dirty checkout with SOURCE_DATE_EPOCH: %+v", src)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := ReadSource(context.Background(), dir); err == nil || !strings.Contains(err.Error(), `"yesterday" is not seconds since the Unix epoch`) {
		t.Errorf("bad SOURCE_DATE_EPOCH: %v", err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if _, err := ReadSource(context.Background(), t.TempDir()); err == nil {
		t.Error("a directory without VERSION or git was accepted")
	}
}

func TestLDFlagsAndBuildEnv(t *testing.T) {
	got := LDFlags(testSource)
	want := "-s -w -buildid= -X github.com/draforge/draforge/cmd/draforge/internal/buildinfo.Version=0.1.0 " +
		"-X github.com/draforge/draforge/cmd/draforge/internal/buildinfo.Commit=" + testSource.Revision +
		" -X github.com/draforge/draforge/cmd/draforge/internal/buildinfo.Date=2026-12-01T10:00:00Z"
	if got != want {
		t.Errorf("LDFlags:\n got %s\nwant %s", got, want)
	}
	t.Setenv("CGO_ENABLED", "1")
	t.Setenv("GOAMD64", "v3")
	t.Setenv("GOFLAGS", "-race")
	env := strings.Join(buildEnv(Platforms[1]), "\n") + "\n"
	for _, kv := range []string{"CGO_ENABLED=0\n", "GOOS=linux\n", "GOARCH=arm64\n", "GOAMD64=v1\n", "GOFLAGS=-mod=readonly\n"} {
		if !strings.Contains(env, kv) {
			t.Errorf("build env lacks %q", kv)
		}
	}
	for _, kv := range []string{"CGO_ENABLED=1\n", "GOAMD64=v3\n", "GOFLAGS=-race\n"} {
		if strings.Contains(env, kv) {
			t.Errorf("build env kept the caller's %q", kv)
		}
	}
	args := strings.Join(buildArgs(testSource, "out"), " ")
	if !strings.Contains(args, "-trimpath -buildvcs=false") || !strings.HasSuffix(args, "-o out ./cmd/draforge") {
		t.Errorf("go %s", args)
	}
}
