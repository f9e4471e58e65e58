package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestScenarioVetReportsEveryError: `draforge scenario vet` of issue #29's pool (an unknown
// profile and a count above 128) prints both errors at their file:line:col, the profile as one
// line naming the valid values and the closest, then the summary, and fails.
func TestScenarioVetReportsEveryError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pool.yaml")
	src := "apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedDevicePool\nmetadata: {name: gpus, namespace: default}\n" +
		"spec:\n  deviceType: gpu\n  profile: nvidia-h999\n  deviceCount: 500\n  nodeSelector: {gpu: \"true\"}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRoot("draforge")
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"scenario", "vet", file})
	if err := root.Execute(); err == nil {
		t.Fatal("vet of an invalid file succeeded")
	}
	want := file + `:6:12: spec.profile: unknown profile "nvidia-h999" (valid: amd-gpu, amd-gpu-cpx, dra-cpu, dra-cpu-individual, dra-cpu-machine, dra-cpu-socket, example-cpu, example-gpu, example-gpu-plain, example-gpu-shared, example-net, generic, google-tpu, intel-gpu, mellanox-nic, nvidia-compute-domain, nvidia-gpu, nvidia-gpu-b200, nvidia-gpu-gb200, nvidia-gpu-h200, nvidia-gpu-shares, nvidia-mig-a100, nvidia-mig-h100, nvidia-mig-h200, sriov-vf; closest: nvidia-gpu)` + "\n" +
		file + ":7:16: spec.deviceCount: invalid value 500 (out of bound <=128)\n" +
		"1 of 1 files invalid\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: %q", stdout.String())
	}
}
