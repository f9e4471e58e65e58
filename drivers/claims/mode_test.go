package claims

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
)

func TestParseMode(t *testing.T) {
	for _, s := range []string{"kube-scheduler", "simulator"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("%s: %q %v", s, m, err)
		}
	}
	for _, s := range []string{"", "Simulator", "scheduler"} {
		if _, err := ParseMode(s); err == nil || !strings.Contains(err.Error(), "want kube-scheduler or simulator") {
			t.Errorf("%q accepted or unclear: %v", s, err)
		}
	}
}

// TestNeedsAllocationPerMode: exactly one of the two observations holds for a standalone claim
// waiting for devices, by mode; neither holds for a claim kube-scheduler allocates for a user.
func TestNeedsAllocationPerMode(t *testing.T) {
	standalone := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "c-uid"}}
	user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: "ns"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}}}}
	own := allocationpod.Build(standalone)
	for _, tc := range []struct {
		name       string
		mode       Mode
		pods       []*corev1.Pod
		sim, sched bool
	}{
		{"simulator", Simulator, nil, true, false},
		{"kube-scheduler", KubeScheduler, nil, false, true},
		{"kube-scheduler, own allocation pod pending", KubeScheduler, []*corev1.Pod{own}, false, true},
		{"simulator, unscheduled user pod", Simulator, []*corev1.Pod{user}, false, false},
		{"kube-scheduler, unscheduled user pod", KubeScheduler, []*corev1.Pod{own, user}, false, false},
	} {
		sim := NeedsAllocation(Simulator, tc.mode, standalone, tc.pods)
		sched := NeedsAllocation(KubeScheduler, tc.mode, standalone, tc.pods)
		if sim.Holds != tc.sim || sched.Holds != tc.sched {
			t.Errorf("%s: claimNeedsSimulatedAllocation %v (%s), claimNeedsAllocationPod %v (%s); want %v, %v",
				tc.name, sim.Holds, sim.Message, sched.Holds, sched.Message, tc.sim, tc.sched)
		}
	}
}

func TestSchedulingMessage(t *testing.T) {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"}}
	if got := SchedulingMessage(c, nil); !strings.Contains(got, "draforge-alloc-u to be created") {
		t.Errorf("no pod: %q", got)
	}
	p := allocationpod.Build(c)
	if got := SchedulingMessage(c, p); !strings.Contains(got, "waiting for kube-scheduler") {
		t.Errorf("not tried yet: %q", got)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/1 nodes are available: 1 cannot allocate all claims."}}
	want := "kube-scheduler cannot place allocation pod draforge-alloc-u: Unschedulable: 0/1 nodes are available: 1 cannot allocate all claims."
	if got := SchedulingMessage(c, p); got != want {
		t.Errorf("unschedulable:\n got %q\nwant %q", got, want)
	}
}

func TestAdmissionWait(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewForbidden(gr, "p", errors.New("error looking up service account ns/default: serviceaccount \"default\" not found")), true},
		{apierrors.NewForbidden(gr, "p", errors.New("unable to create new content in namespace ns because it is being terminated")), true},
		{apierrors.NewForbidden(gr, "p", errors.New(`User "x" cannot create resource "pods"`)), false},
		{apierrors.NewBadRequest("error looking up service account"), false},
		{nil, false},
	} {
		if got := AdmissionWait(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}
