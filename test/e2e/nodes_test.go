package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/draforge/draforge/drivers/simnode"
)

// TestSimulatedNodesTakeWorkloads: `draforge nodes apply` creates Nodes kube-scheduler can place
// pods on (status.allocatable written through the status subresource), kube-controller-manager
// lifts the not-ready taint a new node gets once it sees Ready, creates the namespace's default
// ServiceAccount (pods are admitted) and a Deployment's ReplicaSet and pods; a pod asking for
// more than a node's allocatable stays Pending with the scheduler's reason. `nodes delete`
// removes them.
func TestSimulatedNodesTakeWorkloads(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	prefix := "wl-" + rand.String(4)
	out := mustCLI(t, "nodes", "apply", "--prefix", prefix, "--count", "2", "-l", "draforge.test/pool="+prefix,
		"--allocatable", "cpu=4,memory=8Gi,pods=10", "--lease-renew-interval", "7s")
	if !strings.Contains(out, "2 simulated nodes applied") {
		t.Fatalf("nodes apply said %q", out)
	}
	names := []string{prefix + "-0", prefix + "-1"}
	t.Cleanup(func() {
		for _, n := range names {
			_ = e.Kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	for _, name := range names {
		n, err := e.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[simnode.LabelSimulated] != "true" || n.Labels["draforge.test/pool"] != prefix || n.Labels[corev1.LabelHostname] != name {
			t.Errorf("%s labels %v", name, n.Labels)
		}
		if n.Annotations[simnode.AnnotationLeaseRenewInterval] != "7s" {
			t.Errorf("%s annotations %v", name, n.Annotations)
		}
		if got := n.Status.Allocatable.Cpu().String(); got != "4" {
			t.Errorf("%s allocatable cpu %s, want 4", name, got)
		}
	}
	// The node lifecycle controller removes node.kubernetes.io/not-ready once it sees Ready.
	eventually(t, 60*time.Second, func() (bool, string) {
		for _, name := range names {
			n, err := e.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(n.Spec.Taints) > 0 {
				return false, fmt.Sprintf("%s taints %v", name, n.Spec.Taints)
			}
		}
		return true, ""
	})
	// The ServiceAccount controller creates "default"; pods are refused without it.
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Kube.CoreV1().ServiceAccounts(e.Namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	pod := func(name, cpu string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"draforge.test/pool": prefix},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity(t, cpu)}}}},
			},
		}
	}
	for name, cpu := range map[string]string{"fits": "3", "too-big": "5"} {
		if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, pod(name, cpu), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, "fits", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return strings.HasPrefix(p.Spec.NodeName, prefix+"-"), "fits not bound: " + p.Spec.NodeName
	})
	e.waitPod(t, "too-big", 60*time.Second, unschedulableFor("Insufficient cpu"))

	// A Deployment: kube-controller-manager creates its ReplicaSet and pods, the scheduler binds them.
	replicas := int32(2)
	labels := map[string]string{"app": "wl"}
	dep := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod("", "1").Spec}
	if _, err := e.Kube.AppsV1().Deployments(e.Namespace).Create(ctx, deployment("wl", replicas, labels, dep), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		pods, err := e.Kube.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=wl"})
		if err != nil {
			return false, err.Error()
		}
		bound := 0
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Spec.NodeName, prefix+"-") {
				bound++
			}
		}
		return bound == int(replicas), fmt.Sprintf("%d of %d deployment pods bound", bound, replicas)
	})

	out = mustCLI(t, "nodes", "delete", "--prefix", prefix, "--count", "2")
	if !strings.Contains(out, "2 simulated nodes deleted") {
		t.Fatalf("nodes delete said %q", out)
	}
	for _, name := range names {
		if _, err := e.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); ignoreNotFound(err) != nil || err == nil {
			t.Errorf("node %s still there after delete (err %v)", name, err)
		}
	}
}

// TestNodesApplyRejectsBadInput: a bad SimulatedNodes file is refused with file:line:col before
// anything reaches the API server.
func TestNodesApplyRejectsBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	src := "apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedNodes\nmetadata:\n  name: bad\nspec:\n  prefix: bad\n  count: 2\n  taints:\n  - key: k\n    effect: Sometimes\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "nodes", "apply", "-f", bad)
	if r.code == 0 {
		t.Fatalf("nodes apply accepted a bad file:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, bad+":10:13") || !strings.Contains(r.stderr, "spec.taints.0.effect") {
		t.Errorf("error lacks the position bad.yaml:10:13 of the effect:\n%s", r.stderr)
	}
	e := newEnv(t)
	if _, err := e.Kube.CoreV1().Nodes().Get(t.Context(), "bad-0", metav1.GetOptions{}); err == nil {
		t.Error("node bad-0 was created from an invalid file")
	}
}

func mustQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func deployment(name string, replicas int32, labels map[string]string, tpl *corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: *tpl,
		},
	}
}

// TestScenarioSimulatedNodes: a scenario file's SimulatedNodes document is applied by `scenario
// apply` (before the pools that select its nodes) and removed by `scenario reset`.
func TestScenarioSimulatedNodes(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	prefix := "sc-" + rand.String(4)
	f := filepath.Join(t.TempDir(), "scenario.yaml")
	src := fmt.Sprintf("apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedNodes\nmetadata:\n  name: %[1]s\nspec:\n  prefix: %[1]s\n  names: [x, z]\n  allocatable: {pods: 5}\n", prefix)
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "scenario", "apply", "-f", f)
	if !strings.Contains(out, "SimulatedNodes "+prefix+" serverside-applied") {
		t.Errorf("scenario apply said %q", out)
	}
	for _, name := range []string{prefix + "-x", prefix + "-z"} {
		n, err := e.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.Allocatable.Pods().Value() != 5 || n.Labels[simnode.LabelSimulated] != "true" {
			t.Errorf("%s: allocatable %v labels %v", name, n.Status.Allocatable, n.Labels)
		}
	}
	out = mustCLI(t, "scenario", "reset", "-f", f)
	if !strings.Contains(out, "SimulatedNodes "+prefix+" deleted") {
		t.Errorf("scenario reset said %q", out)
	}
	for _, name := range []string{prefix + "-x", prefix + "-z"} {
		if _, err := e.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("node %s still there after scenario reset", name)
		}
	}
}
