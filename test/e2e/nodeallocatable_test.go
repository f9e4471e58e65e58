package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
)

// TestNodeAllocatableDroppedNoRewrite: on the default control plane (DRANodeAllocatableResources
// off) kube-apiserver drops the node-allocatable cpu mapping profile example-cpu publishes. The
// controller takes the stripped slice as published: it is written once, and neither a new
// generation with the same slices nor a restarted controller rewrites it (both compare the
// stored slice with the desired one).
func TestNodeAllocatableDroppedNoRewrite(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	ctrl := startController(t)
	ctx := t.Context()
	e.Apply(t, e.Namespace, newPool(e.Namespace, "cpus", map[string]any{
		"driverName": "cpu.example.com", "deviceType": "numa", "deviceCount": int64(2), "profile": "example-cpu",
		"targetNodes": []any{"node-a"},
	}))
	e.WaitPoolReady(t, e.Namespace, "cpus")
	selector := simdevice.LabelSDPNamespace + "=" + e.Namespace + "," + simdevice.LabelSDPName + "=cpus"
	slices := func() map[string]string {
		list, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range list.Items {
			for _, d := range s.Spec.Devices {
				if d.NodeAllocatableResources != nil {
					t.Fatalf("slice %s kept device %s's nodeAllocatableResources: the gate is on, the test proves nothing", s.Name, d.Name)
				}
			}
			out[s.Name] = fmt.Sprintf("rv=%s gen=%d devices=%d", s.ResourceVersion, s.Spec.Pool.Generation, len(s.Spec.Devices))
		}
		return out
	}
	before := slices()
	if len(before) != 1 {
		t.Fatalf("slices %v, want one", before)
	}
	// A new generation whose slices are the same (a node selector that adds no node) makes
	// the controller plan the pool again and compare the stored slice with the desired one.
	patch := []byte(`{"spec":{"nodeSelector":{"draforge.test/no-such-label":"x"}}}`)
	if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Patch(ctx, "cpus", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolReady(t, e.Namespace, "cpus")
	time.Sleep(2 * time.Second)
	if after := slices(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a new generation with the same slices rewrote them: %v -> %v", before, after)
	}
	// So does a restarted controller, which has no memory of what it wrote.
	ctrl.Signal(9)
	<-ctrl.Exited
	ctrl = startController(t)
	eventually(t, 30*time.Second, func() (bool, string) {
		n := ctrl.Metric(t, "draforge_controller_sync_attempts_total")
		return n >= 3, fmt.Sprintf("%v sync attempts", n)
	})
	time.Sleep(2 * time.Second)
	if after := slices(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a restarted controller rewrote the slice: %v -> %v", before, after)
	}
	if n := ctrl.Metric(t, "draforge_controller_terminal_errors_total"); n != 0 {
		t.Errorf("terminal errors: %v", n)
	}
}
