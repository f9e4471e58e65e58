package gvr

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resourceRE matches a GVR as the machine files write it.
var resourceRE = regexp.MustCompile(`resource:\s*\{\s*group:\s*"([^"]*)",\s*version:\s*"([^"]*)",\s*resource:\s*"([^"]*)"\s*\}`)

// TestMachinesNameSharedResources: every resource a built-in machine names (its own resource
// and its triggers) is one of the shared GVRs, so the drivers that read those resources'
// informers and the machines that trigger on them agree on group and version.
func TestMachinesNameSharedResources(t *testing.T) {
	files, _ := filepath.Glob("../../machines/*.cue")
	if len(files) < 2 {
		t.Fatalf("want the built-in machines, found %v", files)
	}
	known := map[schema.GroupVersionResource]bool{}
	for _, r := range All {
		known[r] = true
	}
	seen := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resourceRE.FindAllStringSubmatch(string(src), -1) {
			seen++
			if r := (schema.GroupVersionResource{Group: m[1], Version: m[2], Resource: m[3]}); !known[r] {
				t.Errorf("%s names %v, which is not in package gvr", filepath.Base(f), r)
			}
		}
	}
	if seen < 5 {
		t.Errorf("found only %d resources in the machine files; did their syntax change?", seen)
	}
}

func TestCRDName(t *testing.T) {
	if got, want := SimulatedDevicePoolCRD, SimulatedDevicePools.Resource+"."+SimulatedDevicePools.Group; got != want {
		t.Errorf("CRD name %q, want %q", got, want)
	}
}
