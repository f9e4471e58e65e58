package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/draforge/draforge/cmd/draforge/internal/buildinfo"
)

func TestDisplayName(t *testing.T) {
	for argv0, want := range map[string]string{
		"draforge":                         "draforge",
		"/usr/local/bin/draforge":          "draforge",
		"/home/u/bin/kubectl-draforge":     "kubectl draforge",
		"kubectl-draforge":                 "kubectl draforge",
		"kubectl-draforge.exe":             "kubectl draforge",
		"/usr/local/bin/kubectl-draforge2": "draforge",
	} {
		if got := displayName(argv0); got != want {
			t.Errorf("displayName(%q) = %q, want %q", argv0, got, want)
		}
	}
}

// As a kubectl plugin every usage line, help text and error names `kubectl draforge`.
func TestPluginUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:\n  kubectl draforge [command]", `Use "kubectl draforge [command] --help"`, "help for kubectl draforge"}},
		{[]string{"explain", "--help"}, []string{"Usage:\n  kubectl draforge explain [claim/]CLAIM | pod/POD"}},
		{[]string{"scenario", "vet", "--help"}, []string{"kubectl draforge scenario vet"}},
	} {
		root := newRoot("kubectl draforge")
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(tc.args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
		if strings.Contains(strings.ReplaceAll(out.String(), "kubectl draforge", ""), "draforge [") {
			t.Errorf("%v: a usage line names plain draforge:\n%s", tc.args, out.String())
		}
	}
	root := newRoot("kubectl draforge")
	root.SetArgs([]string{"no-such-command"})
	root.SetOut(&bytes.Buffer{})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `for "kubectl draforge"`) {
		t.Errorf("unknown command error = %v", err)
	}
}

func TestVersionCommand(t *testing.T) {
	old := buildinfo.Version
	buildinfo.Version, buildinfo.Commit, buildinfo.Date = "9.8.7", "0123abc", "2026-12-01T10:00:00Z"
	t.Cleanup(func() { buildinfo.Version, buildinfo.Commit, buildinfo.Date = old, "", "" })
	run := func(args ...string) (string, error) {
		root := newRoot("draforge")
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append([]string{"version"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	text, err := run()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"version            9.8.7\n", "commit             0123abc\n", "build date         2026-12-01T10:00:00Z\n", "go                 go1.", "kubernetes client  k8s.io/client-go "} {
		if !strings.Contains(text, w) {
			t.Errorf("version output lacks %q:\n%s", w, text)
		}
	}
	js, err := run("-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	// Test binaries record no module dependencies, so the Kubernetes client version is checked
	// on a real build (test/e2e TestImage runs `draforge version -o json` from the image).
	if got.Version != "9.8.7" || got.Commit != "0123abc" || got.BuildDate != "2026-12-01T10:00:00Z" ||
		got.KubernetesClientVersion == "" || !strings.HasPrefix(got.GoVersion, "go1.") {
		t.Errorf("version -o json = %+v", got)
	}
	if _, err := run("-o", "xml"); err == nil || !strings.Contains(err.Error(), `unknown output format "xml"`) {
		t.Errorf("version -o xml: %v", err)
	}
	if _, err := run("extra"); err == nil {
		t.Error("version with an argument succeeded")
	}
}
