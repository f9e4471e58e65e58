package machine

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// knownNames are the driver names the built-in machines use.
var knownNames = Names{
	Actions: []string{"deletePoolSlices", "removeFinalizer", "publishPoolSlices",
		"recordPoolStatus", "allocateClaim", "setBindingConditions", "deallocateClaim", "prepareClaims", "unprepareClaims",
		"createAllocationPod", "awaitAllocationPod", "completeAllocation", "deleteAllocationPod", "unreserveAllocationPod"},
	Observations: []string{"poolSpecInvalid", "poolSlicesOutOfDate", "claimNeedsSimulatedAllocation",
		"claimAwaitsBindingConditions", "claimBindingFailed", "claimNeedsAllocationPod", "claimReservedForAllocationPod", "claimReservedForGoneAllocationPod",
		"podOnSimulatedNode", "podClaimsReserved", "podDeviceHealth", "podDeviceHealthChanged", "podNetwork",
		"computeDomainSimulated", "computeDomainStatusStale", "gpuFabricDetached"},
	Mappers: []string{"podClaims", "pendingClaims", "claimPods", "slicePods", "claimComputeDomains", "computeDomainPods", "poolCliqueNodes"},
}

// Every message must start with file:line:col of a line in the file at fault.
var posRE = regexp.MustCompile(`^([^:]+):(\d+):(\d+): `)

