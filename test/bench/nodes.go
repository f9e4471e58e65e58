package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/test/cluster"
)

// A kubelet's API cadence at its defaults (k8s.io/kubernetes v1.37.2): a Lease renewal every 10s
// (6 writes/min), a node status PATCH every nodeStatusReportFrequency (5m: 0.2/min) and a GET of
// its Node every nodeStatusUpdateFrequency (10s: 6/min), so 6.2 writes and 12.2 requests.
const (
	KubeletLeasesPerMinute   = 6.0
	KubeletWritesPerMinute   = 6.2
	KubeletRequestsPerMinute = 12.2
)

// KWOKWritesPerMinute is KWOK v0.8.0's default node cadence: its node lease controller renews
// every nodeLeaseDurationSeconds/4 = 10s (default 40s, pkg/kwok/controllers/controller.go and
// pkg/apis/config/v1alpha1/zz_generated.defaults.go) and the default node-heartbeat-with-lease
// stage rewrites the node's status after 600–610s (kustomize/stage/node/heartbeat-with-lease/
// node-heartbeat-with-lease.yaml, chosen by pkg/kwokctl/runtime/cluster.go
// getDefaultNodeStages): 6 + 60/605 writes per node per minute.
const KWOKWritesPerMinute = 6 + 60.0/605

// NodeWindow is what one node agent (DRAForge's controller or KWOK) did while keeping n nodes
// alive over a measured window.
type NodeWindow struct {
	Nodes  int
	Window time.Duration
	// NotReady counts nodes not Ready=True at the end of the window (kube-controller-manager's
	// node lifecycle controller runs throughout).
	NotReady int
	// CPU is the agent's user+system CPU time over the window (/proc/<pid>/stat).
	CPU time.Duration
	// Settle is how long it took until the agent held every node's Lease.
	Settle time.Duration
	// OldestLease is the age of the least recently renewed Lease at the end of the window
	// (a kubelet renews every 10s; the node lifecycle controller's grace period is 50s).
	OldestLease time.Duration
}

// Cores is the agent's average CPU use over the window, in cores.
func (r *NodeWindow) Cores() float64 { return r.CPU.Seconds() / r.Window.Seconds() }

// PerNodeMinute is requests (or writes) per node per minute.
func (r *NodeWindow) PerNodeMinute(n float64) float64 {
	return n / float64(r.Nodes) / r.Window.Minutes()
}

// NodesResult is the controller's API cost of keeping simulated nodes Ready.
type NodesResult struct {
	NodeWindow
	// Requests are the controller's requests during the window.
	Requests Requests
}

// NodeHeartbeats creates n simulated nodes, starts kube-controller-manager (node lifecycle at
// its defaults) and a controller, lets the node machine take every node's Lease, and counts the
// controller's requests over window. The nodes are deleted afterwards, so later phases see none.
func (e *Env) NodeHeartbeats(ctx context.Context, n int, window time.Duration) (*NodesResult, error) {
	spec := simnode.Spec{Prefix: "bench-sim", Count: n, Labels: map[string]string{"bench.draforge/sim": "true"}}
	if err := simnode.Apply(ctx, e.SetupDyn, spec, nil); err != nil {
		return nil, err
	}
	defer func() {
		_ = simnode.Delete(context.Background(), e.SetupDyn, spec, nil)
		_ = e.Setup.CoordinationV1().Leases("kube-node-lease").DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	}()
	if err := e.Cluster.StartComponent(ctx, cluster.ControllerManager); err != nil {
		return nil, err
	}
	defer func() { _ = e.Cluster.StopComponent(cluster.ControllerManager) }()
	started := time.Now()
	ctl, err := e.StartController(ctx)
	if err != nil {
		return nil, err
	}
	defer ctl.Stop()
	if err := e.leasesHeld(ctx, n, "bench-sim-"); err != nil {
		return nil, fmt.Errorf("node leases: %w\n%s", err, tail(ctl.Log, 20))
	}
	held := time.Since(started)
	before, err := ctl.Metrics()
	if err != nil {
		return nil, err
	}
	cpuBefore, err := ProcessCPU(ctl.Pid)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := sleep(ctx, window); err != nil {
		return nil, err
	}
	after, err := ctl.Metrics()
	if err != nil {
		return nil, err
	}
	cpuAfter, err := ProcessCPU(ctl.Pid)
	if err != nil {
		return nil, err
	}
	res := &NodesResult{NodeWindow: NodeWindow{Nodes: n, Window: time.Since(start), CPU: cpuAfter - cpuBefore, Settle: held},
		Requests: after.Requests().Sub(before.Requests())}
	if err := e.nodesAtEnd(ctx, &res.NodeWindow, "bench-sim-", "bench.draforge/sim=true"); err != nil {
		return nil, err
	}
	fmt.Fprintf(e.Log, "bench: %d simulated nodes for %s: %s (%.2f requests per node per minute), %d not Ready, controller CPU %.3f cores, oldest Lease renewal %s ago\n",
		n, res.Window.Round(time.Second), res.Requests, res.PerNodeMinute(res.Requests.Total()), res.NotReady, res.Cores(), res.OldestLease.Round(time.Second))
	return res, nil
}

