package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// TestNodeAllocatableDroppedNoRewrite: on the default control plane (DRANodeAllocatableResources
// off) kube-apiserver drops the node-allocatable cpu mapping profile example-cpu publishes. The
// controller takes the stripped slice as published: it is written once, and neither a new
// generation with the same slices nor a restarted controller rewrites it (both compare the
// stored slice with the desired one).
func TestNodeAllocatableDroppedNoRewrite(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	checkNodeAllocatablePool(t, e, func() *controller { return startController(t) }, false)
}

// TestNodeAllocatableKeptWithGate: on a control plane with DRANodeAllocatableResources (profile
// dra-all) kube-apiserver accepts example-cpu's mapping on a node declaring the feature (as a
// kubelet with the gate does; SimulatedNodes declaredFeatures) and keeps it (its validation:
// capacityKey names a capacity, capacityMultiplier set), and the slice is not rewritten either.
func TestNodeAllocatableKeptWithGate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own control plane")
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Dir: t.TempDir(), Profile: "dra-all"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	e := &env{e2eutil.NewEnv(t, c.Kubeconfig)}
	e.Setup(t)
	// node-a as examples/simulated-nodes.yaml declares it, plus the feature.
	e.Apply(t, "", &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": simnode.APIVersion, "kind": simnode.Kind, "metadata": map[string]any{"name": "rack-r1"},
		"spec": map[string]any{"prefix": "node", "names": []any{"a", "b"}, "labels": map[string]any{"draforge.test/rack": "r1"},
			"allocatable":      map[string]any{"cpu": "64", "memory": "256Gi", "pods": "110"},
			"declaredFeatures": []any{"DRANodeAllocatableResources"}},
	}})
	// No kube-scheduler here: the pool needs none.
	checkNodeAllocatablePool(t, e, func() *controller {
		return e2eutil.StartController(t, c.Kubeconfig, "--allocator", "simulator")
	}, true)
}

// checkNodeAllocatablePool publishes an example-cpu pool on node-a and checks that the stored
// slice has the mapping exactly when kept is true, and that a new generation with the same
// slices and a restarted controller leave it as written.
func checkNodeAllocatablePool(t *testing.T, e *env, start func() *controller, kept bool) {
	ctx := t.Context()
	ctrl := start()
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
				m := d.NodeAllocatableResources["cpu"].Mapping
				if got := m != nil && m.CapacityKey != nil && *m.CapacityKey == "cpu.example.com/cpu"; got != kept {
					t.Fatalf("slice %s device %s: nodeAllocatableResources %v, want the cpu mapping kept: %v", s.Name, d.Name, d.NodeAllocatableResources, kept)
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
	ctrl = start()
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
