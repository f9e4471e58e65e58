//go:build reliability

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

var eventually = e2eutil.Eventually

// newEnv is a namespace on the shared cluster with the CRDs and simulated nodes installed.
// At the end of the test, after its controllers are gone, its pools and their slices are
// removed: kube-controller-manager deletes the namespace, and pools left behind with their
// finalizer would be finished by the next test's controller, whose writes that test counts.
func newEnv(t *testing.T) *e2eutil.Env {
	t.Helper()
	e := e2eutil.NewEnv(t, shared.Kubeconfig)
	e.Setup(t)
	t.Cleanup(func() { removePools(t, e) })
	return e
}

// removePools deletes the namespace's SimulatedDevicePools without waiting for a controller
// (their finalizer dropped) and the ResourceSlices they published.
func removePools(t *testing.T, e *e2eutil.Env) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pools := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace)
	list, err := pools.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("cleanup: list pools: %v", err)
		return
	}
	for _, p := range list.Items {
		if _, err := pools.Patch(ctx, p.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Logf("cleanup: pool %s: %v", p.GetName(), err)
		}
		_ = pools.Delete(ctx, p.GetName(), metav1.DeleteOptions{})
	}
	if err := e.Kube.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: simdevice.LabelSDPNamespace + "=" + e.Namespace}); err != nil {
		t.Logf("cleanup: slices: %v", err)
	}
}

// deviceClass creates a DeviceClass selecting devices whose "scenario" attribute is value.
func deviceClass(t *testing.T, e *e2eutil.Env, name, value string) {
	t.Helper()
	c := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf(`has(device.attributes["sim.draforge.oaslananka"].scenario) && device.attributes["sim.draforge.oaslananka"].scenario == %q`, value),
		}}}},
	}
	if _, err := e.Kube.ResourceV1().DeviceClasses().Create(t.Context(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.ResourceV1().DeviceClasses().Delete(t.Context(), name, metav1.DeleteOptions{}) })
}

// pool is a pool spec publishing count devices with scenario attribute value on nodes.
func pool(count int, value string, nodes ...string) map[string]any {
	var targets []any
	for _, n := range nodes {
		targets = append(targets, n)
	}
	return map[string]any{"deviceType": "acc", "deviceCount": int64(count), "targetNodes": targets,
		"attributes": map[string]any{"scenario": map[string]any{"string": value}}}
}

func createPool(t *testing.T, e *e2eutil.Env, name string, spec map[string]any) {
	t.Helper()
	if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Create(t.Context(),
		pooltest.Object(e.Namespace, name, spec), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pool %s: %v", name, err)
	}
}