// controlPlaneCPU reads the CPU time of the running etcd, kube-apiserver and
// kube-controller-manager (a component that cannot be read is left out).
func (e *Env) controlPlaneCPU() map[cluster.Component]time.Duration {
	return e.componentCPU(cluster.Etcd, cluster.APIServer, cluster.ControllerManager)
}

// cpuSince is each component's CPU time from before to after; a component read only once is
// left out.
func cpuSince(before, after map[cluster.Component]time.Duration) map[cluster.Component]time.Duration {
	out := map[cluster.Component]time.Duration{}
	for c, d := range after {
		if b, ok := before[c]; ok {
			out[c] = d - b
		}
	}
	return out
}

// componentCPU reads the CPU time of the running components named (one that cannot be read is
// left out).
func (e *Env) componentCPU(names ...cluster.Component) map[cluster.Component]time.Duration {
	out := map[cluster.Component]time.Duration{}
	for _, p := range e.Cluster.Procs {
		if p.Pid <= 0 || !slices.Contains(names, p.Name) {
			continue
		}
		if d, err := ProcessCPU(p.Pid); err == nil {
			out[p.Name] = d
		}
	}
	return out
}

// oldestRenewal is the age at now of the least recently renewed Lease named with prefix (a
// Lease never renewed counts from its creation).
func oldestRenewal(leases []coordinationv1.Lease, prefix string, now time.Time) time.Duration {
	var oldest time.Duration
	for _, l := range leases {
		if len(l.Name) <= len(prefix) || l.Name[:len(prefix)] != prefix {
			continue
		}
		at := l.CreationTimestamp.Time
		if l.Spec.RenewTime != nil {
			at = l.Spec.RenewTime.Time
		}
		oldest = max(oldest, now.Sub(at))
	}
	return oldest
}

func countHeld(leases []coordinationv1.Lease, prefix string) int {
	n := 0
	for _, l := range leases {
		if l.Spec.HolderIdentity != nil && len(l.Name) > len(prefix) && l.Name[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// leasesHeld waits until the Leases of the n nodes named prefix* have a holder: about a minute
// per thousand nodes at most, as the agent creates each node's Lease.
func (e *Env) leasesHeld(ctx context.Context, n int, prefix string) error {
	return poll(ctx, max(time.Minute, time.Duration(n)*60*time.Millisecond), func() (bool, error) {
		l, err := e.Setup.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
		return err == nil && countHeld(l.Items, prefix) == n, nil
	})
}

// nodesAtEnd records, at the end of a window, the oldest renewal among the Leases named
// prefix* and how many nodes matching selector are not Ready.
func (e *Env) nodesAtEnd(ctx context.Context, w *NodeWindow, prefix, selector string) error {
	leases, err := e.Setup.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	w.OldestLease = oldestRenewal(leases.Items, prefix, time.Now())
	nodes, err := e.Setup.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	w.NotReady = notReady(nodes.Items)
	return nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// notReady counts the nodes without Ready=True.
func notReady(nodes []corev1.Node) int {
	n := 0
	for _, node := range nodes {
		ready := false
		for _, c := range node.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			n++
		}
	}
	return n
}
