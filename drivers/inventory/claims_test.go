package inventory

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
)

// TestAllocationPodShownOnItsClaim: an allocation pod is neither one of its claim's pods nor a
// listed pod; the claim shows it, with kube-scheduler's verdict.
func TestAllocationPodShownOnItsClaim(t *testing.T) {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: "ns", UID: "solo-uid"}}
	ap := allocationpod.Build(claim)
	ap.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/3 nodes are available: 3 cannot allocate all claims."}}
	user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: "ns"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("solo")}}}}
	s := &Snapshot{Claims: []*resourcev1.ResourceClaim{claim}, Pods: []*corev1.Pod{ap, user}}

	cv := Claim(s, claim)
	if len(cv.Pods) != 1 || cv.Pods[0] != "user" {
		t.Errorf("claim pods %v, want only the user pod", cv.Pods)
	}
	want := AllocationPodView{Name: ap.Name, Unschedulable: "Unschedulable: 0/3 nodes are available: 3 cannot allocate all claims."}
	if cv.AllocationPod == nil || *cv.AllocationPod != want {
		t.Errorf("allocation pod %+v, want %+v", cv.AllocationPod, want)
	}
	pods := Pods(s)
	if len(pods) != 1 || pods[0].Name != "user" {
		t.Errorf("pods %+v, want only the user pod", pods)
	}
	other := claim.DeepCopy()
	other.UID = "another"
	if cv := Claim(s, other); cv.AllocationPod != nil {
		t.Errorf("a claim re-created under the same name shows its predecessor's allocation pod: %+v", cv.AllocationPod)
	}
}
