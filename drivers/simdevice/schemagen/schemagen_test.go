package schemagen

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files")

// TestGeneratedFilesUpToDate is the drift check: the committed CRDs and CUE profile file must
// be what Render produces from drivers/simdevice. Run `go generate ./drivers/simdevice/schemagen`
// after changing a profile.
func TestGeneratedFilesUpToDate(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files, err := Render(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Files {
		path := filepath.Join(root, name)
		cur, err := os.ReadFile(path)
		if err != nil && !*update {
			t.Fatal(err)
		}
		if bytes.Equal(cur, files[name]) {
			continue
		}
		if *update {
			if err := os.WriteFile(path, files[name], 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", name)
			continue
		}
		t.Errorf("%s is stale: run `go generate ./drivers/simdevice/schemagen`", name)
	}
}

// TestPatchCRDNeedsMarkers: a CRD whose markers were lost is an error, not a silent no-op.
func TestPatchCRDNeedsMarkers(t *testing.T) {
	if _, err := patchCRD("x.yaml", []byte("spec: {}\n")); err == nil {
		t.Error("want an error for a CRD without markers")
	}
	if _, err := patchCRD("x.yaml", []byte("  # generated: per-device-limit\n  - rule: x\n")); err == nil {
		t.Error("want an error for a marker without its end")
	}
}
