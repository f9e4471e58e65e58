package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/pools"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// TestPoolLifecycle: publish on two nodes, concurrent spec updates converge to the last one with
// one generation bump per change, an invalid spec is reported with a clear condition and
// unpublished, and deletion removes every slice before the finalizer lets the pool go.
func TestPoolLifecycle(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	ctrl := startController(t)
	ctx := t.Context()
	api := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace)
	if _, err := api.Create(ctx, newPool(e.Namespace, "burst", map[string]any{
		"deviceType": "gpu", "deviceCount": int64(2), "targetNodes": []any{"node-a", "node-b"},
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pool := e.WaitPoolReady(t, e.Namespace, "burst")
	if fins := pool.GetFinalizers(); len(fins) != 1 || fins[0] != "draforge.oaslananka/resourceslice-cleanup" {
		t.Fatalf("finalizers %v", fins)
	}
	got := e.PoolSlices(t, e.Namespace, "burst")
	want := fmt.Sprintf("pool=%s/burst/node-a gen=1 count=1 devices=gpu-0,gpu-1", e.Namespace)
	if len(got) != 2 || got["node-a"] != want {
		t.Fatalf("slices %v, want node-a %q and a node-b slice", got, want)
	}

	// Concurrent burst: 4, 5, 6 at once, then 3 last.
	var wg sync.WaitGroup
	for _, n := range []int{4, 5, 6} {
		wg.Go(func() {
			patch := fmt.Sprintf(`{"spec":{"deviceCount":%d}}`, n)
			if _, err := api.Patch(ctx, "burst", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := api.Patch(ctx, "burst", types.MergePatchType, []byte(`{"spec":{"deviceCount":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolReady(t, e.Namespace, "burst")
	eventually(t, 30*time.Second, func() (bool, string) {
		got = e.PoolSlices(t, e.Namespace, "burst")
		return strings.Contains(got["node-a"], "devices=gpu-0,gpu-1,gpu-2") && strings.Contains(got["node-b"], "devices=gpu-0,gpu-1,gpu-2"), fmt.Sprint(got)
	})
	for node, s := range got {
		var gen int
		fmt.Sscanf(s[strings.Index(s, "gen="):], "gen=%d", &gen)
		if gen < 2 || gen > 5 {
			t.Errorf("node %s: generation %d after 4 changes from 1", node, gen)
		}
	}

	// A second pool publishing the same DRA pool name is invalid (only the controller can see
	// across objects): InvalidSpec naming the older pool, nothing published, the first untouched.
	if _, err := api.Create(ctx, newPool(e.Namespace, "copycat", map[string]any{
		"deviceType": "gpu", "deviceCount": int64(1), "poolName": "burst", "targetNodes": []any{"node-c"},
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		u, err := api.Get(ctx, "copycat", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _ := json.Marshal(u.Object["status"])
		return conditionIs(u, "Ready", "False") && strings.Contains(string(conds), "InvalidSpec") &&
			strings.Contains(string(conds), "already published by SimulatedDevicePool burst"), string(conds)
	})
	if s := e.PoolSlices(t, e.Namespace, "copycat"); len(s) != 0 {
		t.Errorf("invalid pool published %v", s)
	}
	if err := api.Delete(ctx, "copycat", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolGone(ctx, t, e.Namespace, "copycat")
	if after := e.PoolSlices(t, e.Namespace, "burst"); fmt.Sprint(after) != fmt.Sprint(got) {
		t.Errorf("the valid pool changed: %v -> %v", got, after)
	}

	if err := api.Delete(ctx, "burst", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolGone(ctx, t, e.Namespace, "burst")
	if n := ctrl.Metric(t, "draforge_controller_terminal_errors_total"); n != 0 {
		t.Errorf("terminal errors: %v", n)
	}
}

// TestRestartMakesNoWrites: a controller restarted over converged pools and claims makes no
// write requests (client-side attribution through rest_client_requests_total) besides the node
// machine's heartbeats of the simulated nodes that fall due meanwhile (counted from watches).
// It runs on a control plane of its own: objects other tests leave behind in the shared one
// (pods still terminating, claims of other drivers) are work a restart rightly does.
func TestRestartMakesNoWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own control plane")
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	e := &env{e2eutil.NewEnv(t, c.Kubeconfig)}
	e.Setup(t)
	// This control plane runs no kube-scheduler: the simulator allocates the standalone claims.
	first := e2eutil.StartController(t, c.Kubeconfig, "--allocator", "simulator")
	docs := e.ApplyFiles(t, e.Namespace, "testdata/restart.yaml")
	e.WaitPoolReady(t, e.Namespace, "restart")
	// One device on each of node-a and node-b: the two claims get one each, in either order.
	nodes := map[string]bool{}
	for _, name := range []string{"one", "two"} {
		eventually(t, 30*time.Second, func() (bool, string) {
			c, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got := describeAllocation(c)
			if f := strings.Fields(got); len(f) >= 2 && f[0] == "allocated" {
				nodes[f[1]] = true
				return true, got
			}
			return false, name + ": " + got
		})
	}
	if !nodes["node-a"] || !nodes["node-b"] {
		t.Fatalf("claims allocated on %v, want node-a and node-b", nodes)
	}
	if w := first.Writes(t); w == 0 {
		t.Fatal("the first controller made no writes: the test would prove nothing")
	}
	first.Signal(9)
	<-first.Exited

	heartbeats := e.CountHeartbeats(t)
	second := e2eutil.StartController(t, c.Kubeconfig, "--allocator", "simulator")
	// Readiness implies synced caches; give the machines time to sweep every object.
	eventually(t, 30*time.Second, func() (bool, string) {
		n := second.Metric(t, "draforge_controller_sync_attempts_total")
		return n >= 3, fmt.Sprintf("%v sync attempts", n)
	})
	time.Sleep(2 * time.Second)
	w := second.Writes(t)
	if hb := heartbeats(); w > float64(hb) {
		t.Errorf("restart with nothing changed made %v writes, of which %d node heartbeats", w, hb)
	}
	e.DeleteDocs(t, docs) // while a controller runs to release the finalizer
}

// TestLegacyAdoptionAndOrphans: a slice of the earlier project (deterministic legacy name, only
// the sdp-name label) is adopted by its pool and replaced by a valid per-node pool; a slice
// labelled with the UID of a pool that no longer exists is swept; a slice of another live pool
// is never touched.
func TestLegacyAdoptionAndOrphans(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t)
	ctx := t.Context()
	slices := e.Kube.ResourceV1().ResourceSlices()
	mk := func(name string, labels map[string]string, node string) {
		t.Helper()
		s := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: resourcev1.ResourceSliceSpec{Driver: "sim.draforge.oaslananka", NodeName: &node,
				Pool:    resourcev1.ResourcePool{Name: "legacy-" + name, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "dev-0"}}},
		}
		if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = slices.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	legacy := strings.ReplaceAll("sim-slice-old-node-a-"+e.Namespace, ".", "-")
	mk(legacy, map[string]string{simdevice.LabelSDPName: "old"}, "node-a")
	mk("orphan-"+e.Namespace, map[string]string{simdevice.LabelSDPName: "gone", simdevice.LabelSDPNamespace: e.Namespace,
		simdevice.LabelSDPUID: "00000000-0000-0000-0000-000000000000"}, "node-a")
	mk("bystander-"+e.Namespace, map[string]string{"app": "someone-else"}, "node-a")

	api := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace)
	if _, err := api.Create(ctx, newPool(e.Namespace, "old", map[string]any{
		"deviceType": "gpu", "deviceCount": int64(1), "targetNodes": []any{"node-a"},
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolReady(t, e.Namespace, "old")
	exists := func(name string) bool {
		_, err := slices.Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		got := e.PoolSlices(t, e.Namespace, "old")
		return !exists(legacy) && !exists("orphan-"+e.Namespace) && len(got) == 1 &&
				strings.HasPrefix(got["node-a"], "pool="+e.Namespace+"/old/node-a gen=1"),
			fmt.Sprintf("legacy %v orphan %v slices %v", exists(legacy), exists("orphan-"+e.Namespace), got)
	})
	if !exists("bystander-" + e.Namespace) {
		t.Error("a slice not owned by any pool was deleted")
	}
	if err := api.Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolGone(ctx, t, e.Namespace, "old")
}

// TestPoolFollowsNodeLabelsNotHeartbeats: the pool machine's Node trigger fires on label
// changes only (fields: ["metadata.labels"]). A Node's Ready heartbeats and annotation changes
// start no pool sync; labelling the Node into a pool's nodeSelector publishes a slice on it.
func TestPoolFollowsNodeLabelsNotHeartbeats(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	ctrl := startController(t)
	ctx := t.Context()
	nodes := e.Kube.CoreV1().Nodes()
	node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "relabel-" + e.Namespace}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	api := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace)
	if _, err := api.Create(ctx, newPool(e.Namespace, "by-label", map[string]any{
		"deviceType": "gpu", "deviceCount": int64(1), "nodeSelector": map[string]any{"e2e.draforge.oaslananka/relabel": e.Namespace},
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Delete(context.Background(), "by-label", metav1.DeleteOptions{}); err == nil {
			e.WaitPoolGone(context.Background(), t, e.Namespace, "by-label")
		}
	})
	e.WaitPoolReady(t, e.Namespace, "by-label")
	if got := e.PoolSlices(t, e.Namespace, "by-label"); len(got) != 0 {
		t.Fatalf("slices before any node matches: %v", got)
	}
	syncs := func() float64 { return ctrl.Metric(t, "draforge_controller_sync_attempts_total", `pipeline="pool"`) }
	time.Sleep(time.Second) // let the pass that wrote Ready settle
	before := syncs()

	// Heartbeats and an annotation: updates of the Node that change no label.
	for i := range 5 {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := nodes.Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			now := metav1.Now()
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now}}
			_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := nodes.Patch(ctx, node.Name, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"e2e.draforge.oaslananka/beat":"%d"}}}`, i), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if after := syncs(); after != before {
		t.Errorf("10 Node updates without a label change made %v pool syncs", after-before)
	}

	// A label change re-plans the pools: the node now matches the nodeSelector.
	if _, err := nodes.Patch(ctx, node.Name, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{"e2e.draforge.oaslananka/relabel":%q}}}`, e.Namespace), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		got := e.PoolSlices(t, e.Namespace, "by-label")
		return len(got) == 1 && got[node.Name] != "", fmt.Sprint(got)
	})
	if after := syncs(); after <= before {
		t.Errorf("the label change made no pool sync (%v, before %v)", after, before)
	}
}

// TestPoolOnMoreNodesThanStatusLists: a pool on more nodes than status.nodes lists
// (pools.MaxStatusNodes) publishes on all of them and turns Ready; its status lists the first
// pools.MaxStatusNodes nodes by name and counts them all.
func TestPoolOnMoreNodesThanStatusLists(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t, "--kube-api-qps=2000", "--kube-api-burst=4000")
	ctx := t.Context()
	n := pools.MaxStatusNodes + 1
	labels := map[string]string{"draforge-e2e/wide": e.Namespace}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: "draforge-e2e/wide=" + e.Namespace})
	})
	names := make(chan string)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for name := range names {
				if _, err := e.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range n {
		names <- fmt.Sprintf("wide-%s-%05d", e.Namespace, i)
	}
	close(names)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	api := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace)
	if _, err := api.Create(ctx, newPool(e.Namespace, "wide", map[string]any{
		"deviceType": "gpu", "deviceCount": int64(1), "nodeSelector": map[string]any{"draforge-e2e/wide": e.Namespace},
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var listed int
	var count int64
	var first any
	eventually(t, 3*time.Minute, func() (bool, string) {
		u, err := api.Get(ctx, "wide", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		nodes, _, _ := unstructured.NestedSlice(u.Object, "status", "nodes")
		count, _, _ = unstructured.NestedInt64(u.Object, "status", "nodeCount")
		listed = len(nodes)
		if listed > 0 {
			first = nodes[0].(map[string]any)["node"]
		}
		return e2eutil.ConditionIs(u, "Ready", "True"), fmt.Sprintf("conditions %v, nodeCount %d, %d listed", e2eutil.Condition(u, "Ready"), count, listed)
	})
	if count != int64(n) || listed != pools.MaxStatusNodes || first != fmt.Sprintf("wide-%s-00000", e.Namespace) {
		t.Fatalf("nodeCount %d, %d listed, first %v; want %d, %d, the first node by name", count, listed, first, n, pools.MaxStatusNodes)
	}
	if got := len(e.PoolSlices(t, e.Namespace, "wide")); got != n {
		t.Fatalf("%d slices, want one per node (%d)", got, n)
	}
	// Deleted with the controller still running, so its finalizer removes the slices.
	if err := api.Delete(ctx, "wide", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := api.Get(ctx, "wide", metav1.GetOptions{})
		left := len(e.PoolSlices(t, e.Namespace, "wide"))
		return apierrors.IsNotFound(err) && left == 0, fmt.Sprintf("pool: %v, %d slices left", err, left)
	})
}
