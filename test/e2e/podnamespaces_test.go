package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/podnamespaces"
)

// TestPodNamespacesFlag: a controller whose --pod-namespaces names another namespace writes no
// pod here (the chart would grant it none): a standalone claim gets no allocation pod and a pod
// kube-scheduler bound to a simulated node is not run; both wait with reason
// PodNamespaceNotAllowed naming the flag, instead of failing on Forbidden or saying nothing.
func TestPodNamespacesFlag(t *testing.T) {
	elsewhere := newEnv(t).Namespace
	r := newPodRigWith(t, 1, nil, nil, "--pod-namespaces="+elsewhere)
	e, ctx := r.e, t.Context()
	pending := func(machine, name string) func() (bool, string) {
		return func() (bool, string) {
			code, body := r.ctrl.GetDebug("/debug/machines/" + machine + "/" + e.Namespace + "/" + name)
			ok := code == http.StatusOK && strings.Contains(body, `"outcome":"pending"`) &&
				strings.Contains(body, "pending: "+podnamespaces.Reason+": ") && strings.Contains(body, "--pod-namespaces ("+elsewhere+")")
			return ok, fmt.Sprintf("%s %s: %d %s", machine, name, code, body)
		}
	}

	claim, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, standaloneClaim("solo", r.class), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, pending("claim", "solo"))
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, allocationpod.Name(claim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("allocation pod outside --pod-namespaces: want NotFound, got %v", err)
	}

	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, r.gpuPod("w", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitPod(t, "w", 60*time.Second, func(p *corev1.Pod) (bool, string) {
		return p.Spec.NodeName == r.node, fmt.Sprintf("pod w on node %q", p.Spec.NodeName)
	})
	eventually(t, 30*time.Second, pending("pod", "w"))
	p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("pod outside --pod-namespaces: phase %q, want Pending: the simulated kubelet must not run it", p.Status.Phase)
	}
}
