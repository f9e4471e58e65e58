package claims

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestHeldOnlyKeepsWhatTheAllocatorReads: the allocator's feed converts a claim's identity,
// deletion and allocation exactly as a whole conversion would, and nothing else; a claim whose
// allocation does not convert is not fed.
func TestHeldOnlyKeepsWhatTheAllocatorReads(t *testing.T) {
	now := metav1.Now()
	full := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", DeletionTimestamp: &now, Labels: map[string]string{"a": "b"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.example.com", Pool: "node-a", Device: "gpu-0", AdminAccess: ptr.To(false), ShareID: ptr.To[types.UID]("s")}}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "pu"}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(full)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := heldOnly(cache.DeletedFinalStateUnknown{Obj: &unstructured.Unstructured{Object: m}})
	if !ok {
		t.Fatal("not fed")
	}
	want := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", DeletionTimestamp: got.DeletionTimestamp},
		Status: resourcev1.ResourceClaimStatus{Allocation: full.Status.Allocation}}
	if !equality.Semantic.DeepEqual(got, want) || got.DeletionTimestamp == nil {
		t.Errorf("heldOnly = %+v\nwant %+v", got, want)
	}

	delete(m["status"].(map[string]any), "allocation")
	if got, ok := heldOnly(&unstructured.Unstructured{Object: m}); !ok || got.Status.Allocation != nil {
		t.Errorf("pending claim: %+v, %v", got, ok)
	}
	m["status"].(map[string]any)["allocation"] = "not an object"
	if _, ok := heldOnly(&unstructured.Unstructured{Object: m}); ok {
		t.Error("a claim whose allocation does not convert was fed")
	}
}
