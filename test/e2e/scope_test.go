package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
)

// realDriver is a driver DRAForge does not simulate, published by hand as a real driver would.
const realDriver = "gpu.real-vendor.com"

// TestScopeBesideARealDriver: on a cluster where a real driver publishes devices beside
// DRAForge's, DRAForge allocates only the claims every request of which can be met only by
// devices it publishes. A standalone claim of the real driver's class, one of a class that
// selects both drivers' devices, and a mixed claim (one simulated request, one real) get no
// allocation pod and no write: kube-apiserver's audit log shows none but the test's own
// create, while a simulated claim created beside them is allocated and handed over. explain
// says why each is left alone.
func TestScopeBesideARealDriver(t *testing.T) {
	if auditLogPath == "" {
		t.Skip("needs the audit log of the control plane this package starts (not available with " + "DRAFORGE_E2E_KUBECONFIG)")
	}
	r := newPodRig(t, 2, nil)
	e, ctx := r.e, t.Context()
	real := realLookingNode(t, e, r.prefix+"-real", nil)
	publishRealSlice(t, e, r.prefix+"-real-slice", real.Name)
	realClass := r.prefix + "-real"
	anyClass := r.prefix + "-any"
	for name, expr := range map[string]string{realClass: fmt.Sprintf("device.driver == %q", realDriver), anyClass: "true"} {
		c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}}
		if _, err := e.Kube.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = e.Kube.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}

	claims := e.Kube.ResourceV1().ResourceClaims(e.Namespace)
	mixed := standaloneClaim("mixed", r.class)
	mixed.Spec.Devices.Requests = append(mixed.Spec.Devices.Requests,
		resourcev1.DeviceRequest{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: realClass}})
	leftAlone := []*resourcev1.ResourceClaim{standaloneClaim("real", realClass), standaloneClaim("any", anyClass), mixed}
	for _, c := range append(leftAlone, standaloneClaim("sim", r.class)) {
		if _, err := claims.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The controller is at work: the simulated claim is allocated through its allocation pod.
	waitHandedOver(t, e, "sim", 60*time.Second)
	// Every pending claim is passed over again on a class change (the claim machine's
	// pendingClaims trigger): give the left-alone claims a second chance to be touched.
	class, err := e.Kube.ResourceV1().DeviceClasses().Get(ctx, anyClass, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	class.Labels = map[string]string{"touched": "yes"}
	if _, err := e.Kube.ResourceV1().DeviceClasses().Update(ctx, class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)

	for _, c := range leftAlone {
		got, err := claims.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allocation != nil || len(got.Finalizers) > 0 || len(got.Status.ReservedFor) > 0 {
			t.Errorf("claim %s was touched: allocation %v finalizers %v reservedFor %v", c.Name, got.Status.Allocation != nil, got.Finalizers, got.Status.ReservedFor)
		}
		if _, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, allocationpod.Name(got), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("claim %s has an allocation pod (%v)", c.Name, err)
		}
		evs, err := e.Kube.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + c.Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			t.Errorf("Event about claim %s: %s %s (from %s)", c.Name, ev.Reason, ev.Message, ev.Source.Component)
		}
	}
	// What kube-apiserver saw: the test's creates, nothing else, on the left-alone claims; and
	// the simulated claim's handoff writes, so the log is known to record DRAForge's writes.
	writes := auditedClaimWrites(t, e.Namespace)
	for _, c := range leftAlone {
		if w := writes[c.Name]; len(w) != 1 || w[0] != "create resourceclaims" {
			t.Errorf("writes the API server saw on %s: %v, want only the test's create", c.Name, w)
		}
	}
	if w := writes["sim"]; len(w) < 2 {
		t.Errorf("writes on the simulated claim: %v, want the create and kube-scheduler's and DRAForge's handoff writes", w)
	}

	// explain says why each is left alone, naming the request and a real device.
	for name, want := range map[string]string{
		"real":  "request gpu: device " + realDriver + "/" + r.prefix + "-real-pool/gpu-0 on node " + real.Name + ", which DRAForge does not publish",
		"any":   "request gpu: device ", // the first foreign device by slice name, maybe another test's
		"mixed": "request nic: device " + realDriver,
	} {
		out := mustCLI(t, "explain", "claim/"+name, "-n", e.Namespace)
		if !strings.Contains(out, "Scope:    left to Kubernetes") || !strings.Contains(out, want) || !strings.Contains(out, "which DRAForge does not publish") {
			t.Errorf("explain claim/%s does not say why it is left alone (want %q):\n%s", name, want, out)
		}
	}
	if out := mustCLI(t, "explain", "claim/sim", "-n", e.Namespace); !strings.Contains(out, "Scope:    simulated: every request (gpu)") {
		t.Errorf("explain claim/sim lacks its scope:\n%s", out)
	}
}

