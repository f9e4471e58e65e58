package schemas

import (
	"fmt"
	"strings"
	"testing"

	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/encoding/yaml"
)

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"nvidia-h999", "nvidia-gpu", 4}, {"gpu", "gpu", 0}, {"héllo", "hello", 1},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	profiles := []string{"amd-gpu", "amd-gpu-cpx", "nvidia-gpu", "nvidia-mig-h100"}
	for got, want := range map[string]string{
		"nvidia-h999": "nvidia-gpu",      // 4 edits, within half of 11
		"amd":         "amd-gpu",         // a prefix of two: the nearer
		"NVIDIA-GPU":  "nvidia-gpu",      // case is ignored
		"mig-h100":    "nvidia-mig-h100", // contained, though 7 edits away
		"xyz":         "",                // nothing near
		"":            "",
	} {
		if c := closest(got, profiles); c != want {
			t.Errorf("closest(%q) = %q, want %q", got, c, want)
		}
	}
}

// vetLines renders ValidateScenario's errors as "line:col: path: message", the way scenario
// vet prints them (without the file name).
func vetLines(t *testing.T, src string) []string {
	t.Helper()
	err := ValidateScenario("t.yaml", []byte(src))
	var out []string
	for _, e := range cueerrors.Errors(err) {
		pos := e.Position()
		for _, p := range cueerrors.Positions(e) {
			if p.Filename() == "t.yaml" {
				pos = p
				break
			}
		}
		format, args := e.Msg()
		out = append(out, fmt.Sprintf("%d:%d: %s: %s", pos.Line(), pos.Column(), strings.Join(dataPath(e.Path()), "."), fmt.Sprintf(format, args...)))
	}
	return out
}

// TestEveryErrorOfADocument: the pool of issue #29 gets both its errors, the profile as one
// enum error at the value; hidden errors (a later list element, an unknown field beside a bad
// value) are found; consequences of the removals are not reported; a non-enum disjunction keeps
// CUE's own errors.
func TestEveryErrorOfADocument(t *testing.T) {
	const head = "apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedDevicePool\nmetadata: {name: p, namespace: d}\nspec:\n"
	for name, tc := range map[string]struct {
		spec string
		want []string
	}{
		"issue 29": {"  deviceType: gpu\n  deviceCount: 500\n  profile: nvidia-h999\n  nodeSelector: {gpu: \"true\"}\n", []string{
			"6:16: spec.deviceCount: invalid value 500 (out of bound <=128)",
			`7:12: spec.profile: unknown profile "nvidia-h999" (valid: amd-gpu, amd-gpu-cpx, dra-cpu, dra-cpu-individual, dra-cpu-machine, dra-cpu-socket, example-cpu, example-gpu, example-gpu-plain, example-gpu-shared, example-net, generic, google-tpu, intel-gpu, mellanox-nic, nvidia-compute-domain, nvidia-gpu, nvidia-gpu-b200, nvidia-gpu-gb200, nvidia-gpu-h200, nvidia-gpu-shares, nvidia-mig-a100, nvidia-mig-h100, nvidia-mig-h200, sriov-vf; closest: nvidia-gpu)`,
		}},
		// deviceCount and deviceType removed after the first round must not come back as
		// "required" or make the faults' rules incomplete; the unknown field is found.
		"no consequences": {"  deviceType: GPU\n  deviceCount: 0\n  targetNodes: [a]\n  faults: [{device: gpu-0, mode: healthy}]\n  bogus: 1\n", []string{
			`5:15: spec.deviceType: invalid value "GPU" (out of bound =~"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")`,
			"6:16: spec.deviceCount: invalid value 0 (out of bound >=1)",
			// The fault's name no longer matches the (bad) deviceType: CUE's own cascade, in the
			// first round; the repeats of the deviceType error inside it are left out.
			"8:21: spec.faults.0.device: 5 errors in empty disjunction:",
			`8:21: spec.faults.0.device: conflicting values "gpu-0" and int (mismatched types string and int)`,
			"9:3: spec.bogus: field not allowed",
		}},
		"later list elements": {"  targetNodes: [a]\n  deviceGroups:\n    - {deviceType: a, count: 0}\n    - {deviceType: b, count: 200}\n    - {deviceType: c, count: 1, partitions: 1}\n", []string{
			"7:30: spec.deviceGroups.0.count: invalid value 0 (out of bound >=1)",
			"8:30: spec.deviceGroups.1.count: invalid value 200 (out of bound <=128)",
			"9:45: spec.deviceGroups.2.partitions: 2 errors in empty disjunction:",
			"9:45: spec.deviceGroups.2.partitions: conflicting values 0 and 1",
			"9:45: spec.deviceGroups.2.partitions: invalid value 1 (out of bound >=2)",
		}},
	} {
		t.Run(name, func(t *testing.T) {
			got := vetLines(t, head+tc.spec)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestRemoveFieldKeepsStructure: only scalar fields (or unknown fields) are removed, never a
// list element (the indices after it would move) nor kind.
func TestRemoveFieldKeepsStructure(t *testing.T) {
	src := "apiVersion: v1\nkind: Pod\nspec: {names: [a, b], inner: {x: 1}, n: 2}\n"
	for _, tc := range []struct {
		path    []string
		unknown bool
		want    bool
	}{
		{[]string{"spec", "n"}, false, true},
		{[]string{"spec", "names", "1"}, false, false},
		{[]string{"spec", "inner"}, false, false},
		{[]string{"spec", "inner"}, true, true},
		{[]string{"kind"}, false, false},
		{[]string{"spec", "missing"}, false, false},
		{[]string{"spec", "names", "7", "x"}, false, false},
	} {
		expr := extractOne(t, src)
		if got := removeField(expr, tc.path, tc.unknown); got != tc.want {
			t.Errorf("removeField(%v, unknown=%t) = %t, want %t", tc.path, tc.unknown, got, tc.want)
		}
	}
}

func extractOne(t *testing.T, src string) ast.Expr {
	t.Helper()
	expr, err := yaml.NewDecoder("t.yaml", strings.NewReader(src)).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return expr
}
