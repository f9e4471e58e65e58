package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// Node lifecycle timing of the dedicated control plane of TestNodeMachine: a node without a
// Lease renewal or Ready heartbeat for nodeGrace is marked Unknown at the next check (every
// nodeMonitor). nodeGrace is twice the kubelet's 10s renew interval the machine keeps.
const (
	nodeGrace     = 20 * time.Second
	nodeMonitor   = time.Second
	nodeCount     = 100
	readyWindow   = 45 * time.Second // 4.5 renew intervals, > 2 grace periods
	renewInterval = 10 * time.Second // the kubelet's and the node machine's default
)

// TestNodeMachine proves the CUE-only node machine keeps simulated nodes Ready the way a
// kubelet does, against kube-controller-manager's real node lifecycle controller
// (--node-monitor-grace-period 20s, --node-monitor-period 1s) on a control plane of its own
// (so no other test's controller renews these nodes):
//   - 100 nodes from one SimulatedNodes document stay Ready=True, untainted, with an unchanged
//     Ready transition time, at every 1s check for 45s (more than two grace periods);
//   - each has a Lease kube-node-lease/<node> held by the node, 40s duration, owned by the Node;
//   - every Lease is renewed every 10s (+2s of scheduling slack), and every write the
//     controller makes in the window is such a renewal (the kubelet's 6 per node per minute);
//   - after the controller is killed every node turns Ready=Unknown, each between grace and
//     grace + monitor period + 5s after its last renewal (the controller's bound);
//   - a restarted controller brings every node back to Ready=True and the controller lifts
//     the unreachable taints.
func TestNodeMachine(t *testing.T) {
	dir, err := os.MkdirTemp("", "draforge-e2e-nodes-")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Dir: dir, Log: os.Stderr,
		Extra:         []cluster.Component{cluster.ControllerManager},
		NodeLifecycle: cluster.NodeLifecycle{MonitorPeriod: nodeMonitor, GracePeriod: nodeGrace, StartupGracePeriod: nodeGrace}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	e := e2eutil.NewEnv(t, c.Kubeconfig)
	e.InstallCRDs(t)
	ctx := t.Context()

	doc := filepath.Join(t.TempDir(), "nodes.yaml")
	src := fmt.Sprintf("apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedNodes\nmetadata:\n  name: fleet\nspec:\n  prefix: sim\n  count: %d\n  labels: {draforge.test/fleet: e2e}\n", nodeCount)
	if err := os.WriteFile(doc, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	names := e.ApplyNodes(t, doc)
	if len(names) != nodeCount {
		t.Fatalf("%d nodes applied, want %d", len(names), nodeCount)
	}
	selector := metav1.ListOptions{LabelSelector: "draforge.test/fleet=e2e"}
	listNodes := func() []corev1.Node {
		l, err := e.Kube.CoreV1().Nodes().List(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}

	ctrl := e2eutil.StartController(t, c.Kubeconfig, "--log-level", "info")
	// Every node gets its Lease right away (none exists yet, so the renewal is due).
	eventually(t, 30*time.Second, func() (bool, string) {
		l, err := e.Kube.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == nodeCount, fmt.Sprintf("%d of %d leases", len(l.Items), nodeCount)
	})
	for _, n := range listNodes() {
		l, err := e.Kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkLease(t, &n, l)
	}
	// The node lifecycle controller lifts the not-ready taint of the new nodes.
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, n := range listNodes() {
			if len(n.Spec.Taints) > 0 {
				return false, fmt.Sprintf("%s taints %v", n.Name, n.Spec.Taints)
			}
		}
		return true, ""
	})

	// Stay Ready for more than two grace periods.
	transitions := map[string]metav1.Time{}
	for _, n := range listNodes() {
		transitions[n.Name] = nodeReady(&n).LastTransitionTime
	}
	// Watch every renewal during the window: intervals per Lease and the controller's writes.
	w, err := e.Kube.CoordinationV1().Leases("kube-node-lease").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renewals := map[string][]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type == watch.Modified && l.Spec.RenewTime != nil {
				renewals[l.Name] = append(renewals[l.Name], l.Spec.RenewTime.Time)
			}
		}
	}()
	writesBefore := ctrl.Writes(t)
	passesBefore := ctrl.Metric(t, "draforge_controller_sync_attempts_total", `pipeline="node"`)
	start := time.Now()
	for time.Since(start) < readyWindow {
		for _, n := range listNodes() {
			r := nodeReady(&n)
			if r == nil || r.Status != corev1.ConditionTrue || !r.LastTransitionTime.Equal(&metav1.Time{Time: transitions[n.Name].Time}) {
				t.Fatalf("after %s node %s is not steadily Ready: %+v", time.Since(start).Round(time.Second), n.Name, r)
			}
			if len(n.Spec.Taints) > 0 {
				t.Fatalf("after %s node %s is tainted %v", time.Since(start).Round(time.Second), n.Name, n.Spec.Taints)
			}
		}
		time.Sleep(time.Second)
	}
	writes := ctrl.Writes(t) - writesBefore
	passes := ctrl.Metric(t, "draforge_controller_sync_attempts_total", `pipeline="node"`) - passesBefore
	elapsed := time.Since(start)
	time.Sleep(500 * time.Millisecond) // the last renewals' watch events
	w.Stop()
	<-done
	events, intervals, worst, sum := 0, 0, time.Duration(0), time.Duration(0)
	for name, times := range renewals {
		events += len(times)
		for i := 1; i < len(times); i++ {
			d := times[i].Sub(times[i-1])
			worst, sum, intervals = max(worst, d), sum+d, intervals+1
			// Due renewTime + 10s; a pass on 2 shared cores with -race may run a little late.
			if d < renewInterval || d > renewInterval+2*time.Second {
				t.Errorf("lease %s renewed %s after the previous renewal, want %s (+2s)", name, d, renewInterval)
			}
		}
	}
	if len(renewals) != nodeCount {
		t.Errorf("%d of %d leases renewed during %s", len(renewals), nodeCount, elapsed)
	}
	mean := sum / time.Duration(max(intervals, 1))
	t.Logf("FIGURE nodes: %d nodes Ready for %s; %d renewals every %s on average (longest %s), %.2f per node per minute (kubelet: 6); %v controller writes, %v node passes",
		nodeCount, elapsed.Round(time.Second), events, mean.Round(time.Millisecond), worst.Round(time.Millisecond), time.Minute.Seconds()/mean.Seconds(), writes, passes)
	// Every write of the window is a renewal (none besides, no status report is due yet); a
	// few renewals may straddle the window's ends.
	if d := writes - float64(events); d < -float64(nodeCount)/10 || d > float64(nodeCount)/10 {
		t.Errorf("%v controller writes but %d lease renewals in the window", writes, events)
	}
	// One pass per renewal: the renewing pass sets the next timer from what it wrote, and the
	// Lease's echo does not bring the node back (a second pass each would double this). The
	// slack is for renewals straddling the window's ends and the last updates of the nodes
	// (their not-ready taints lifted) reaching the controller as the window opens.
	if d := passes - float64(events); d < -float64(nodeCount)/10 || d > float64(nodeCount)/4 {
		t.Errorf("%v node passes for %d lease renewals in the window, want one each", passes, events)
	}

	// Renewals are merge patches of the Lease (the kubelet updates its Lease; a server-side
	// apply per renewal costs kube-apiserver a structured merge): the controller's manager
	// holds renewTime through an Update, the apply that created the Lease keeps the rest.
	leases, err := e.Kube.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		var renewedByUpdate bool
		for _, mf := range l.ManagedFields {
			if mf.Manager == "draforge" && mf.Operation == metav1.ManagedFieldsOperationUpdate && mf.FieldsV1 != nil &&
				strings.Contains(string(mf.FieldsV1.Raw), `"f:renewTime"`) {
				renewedByUpdate = true
			}
		}
		if !renewedByUpdate {
			t.Errorf("lease %s: renewTime not written by a draforge update (merge patch); managed fields %+v", l.Name, l.ManagedFields)
		}
	}
	// A Lease that is gone is applied again whole (the renewal's patch finds nothing to patch).
	gone := leases.Items[0].Name
	if err := e.Kube.CoordinationV1().Leases("kube-node-lease").Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, renewInterval+10*time.Second, func() (bool, string) {
		if _, err := e.Kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, gone, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	for _, n := range listNodes() {
		if n.Name == gone {
			l, err := e.Kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, gone, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkLease(t, &n, l)
		}
	}

	// Kill the controller: nothing renews; each node must turn Unknown within the bound.
	lastRenew := map[string]time.Time{}
	ctrl.Kill()
	stopped := time.Now()
	l, err := e.Kube.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range l.Items {
		lastRenew[lease.Name] = lease.Spec.RenewTime.Time
	}
	bound := nodeGrace + nodeMonitor + 5*time.Second
	eventually(t, renewInterval+bound+10*time.Second, func() (bool, string) {
		for _, n := range listNodes() {
			if r := nodeReady(&n); r == nil || r.Status != corev1.ConditionUnknown {
				return false, fmt.Sprintf("%s: Ready %+v, %s after the kill", n.Name, r, time.Since(stopped).Round(time.Second))
			}
		}
		return true, ""
	})
	var latest time.Duration
	for _, n := range listNodes() {
		r := nodeReady(&n)
		since := r.LastTransitionTime.Sub(lastRenew[n.Name])
		// The transition time has second precision; the renewal microseconds.
		if since < nodeGrace-time.Second || since > bound {
			t.Errorf("node %s: Unknown %s after its last renewal, want within [%s, %s]", n.Name, since, nodeGrace, bound)
		}
		if r.Reason != "NodeStatusUnknown" {
			t.Errorf("node %s: Ready reason %s, want NodeStatusUnknown", n.Name, r.Reason)
		}
		latest = max(latest, r.LastTransitionTime.Sub(stopped))
	}
	t.Logf("FIGURE nodes: all %d Unknown at most %s after the controller was killed (bound: renew interval %s + grace %s + monitor %s + 5s)",
		nodeCount, latest.Round(time.Second), renewInterval, nodeGrace, nodeMonitor)

	// A new controller brings them back, as a restarted kubelet would.
	restarted := time.Now()
	e2eutil.StartController(t, c.Kubeconfig, "--log-level", "info")
	eventually(t, 60*time.Second, func() (bool, string) {
		for _, n := range listNodes() {
			if r := nodeReady(&n); r == nil || r.Status != corev1.ConditionTrue {
				return false, fmt.Sprintf("%s: Ready %+v", n.Name, r)
			}
			if len(n.Spec.Taints) > 0 {
				return false, fmt.Sprintf("%s: taints %v", n.Name, n.Spec.Taints)
			}
		}
		return true, ""
	})
	t.Logf("FIGURE nodes: all %d Ready and untainted again %s after a controller restart", nodeCount, time.Since(restarted).Round(100*time.Millisecond))
}

func nodeReady(n *corev1.Node) *corev1.NodeCondition {
	for i, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// checkLease checks a node Lease is the kubelet's: held by the node, 40s, owned by the Node.
func checkLease(t *testing.T, n *corev1.Node, l *coordinationv1.Lease) {
	t.Helper()
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != n.Name {
		t.Errorf("lease %s holder %v", l.Name, l.Spec.HolderIdentity)
	}
	if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease %s duration %v, want 40", l.Name, l.Spec.LeaseDurationSeconds)
	}
	if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > renewInterval+5*time.Second {
		t.Errorf("lease %s renewTime %v is stale", l.Name, l.Spec.RenewTime)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != n.UID {
		t.Errorf("lease %s owners %+v, want the Node %s (%s)", l.Name, l.OwnerReferences, n.Name, n.UID)
	}
	if n.Labels[simnode.LabelSimulated] != "true" {
		t.Errorf("node %s not labelled simulated", n.Name)
	}
}