// TestAllocationPodOnlyOnSimulatedNodes: a pool of simulated devices on a real-looking node
// (Ready, schedulable, without the simulated-node label, as in the kubelet plugin's mode)
// makes a standalone claim of its class DRAForge's, but kube-scheduler must not place the
// claim's allocation pod on that node: a real kubelet would run it. The pod stays unschedulable
// for node affinity; once a simulated node offers the devices, the claim is allocated there.
func TestAllocationPodOnlyOnSimulatedNodes(t *testing.T) {
	r := newPodRig(t, 1, nil)
	e, ctx := r.e, t.Context()
	label := "draforge.test/real-pool"
	real := realLookingNode(t, e, r.prefix+"-real", map[string]string{label: r.prefix})
	e.Apply(t, e.Namespace, newPool(e.Namespace, "on-real", map[string]any{
		"driverName": r.driver, "poolName": "on-real", "deviceType": "gpu", "deviceCount": int64(1),
		"nodeSelector": map[string]any{label: r.prefix},
	}))
	e.WaitPoolReady(t, e.Namespace, "on-real")
	// The rig's simulated device is taken first, so only the real node offers one.
	claims := e.Kube.ResourceV1().ResourceClaims(e.Namespace)
	if _, err := claims.Create(ctx, standaloneClaim("first", r.class), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHandedOver(t, e, "first", 60*time.Second)
	first, err := claims.Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeAllocation(first); !strings.HasPrefix(got, "allocated "+r.node+" ") {
		t.Fatalf("first: %s, want on the simulated node %s", got, r.node)
	}
	waiting, err := claims.Create(ctx, standaloneClaim("second", r.class), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var msg string
	eventually(t, 60*time.Second, func() (bool, string) {
		p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, allocationpod.Name(waiting), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("allocation pod bound to %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				msg = c.Message
				return true, ""
			}
		}
		return false, "allocation pod not judged yet"
	})
	if !strings.Contains(msg, "didn't match Pod's node affinity/selector") {
		t.Errorf("kube-scheduler's verdict %q does not name node affinity", msg)
	}
	time.Sleep(3 * time.Second)
	if c, err := claims.Get(ctx, "second", metav1.GetOptions{}); err != nil || c.Status.Allocation != nil {
		t.Fatalf("second claim allocated with only the real node's device free: %v %s", err, describeAllocation(c))
	}
	p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, allocationpod.Name(waiting), metav1.GetOptions{})
	if err != nil || p.Spec.NodeName != "" {
		t.Fatalf("allocation pod: %v, bound to %q", err, p.Spec.NodeName)
	}
	_ = real

	// A simulated device frees up: the claim is allocated on the simulated node.
	if err := claims.Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHandedOver(t, e, "second", 90*time.Second)
	if c, _ := claims.Get(ctx, "second", metav1.GetOptions{}); !strings.HasPrefix(describeAllocation(c), "allocated "+r.node+" ") {
		t.Errorf("second: %s, want on the simulated node %s", describeAllocation(c), r.node)
	}
}

// realLookingNode creates a Node as a real kubelet registers one: Ready, schedulable, with
// allocatable resources, without the simulated-node label. Nothing heartbeats it, so the test
// removes it when done.
func realLookingNode(t *testing.T, e *env, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	ctx := t.Context()
	l := map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}
	for k, v := range labels {
		l[k] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	n, err := e.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	now := metav1.Now()
	status := corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}},
	}
	// kube-controller-manager's node controllers write the new node too: retry on conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if n, err = e.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		n.Status = status
		n, err = e.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// publishRealSlice publishes one pool of two GPUs for node as a real driver would: no DRAForge
// labels, the driver's own name.
func publishRealSlice(t *testing.T, e *env, name, node string) {
	t.Helper()
	pool := strings.TrimSuffix(name, "-slice") + "-pool"
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: realDriver, NodeName: ptr.To(node),
		Pool: resourcev1.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{
			{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("real-1")}}},
			{Name: "gpu-1", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("real-1")}}},
		},
	}}
	if _, err := e.Kube.ResourceV1().ResourceSlices().Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.ResourceV1().ResourceSlices().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// auditedClaimWrites reads kube-apiserver's audit log and returns, per claim of namespace ns,
// the writes it completed ("verb resource[/subresource]"), in order.
func auditedClaimWrites(t *testing.T, ns string) map[string][]string {
	t.Helper()
	f, err := os.Open(auditLogPath)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			ObjectRef struct {
				Resource, Namespace, Name, Subresource string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line: %v", err)
		}
		o := ev.ObjectRef
		if ev.Stage != "ResponseComplete" || o.Resource != "resourceclaims" || o.Namespace != ns || o.Name == "" {
			continue
		}
		w := ev.Verb + " " + o.Resource
		if o.Subresource != "" {
			w += "/" + o.Subresource
		}
		if ev.ResponseStatus.Code >= 300 {
			w += fmt.Sprintf(" (%d)", ev.ResponseStatus.Code)
		}
		out[o.Name] = append(out[o.Name], w)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitHandedOver waits until the standalone claim name is handed over (handedOver).
func waitHandedOver(t *testing.T, e *env, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() (bool, string) {
		c, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return handedOver(t.Context(), e, c)
	})
}
