package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/draforge/draforge/drivers/gpufabric"
)

// TestFabricFaultLeavesClique: three simulated GB200 nodes of one NVLink clique. Detaching the
// NVLink fabric of three of one node's four GPUs changes nothing (GFD labels the clique from the
// attached one); detaching the fourth drops the node's nvidia.com/gpu.clique label, so
// kube-scheduler no longer places a pod that needs the clique (node affinity, as NVIDIA's
// multi-node examples ask for it) there, while the pod already running on it keeps running.
// Clearing the faults brings the label back with the same clique, and the waiting pod runs.
func TestFabricFaultLeavesClique(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t)
	ctx := t.Context()
	const clique = "a1b2c3d4-e5f6-7890-abcd-ef1234567890.0"
	prefix := "cl-" + rand.String(4)
	mustCLI(t, "nodes", "apply", "--prefix", prefix, "--count", "3", "-l", "draforge.test/pool="+prefix,
		"-l", gpufabric.CliqueLabel+"="+clique, "--allocatable", "cpu=8,memory=16Gi,pods=10")
	t.Cleanup(func() {
		for i := range 3 {
			_ = e.Kube.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{})
		}
	})
	faulty := prefix + "-1"
	pool := newPool(e.Namespace, "gb200", map[string]any{"deviceType": "gpu", "deviceCount": int64(4),
		"profile": "nvidia-gpu-gb200", "nodeSelector": map[string]any{"draforge.test/pool": prefix}})
	e.Apply(t, "", pool)
	t.Cleanup(func() { e.DeleteDocs(t, []*unstructured.Unstructured{pool}) })
	e.WaitPoolReady(t, e.Namespace, "gb200")
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Kube.CoreV1().ServiceAccounts(e.Namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// A pod that needs the clique, pinned to one node.
	podOn := func(name, node string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{corev1.LabelHostname: node},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: gpufabric.CliqueLabel, Operator: corev1.NodeSelectorOpExists}}}}}}},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label := func(node string) (string, bool, string) {
		n, err := e.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := n.Labels[gpufabric.CliqueLabel]
		return v, ok, n.Annotations[gpufabric.DetachedCliqueAnnotation]
	}
	podOn("before", faulty)
	e.waitPod(t, "before", 60*time.Second, podRunning)

	detach := func(node string, device int) {
		t.Helper()
		out := mustCLI(t, "inject-fault", "gb200", "-n", e.Namespace, "--device", fmt.Sprint(device), "--node", node, "--mode", "fabric-detached")
		if !strings.Contains(out, "is fabric-detached") {
			t.Errorf("inject-fault said %q", out)
		}
	}
	for d := range 3 {
		detach(faulty, d)
	}
	// One GPU still attached keeps the label. The machine has seen those faults once a later
	// change has taken effect: every GPU of a sentinel node detached, its label gone.
	sentinel := prefix + "-2"
	for d := range 4 {
		detach(sentinel, d)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		v, ok, kept := label(sentinel)
		return !ok && kept == clique, fmt.Sprintf("%s: label %q (%v), kept %q", sentinel, v, ok, kept)
	})
	if v, ok, kept := label(faulty); !ok || v != clique || kept != "" {
		t.Fatalf("%s with an attached GPU: label %q (%v), kept %q; want the clique", faulty, v, ok, kept)
	}

	detach(faulty, 3)
	eventually(t, 30*time.Second, func() (bool, string) {
		v, ok, kept := label(faulty)
		return !ok && kept == clique, fmt.Sprintf("%s: label %q (%v), kept %q", faulty, v, ok, kept)
	})
	if v, ok, _ := label(prefix + "-0"); !ok || v != clique {
		t.Errorf("%s-0 lost its clique: %q %v", prefix, v, ok)
	}
	// kube-scheduler: the node no longer matches; the pod running there stays.
	podOn("after", faulty)
	e.waitPod(t, "after", 60*time.Second, unschedulableFor("didn't match Pod's node affinity/selector"))
	e.waitPod(t, "before", time.Second, podRunning)
	rep := doctorJSON(t, e.Namespace)
	if i := slices.IndexFunc(rep.Results, func(r doctorResult) bool { return r.ID == "DRA014" }); i < 0 || rep.Results[i].Status != "WARN" ||
		!slices.Contains(rep.Results[i].Evidence, "node "+faulty+" left clique "+clique+": every GPU's NVLink fabric is detached") {
		t.Errorf("doctor DRA014: %+v", rep.Results)
	}
	ex := runCLI(t, "explain", "-n", e.Namespace, "pod/after")
	if want := "Clique:    node " + faulty + " left clique " + clique + ": every GPU's NVLink fabric is detached"; !strings.Contains(ex.stdout, want) {
		t.Errorf("explain lacks %q:\n%s\n%s", want, ex.stdout, ex.stderr)
	}

	// The fabric back: the same clique, and the waiting pod runs.
	mustCLI(t, "clear-faults", "gb200", "-n", e.Namespace)
	for _, n := range []string{faulty, sentinel} {
		eventually(t, 30*time.Second, func() (bool, string) {
			v, ok, kept := label(n)
			return ok && v == clique && kept == "", fmt.Sprintf("%s: label %q (%v), kept %q", n, v, ok, kept)
		})
	}
	e.waitPod(t, "after", 60*time.Second, podRunning)
}
