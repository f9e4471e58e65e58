package poolfaults

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
)

// TestPatchRetriesOnConflict: Patch sends the resourceVersion it read with the new faults, and
// after a Conflict (the pool changed since) reads and edits again instead of failing or
// writing over the other change.
func TestPatchRetriesOnConflict(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": simdevice.Group + "/" + simdevice.Version, "kind": simdevice.Kind,
		"metadata": map[string]any{"name": "p", "namespace": "ns", "resourceVersion": "7"},
		"spec":     map[string]any{"deviceType": "gpu", "deviceCount": int64(2), "targetNodes": []any{"node-a"}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr.SimulatedDevicePools: simdevice.Kind + "List"}, u)
	var patches []map[string]any
	dyn.PrependReactor("patch", "simulateddevicepools", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var p map[string]any
		if err := json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &p); err != nil {
			t.Fatal(err)
		}
		patches = append(patches, p)
		if len(patches) == 1 {
			return true, nil, errors.NewConflict(schema.GroupResource{Resource: "simulateddevicepools"}, "p", nil)
		}
		return false, nil, nil
	})
	edits := 0
	out, err := Patch(t.Context(), dyn, "ns", "p", func(p *simdevice.Pool) ([]simdevice.Fault, error) {
		edits++
		return Set(p, simdevice.Fault{Device: DeviceRef("gpu-1"), Node: "node-a", Mode: simdevice.FaultUnhealthy})
	})
	if err != nil {
		t.Fatal(err)
	}
	if edits != 2 || len(patches) != 2 {
		t.Fatalf("%d edits and %d patches, want 2 of each (one retry after the conflict)", edits, len(patches))
	}
	if rv := patches[0]["metadata"].(map[string]any)["resourceVersion"]; rv != "7" {
		t.Errorf("patch guarded by resourceVersion %v, want the one read (7)", rv)
	}
	if len(out.Spec.Faults) != 1 || out.Spec.Faults[0].Mode != simdevice.FaultUnhealthy || out.Spec.Faults[0].Node != "node-a" {
		t.Errorf("pool as written has faults %+v", out.Spec.Faults)
	}
}
