package allocator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
)

func newPod(name, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{NodeName: nodeName},
	}
}

func directRef(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To(claim)})
	return p
}

// templateRef makes the pod use a claim generated from a template, with a name that is not
// <pod>-<entry>.
func templateRef(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("tpl")})
	p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "gpu", ResourceClaimName: ptr.To(claim)})
	return p
}

func ownedBy(c *resourcev1.ResourceClaim, p *corev1.Pod) *resourcev1.ResourceClaim {
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
	return c
}

// predecessorPod is the allocation pod of an earlier claim of the same name (another UID): it
// references this claim by name but is not its allocation pod, so it counts as a user.
func predecessorPod(c *resourcev1.ResourceClaim) *corev1.Pod {
	old := c.DeepCopy()
	old.UID = "old-uid"
	return allocationpod.Build(old)
}

func TestClaimNeedsSimulatedAllocation(t *testing.T) {
	claim := func() *resourcev1.ResourceClaim { return newClaim("gpu-x7k2q", exactly("gpu", "gpu", 1)) }
	allocated := claim()
	allocated.Status.Allocation = &resourcev1.AllocationResult{}
	deleting := claim()
	deleting.DeletionTimestamp = &metav1.Time{}
	otherNS := directRef(newPod("p", ""), "gpu-x7k2q")
	otherNS.Namespace = "elsewhere"
	owner := newPod("owner", "")

	for _, tc := range []struct {
		name  string
		claim *resourcev1.ResourceClaim
		pods  []*corev1.Pod
		want  bool
	}{
		{"no pods", claim(), nil, true},
		{"allocated", allocated, nil, false},
		{"being deleted", deleting, nil, false},
		{"unscheduled pod, direct", claim(), []*corev1.Pod{directRef(newPod("p", ""), "gpu-x7k2q")}, false},
		{"scheduled pod, direct", claim(), []*corev1.Pod{directRef(newPod("p", "node-a"), "gpu-x7k2q")}, true},
		{"unscheduled pod, template status", claim(), []*corev1.Pod{templateRef(newPod("p", ""), "gpu-x7k2q")}, false},
		{"unscheduled pod, other claim", claim(), []*corev1.Pod{templateRef(newPod("p", ""), "gpu-other")}, true},
		{"unscheduled owner pod before status", ownedBy(claim(), owner), []*corev1.Pod{owner}, false},
		{"owner pod done or gone", ownedBy(claim(), owner), nil, false},
		{"owner pod scheduled", ownedBy(claim(), newPod("owner", "node-a")), []*corev1.Pod{newPod("owner", "node-a")}, false},
		{"pod in other namespace", claim(), []*corev1.Pod{otherNS}, true},
		{"scheduled and unscheduled", claim(), []*corev1.Pod{directRef(newPod("a", "node-a"), "gpu-x7k2q"), directRef(newPod("b", ""), "gpu-x7k2q")}, false},
		// The claim's own allocation pod (--allocator kube-scheduler) is no user of it.
		{"own allocation pod", claim(), []*corev1.Pod{allocationpod.Build(claim())}, true},
		{"own allocation pod and an unscheduled user", claim(), []*corev1.Pod{allocationpod.Build(claim()), directRef(newPod("b", ""), "gpu-x7k2q")}, false},
		{"allocation pod of a predecessor", claim(), []*corev1.Pod{allocationpod.Build(newClaimLike(claim(), "gpu-x7k2q-old"))}, true},
		{"predecessor's allocation pod naming this claim", claim(), []*corev1.Pod{predecessorPod(claim())}, false},
	} {
		if got := ClaimNeedsSimulatedAllocation(tc.claim, tc.pods); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
