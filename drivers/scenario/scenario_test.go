package scenario

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/vet/*.golden")

// TestVetGolden: what `draforge scenario vet` prints for each testdata/vet file, line for line
// (Format of Vet), against its .golden file: every error of every document, in file order,
// each at its file:line:col.
func TestVetGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/vet/*.yaml")
	if len(files) < 4 {
		t.Fatalf("found %d testdata/vet files", len(files))
	}
	lineRE := regexp.MustCompile(`^testdata/vet/[a-z0-9-]+\.yaml:[0-9]+:[0-9]+: `)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			err = Vet(f, src)
			if err == nil {
				t.Fatal("want errors")
			}
			got := Format(f, err) + "\n"
			for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
				if !lineRE.MatchString(l) {
					t.Errorf("line without file:line:col: %q", l)
				}
			}
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("vet output differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestFormatOrdersByPosition: lines sort by line and column as numbers (line 10 after line 9).
func TestFormatOrdersByPosition(t *testing.T) {
	src := []byte("apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedDevicePool\nmetadata: {name: p, namespace: d}\nspec:\n" +
		"  deviceType: gpu\n  deviceCount: 1\n  targetNodes: [a]\n  faults:\n" +
		"    - {device: 0, mode: a}\n    - {device: 0, mode: b}\n")
	err := Vet("f.yaml", src)
	if err == nil {
		t.Fatal("want errors")
	}
	lines := strings.Split(Format("f.yaml", err), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "f.yaml:9:") || !strings.HasPrefix(lines[1], "f.yaml:10:") {
		t.Errorf("want the error of line 9 before line 10's, got:\n%s", strings.Join(lines, "\n"))
	}
}