func patchCount(e *e2eutil.Env, name string, n int) error {
	_, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Patch(bg(), name, types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"deviceCount":%d}}`, n), metav1.PatchOptions{})
	return err
}

// createClaims creates claims prefix-000.. of one device of class, spaced by gap.
func createClaims(t *testing.T, e *e2eutil.Env, prefix, class string, from, to int, gap time.Duration) {
	t.Helper()
	for i := from; i < to; i++ {
		c := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", prefix, i), Namespace: e.Namespace},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
			}}}},
		}
		if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(bg(), c, metav1.CreateOptions{}); err != nil {
			t.Errorf("create claim %s: %v", c.Name, err)
		}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
}

// allocations returns status.allocation of every allocated claim of the namespace as JSON.
func allocations(t testing.TB, e *e2eutil.Env) map[string]string {
	t.Helper()
	list, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).List(bg(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list.Items {
		if c.Status.Allocation != nil {
			b, _ := json.Marshal(c.Status.Allocation)
			out[c.Name] = string(b)
		}
	}
	return out
}

// claimCount is the number of claims in the namespace.
func claimCount(t testing.TB, e *e2eutil.Env) int {
	t.Helper()
	list, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).List(bg(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// checkUnique fails when a device is allocated to two claims; it returns the device count.
func checkUnique(t testing.TB, allocs map[string]string) int {
	t.Helper()
	seen := map[string]string{}
	for name, j := range allocs {
		var a resourcev1.AllocationResult
		if err := json.Unmarshal([]byte(j), &a); err != nil {
			t.Fatal(err)
		}
		for _, r := range a.Devices.Results {
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			if other, dup := seen[id]; dup {
				t.Errorf("device %s allocated to both %s and %s", id, other, name)
			}
			seen[id] = name
		}
	}
	return len(seen)
}

// sameAllocations fails for every claim of before whose allocation changed in after.
func sameAllocations(t testing.TB, what string, before, after map[string]string) {
	t.Helper()
	for name, b := range before {
		if after[name] != b {
			t.Errorf("%s: allocation of %s changed:\n before %s\n after  %s", what, name, b, after[name])
		}
	}
}

// sliceSpecs returns the spec of every ResourceSlice of the namespace's pools, as JSON by name.
func sliceSpecs(t testing.TB, e *e2eutil.Env) map[string]string {
	t.Helper()
	list, err := e.Kube.ResourceV1().ResourceSlices().List(bg(), metav1.ListOptions{LabelSelector: simdevice.LabelSDPNamespace + "=" + e.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		b, _ := json.Marshal(s.Spec)
		out[s.Name] = string(b)
	}
	return out
}

// checkPoolSlices checks that pool publishes exactly count devices on each node of nodes, one
// slice per node with resourceSliceCount 1, and shows Ready for its current generation.
func checkPoolSlices(t testing.TB, e *e2eutil.Env, name string, count int, nodes ...string) (bool, string) {
	got := e.PoolSlices(t, e.Namespace, name)
	var devs []string
	for i := range count {
		devs = append(devs, fmt.Sprintf("acc-%d", i))
	}
	if len(got) != len(nodes) {
		return false, fmt.Sprintf("pool %s: slices on %d nodes, want %d: %v", name, len(got), len(nodes), got)
	}
	for _, n := range nodes {
		s := got[n]
		if strings.Count(s, "pool=") != 1 || !strings.Contains(s, " count=1 ") || !strings.HasSuffix(s, "devices="+strings.Join(devs, ",")) {
			return false, fmt.Sprintf("pool %s node %s: %q, want one slice of %d devices", name, n, s, count)
		}
	}
	u, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Get(bg(), name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	if !e2eutil.ConditionIs(u, "Ready", "True") {
		return false, fmt.Sprintf("pool %s not Ready for generation %d: %v", name, u.GetGeneration(), u.Object["status"])
	}
	return true, ""
}

func getPool(t testing.TB, e *e2eutil.Env, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Get(bg(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// timeline records timestamped observations for the report.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (l *timeline) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%7s  ", time.Since(l.start).Round(10*time.Millisecond))+fmt.Sprintf(format, args...))
}

func (l *timeline) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// handedOver checks, once every claim of the namespace is allocated, that the allocator left
// nothing behind and that the mode's allocator made each allocation. With `kube-scheduler`:
// each allocation was written by kube-scheduler (the field manager of status.allocation; the
// controller never writes it in that mode), no allocation pod remains (each is deleted once
// its claim is handed over; their names derive from the claim's UID, so none can exist twice),
// no claim is reserved for a pod or keeps kube-scheduler's delete-protection finalizer
// (allocationpod.HandedOver). With `simulator`: each allocation was written by the controller.
func handedOver(t testing.TB, e *e2eutil.Env, allocator string) (bool, string) {
	t.Helper()
	claims, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).List(bg(), metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	want := "draforge"
	if allocator == "kube-scheduler" {
		want = "kube-scheduler"
	}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			return false, c.Name + " not allocated"
		}
		if by := allocatedBy(&c); !strings.HasPrefix(by, want) {
			return false, fmt.Sprintf("%s: allocation written by %q, want %s", c.Name, by, want)
		}
		if !allocationpod.HandedOver(&c) {
			return false, fmt.Sprintf("%s: reservedFor %v finalizers %v", c.Name, c.Status.ReservedFor, c.Finalizers)
		}
	}
	pods, err := e.Kube.CoreV1().Pods(e.Namespace).List(bg(), metav1.ListOptions{LabelSelector: allocationpod.Label})
	if err != nil {
		return false, err.Error()
	}
	if len(pods.Items) > 0 {
		return false, fmt.Sprintf("%d allocation pods left, the first %s", len(pods.Items), pods.Items[0].Name)
	}
	return true, ""
}

// allocationPods is the number of allocation pods in the namespace.
func allocationPods(t testing.TB, e *e2eutil.Env) int {
	t.Helper()
	pods, err := e.Kube.CoreV1().Pods(e.Namespace).List(bg(), metav1.ListOptions{LabelSelector: allocationpod.Label})
	if err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

// allocatedBy is the field manager that owns a claim's status.allocation.
func allocatedBy(c *resourcev1.ResourceClaim) string {
	for _, m := range c.ManagedFields {
		if m.Subresource == "status" && m.FieldsV1 != nil && strings.Contains(string(m.FieldsV1.Raw), `"f:allocation"`) {
			return m.Manager
		}
	}
	return ""
}
