package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
)

// TestStandaloneClaimThroughKubeScheduler: with the default --allocator kube-scheduler a
// standalone claim is allocated by kube-scheduler for an allocation pod and handed over
// (allocated, reserved for nobody, no delete-protection finalizer, pod gone); a pod using it
// later runs on the claim's node, and the claim stays allocated after that pod is gone, as a
// claim the simulator allocated did. A second claim waits for the one device with its
// allocation pod (explain shows kube-scheduler's verdict) and, deleted, takes the pod with it.
func TestStandaloneClaimThroughKubeScheduler(t *testing.T) {
	r := newPodRig(t, 1, nil)
	e, ctx := r.e, t.Context()
	claims := e.Kube.ResourceV1().ResourceClaims(e.Namespace)
	if _, err := claims.Create(ctx, standaloneClaim("solo", r.class), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var solo *resourcev1.ResourceClaim
	eventually(t, 30*time.Second, func() (bool, string) {
		var err error
		if solo, err = claims.Get(ctx, "solo", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return handedOver(ctx, e, solo)
	})
	if got := describeAllocation(solo); !strings.HasPrefix(got, "allocated "+r.node+" ") {
		t.Fatalf("solo: %s, want allocated on %s", got, r.node)
	}
	if n := r.ctrl.Metric(t, "draforge_controller_allocations_total"); n != 1 {
		t.Errorf("draforge_controller_allocations_total = %v, want 1 (the handed-over claim)", n)
	}

	// A second claim for the same device waits with its allocation pod.
	if _, err := claims.Create(ctx, standaloneClaim("waiting", r.class), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waiting, err := claims.Get(ctx, "waiting", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, allocationpod.Name(waiting), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true, ""
			}
		}
		return false, fmt.Sprintf("allocation pod %s not judged by kube-scheduler yet: %+v", p.Name, p.Status.Conditions)
	})
	out := mustCLI(t, "explain", "claim/waiting", "-n", e.Namespace)
	for _, want := range []string{"Allocation pod: " + allocationpod.Name(waiting), "Scheduler: Unschedulable:", "Requests:"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain claim/waiting lacks %q:\n%s", want, out)
		}
	}
	if out := mustCLI(t, "claims", "-n", e.Namespace); strings.Contains(out, allocationpod.NamePrefix) {
		t.Errorf("draforge claims lists an allocation pod as a claim's pod:\n%s", out)
	}

	// A user pod shares the handed-over claim: it runs on the claim's node.
	user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user"}, Spec: corev1.PodSpec{
		RestartPolicy:  corev1.RestartPolicyNever,
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("solo")}},
		Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
	}}
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := r.waitPod(t, "user", 60*time.Second, podRunning)
	if p.Spec.NodeName != r.node {
		t.Errorf("user pod on %q, want the claim's node %s", p.Spec.NodeName, r.node)
	}
	if c, err := claims.Get(ctx, "solo", metav1.GetOptions{}); err != nil || len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].Name != "user" {
		t.Fatalf("solo while the user pod runs: %v %+v", err, c.Status.ReservedFor)
	}
	if err := e.Kube.CoreV1().Pods(e.Namespace).Delete(ctx, "user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		c, err := claims.Get(ctx, "solo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(c.Status.ReservedFor) == 0, fmt.Sprintf("reservedFor %v", c.Status.ReservedFor)
	})
	time.Sleep(2 * time.Second) // a deallocation would follow the reservation's removal at once
	c, err := claims.Get(ctx, "solo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || describeAllocation(c) != describeAllocation(solo) || slices.Contains(c.Finalizers, resourcev1.Finalizer) {
		t.Errorf("after the user pod: %s finalizers %v, want still %s", describeAllocation(c), c.Finalizers, describeAllocation(solo))
	}

	// The waiting claim deleted: its allocation pod goes with it.
	if err := claims.Delete(ctx, "waiting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, allocationpod.Name(waiting), metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("allocation pod of the deleted claim: %v", err)
	})
}
