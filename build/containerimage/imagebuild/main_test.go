package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/draforge/draforge/build/containerimage"
)

// All three flags given: no VERSION file or git needed (the Dockerfile's build stage).
func TestSourceFromFlags(t *testing.T) {
	dir := t.TempDir() // neither VERSION nor .git
	got, err := source(context.Background(), dir, "1.2.3", "abc", "1700000000")
	if err != nil {
		t.Fatal(err)
	}
	want := containerimage.Source{Version: "1.2.3", Revision: "abc", Created: time.Unix(1700000000, 0).UTC()}
	if got != want {
		t.Errorf("source = %+v, want %+v", got, want)
	}
	for _, tc := range []struct{ version, revision, created, want string }{
		{"v1.2.3", "abc", "1", `--version: "v1.2.3" is not a semantic version`},
		{"1.2.3", "abc", "soon", `"soon" is not seconds since the Unix epoch`},
		{"1.2.3", "", "1", "git rev-parse HEAD"}, // a missing value is read from the checkout, which is none
	} {
		if _, err := source(context.Background(), dir, tc.version, tc.revision, tc.created); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("source(%q, %q, %q) error %v, want %q", tc.version, tc.revision, tc.created, err, tc.want)
		}
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"--dir", t.TempDir(), "--version", "1.0.0", "--revision", "r", "--created", "1", "--platforms", "linux/amd64,"}, "each platform is os/architecture"},
	} {
		if err := run(context.Background(), tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
