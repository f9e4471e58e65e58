package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// TestHarnessServesDRA proves the local control plane is a real DRA-capable API server: it
// serves resource.k8s.io/v1, accepts a DeviceClass, a ResourceSlice and a ResourceClaim, and
// lets a ResourceClaim's status.allocation be written.
func TestHarnessServesDRA(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()

	groups, err := e.Kube.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1")
	if err != nil {
		t.Fatalf("resource.k8s.io/v1 not served: %v", err)
	}
	served := map[string]bool{}
	for _, r := range groups.APIResources {
		served[r.Name] = true
	}
	for _, want := range []string{"deviceclasses", "resourceslices", "resourceclaims", "resourceclaims/status"} {
		if !served[want] {
			t.Errorf("resource.k8s.io/v1 does not serve %s", want)
		}
	}

	suffix := rand.String(5)
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "harness-gpu-" + suffix},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "sim.draforge.oaslananka"`},
		}}},
	}
	if _, err := e.Kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceClass: %v", err)
	}
	// t.Context() is canceled before cleanups run: a leftover slice of the simulated driver's
	// name, published by hand, would make later tests' claims not DRAForge's.
	t.Cleanup(func() {
		_ = e.Kube.ResourceV1().DeviceClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})

	node := "harness-node-" + suffix
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "harness-" + suffix},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "sim.draforge.oaslananka",
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices:  []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
		},
	}
	if _, err := e.Kube.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceSlice: %v", err)
	}
	t.Cleanup(func() {
		_ = e.Kube.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
	})

	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: e.Namespace},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name:    "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name},
		}}}},
	}
	claim, err = e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ResourceClaim: %v", err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: "sim.draforge.oaslananka", Pool: node, Device: "gpu-0",
		}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}
	if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write status.allocation: %v", err)
	}
	got, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Device != "gpu-0" {
		t.Fatalf("allocation not persisted: %+v", got.Status.Allocation)
	}
}