func TestBadMachines(t *testing.T) {
	cases, _ := filepath.Glob("testdata/*.cue")
	dirs, _ := filepath.Glob("testdata/*/*.cue") // multi-file cases, one directory each
	for _, d := range dirs {
		if !strings.Contains(d, "fuzz") {
			cases = append(cases, filepath.Dir(d))
		}
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c] {
			continue
		}
		seen[c] = true
		name := strings.TrimSuffix(filepath.Base(c), ".cue")
		t.Run(name, func(t *testing.T) {
			var err error
			if strings.HasSuffix(c, ".cue") {
				src, rerr := os.ReadFile(c)
				if rerr != nil {
					t.Fatal(rerr)
				}
				_, err = Load(fstest.MapFS{filepath.Base(c): {Data: src}}, knownNames)
			} else {
				_, err = LoadDir(c, knownNames)
			}
			var list Errors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("want Errors, got %v", err)
			}
			for _, e := range list {
				if !posRE.MatchString(e.Error()) || !inFile(e) {
					t.Errorf("position not in the file: %q", e)
				}
			}
			golden := filepath.Join("testdata", name+".golden")
			got := err.Error() + "\n"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, _ := os.ReadFile(golden)
			if got != string(want) {
				t.Errorf("errors differ from %s (run with -update):\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// inFile reports whether e's line exists in its file (relative to testdata for single-file
// cases). Columns are not checked: a syntax error may sit just past the end of a line.
func inFile(e *Error) bool {
	src, err := os.ReadFile(e.File)
	if err != nil {
		src, err = os.ReadFile(filepath.Join("testdata", e.File))
	}
	lines := strings.Split(string(src), "\n")
	return err == nil && e.Line >= 1 && e.Line <= len(lines) && e.Column >= 1
}

// TestLoadDirLoadsNothing: a directory that would load no machine is an error naming it,
// never an empty list.
func TestLoadDirLoadsNothing(t *testing.T) {
	empty := t.TempDir()
	onlyOther := t.TempDir()
	if err := os.WriteFile(filepath.Join(onlyOther, "README.md"), []byte("not a machine"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(onlyOther, "README.md")
	noMachine := t.TempDir()
	src := "package machines\n\nmachine: {}\n"
	if err := os.WriteFile(filepath.Join(noMachine, "x.cue"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(empty, "missing"), filepath.Join(empty, "missing") + ": no such directory"},
		{file, file + ": not a directory"},
		{empty, empty + ": no machine files (*.cue)"},
		{onlyOther, onlyOther + ": no machine files (*.cue)"},
		{noMachine, filepath.Join(noMachine, "x.cue") + ":1:1: no machine declared"},
	} {
		ms, err := LoadDir(c.dir, knownNames)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadDir(%s) = %d machines, %v; want an error containing %q", c.dir, len(ms), err, c.want)
		}
	}
	if _, err := Load(fstest.MapFS{}, knownNames); err == nil || !strings.Contains(err.Error(), "no machine files") {
		t.Errorf("Load of an empty FS: %v", err)
	}
}

func TestLoadDir(t *testing.T) {
	ms, err := LoadDir("../../machines", knownNames)
	if err != nil || len(ms) != 6 || ms[0].Source != "../../machines/claim.cue" {
		t.Fatalf("LoadDir: %d machines, %v", len(ms), err)
	}
}

// TestStandardLibraryImport: machine files may use CUE's standard library beside the schemas.
func TestStandardLibraryImport(t *testing.T) {
	src := `package machines

import (
	"strings"
	"github.com/draforge/draforge/schemas"
)

machine: [string]: schemas.#Machine
machine: std: {
	resource: {group: "example.io", version: "v1", resource: "things"}
	namespaced: true
	states: {a: {}, failed: terminal: true}
	initial: "a"
	terminalState: strings.ToLower("FAILED")
}
`
	ms, err := Load(fstest.MapFS{"std.cue": {Data: []byte(src)}}, knownNames)
	if err != nil || len(ms) != 1 || ms[0].TerminalState != "failed" {
		t.Fatalf("std import: %v", err)
	}
}

// FuzzLoad feeds arbitrary bytes as a machine file (what a --machines directory or an edited
// machines ConfigMap holds). Seeds: every built-in machine and every testdata machine file
// (golden error cases), plus testdata/fuzz. Invariants: no panic; a rejection is Errors, each
// at f.cue:line:col; an accepted file loads the same machines again.
func FuzzLoad(f *testing.F) {
	builtin, _ := filepath.Glob("../../machines/*.cue")
	for _, n := range builtin {
		src, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	golden, _ := filepath.Glob("testdata/*.cue")
	for _, p := range golden {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	if len(builtin) < 4 || len(golden) < 10 {
		f.Fatalf("seeds: %d built-in machines, %d testdata files", len(builtin), len(golden))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		ms, err := Load(fstest.MapFS{"f.cue": {Data: src}}, knownNames)
		if err == nil {
			again, err := Load(fstest.MapFS{"f.cue": {Data: src}}, knownNames)
			if err != nil || len(again) != len(ms) {
				t.Fatalf("loaded %d machines, then %d: %v", len(ms), len(again), err)
			}
			return
		}
		var list Errors
		if !errors.As(err, &list) {
			t.Fatalf("not Errors: %v", err)
		}
		for _, e := range list {
			if e.File != "f.cue" || e.Line < 1 || e.Column < 1 {
				t.Fatalf("bad position: %q", e)
			}
		}
	})
}

// TestOnlyTheMachineSchema: the loader compiles the machine DSL (schemas/machine.cue) alone, so
// a machine file cannot reach the product's scenario or pool schemas through the import.
func TestOnlyTheMachineSchema(t *testing.T) {
	src := `package machines

import "github.com/draforge/draforge/schemas"

machine: [string]: schemas.#Machine
machine: x: {
	resource: {group: "example.io", version: "v1", resource: "things"}
	namespaced: true
	states: {a: {}, failed: terminal: true}
	initial: "a" & schemas.#DNSLabel
	terminalState: "failed"
}
`
	_, err := Load(fstest.MapFS{"x.cue": {Data: []byte(src)}}, knownNames)
	var list Errors
	if !errors.As(err, &list) || !strings.Contains(err.Error(), "#DNSLabel") {
		t.Fatalf("want an error naming #DNSLabel, got %v", err)
	}
	for _, e := range list {
		if e.File != "x.cue" || e.Line < 1 {
			t.Errorf("error not in x.cue: %q", e)
		}
	}
}
