package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// TestCLIExplainPod: a pod whose ResourceClaimTemplate asks for a DeviceClass that does not
// exist, and for more CPU than its only (simulated) node has. kube-controller-manager generates its claim (recorded in
// status.resourceClaimStatuses), kube-scheduler marks it unschedulable; `draforge explain
// pod/NAME` finds the generated claim, explains it with the allocator (ClassNotFound) and
// quotes the scheduler's message.
func TestCLIExplainPod(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	// One simulated node with 1 CPU, so the scheduler has a node to reject.
	prefix := "xp-" + rand.String(4)
	mustCLI(t, "nodes", "apply", "--prefix", prefix, "--count", "1", "-l", "draforge.test/pool="+prefix, "--allocatable", "cpu=1,memory=1Gi,pods=10")
	t.Cleanup(func() { _ = e.Kube.CoreV1().Nodes().Delete(context.Background(), prefix+"-0", metav1.DeleteOptions{}) })
	class := "missing-" + e.Namespace
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: e.Namespace},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
		}}}}},
	}
	if _, err := e.Kube.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods are refused until the ServiceAccount controller created "default".
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Kube.CoreV1().ServiceAccounts(e.Namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: e.Namespace},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"draforge.test/pool": prefix},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}},
					Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity(t, "2")}}}},
		},
	}
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out string
	eventually(t, 60*time.Second, func() (bool, string) {
		r := runCLI(t, "explain", "-n", e.Namespace, "pod/trainer")
		out = r.stdout
		return r.code == 0 && strings.Contains(out, "Scheduler: Unschedulable: 0/") && strings.Contains(out, "(template one-gpu → "), r.stdout + r.stderr
	})
	generated := ""
	p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, "trainer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.Name == "gpu" && st.ResourceClaimName != nil {
			generated = *st.ResourceClaimName
		}
	}
	if generated == "" {
		t.Fatalf("no generated claim in status %+v", p.Status.ResourceClaimStatuses)
	}
	t.Logf("explain pod/trainer:\n%s", out)
	for _, want := range []string{
		"Pod:       " + e.Namespace + "/trainer",
		"Node:      (not scheduled)",
		"Claim gpu (template one-gpu → " + generated + "):",
		"Claim:    " + e.Namespace + "/" + generated,
		"ClassNotFound",
		"pending: claim " + generated + " pending:",
		"; scheduler: 0/",
		"nodes are available",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain pod lacks %q:\n%s", want, out)
		}
	}
	var res struct {
		Scheduler *struct{ Reason, Message string } `json:"scheduler"`
		Claims    []struct {
			Claim  string `json:"claim"`
			Source string `json:"source"`
		} `json:"claims"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "explain", "-n", e.Namespace, "pod/trainer", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Scheduler == nil || res.Scheduler.Reason != "Unschedulable" || len(res.Claims) != 1 || res.Claims[0].Claim != generated || res.Claims[0].Source != "ResourceClaimTemplate" {
		t.Errorf("json %+v", res)
	}
	r := runCLI(t, "explain", "-n", e.Namespace, "pod/nope")
	if r.code != 1 || strings.TrimSpace(r.stderr) != `draforge: Pod "nope" not found in namespace "`+e.Namespace+`"` {
		t.Errorf("not found: exit %d stderr %q", r.code, r.stderr)
	}
}
