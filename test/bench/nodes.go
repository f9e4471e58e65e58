package bench

import (
	"context"
	"fmt"
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
	KubeletWritesPerMinute   = 6.2
	KubeletRequestsPerMinute = 12.2
)

// NodesResult is the controller's API cost of keeping simulated nodes Ready.
type NodesResult struct {
	Nodes  int
	Window time.Duration
	// Requests are the controller's requests during the window.
	Requests Requests
	// NotReady counts nodes not Ready=True at the end of the window (kube-controller-manager's
	// node lifecycle controller runs throughout).
	NotReady int
}

// PerNodeMinute is requests (or writes) per node per minute.
func (r *NodesResult) PerNodeMinute(n float64) float64 {
	return n / float64(r.Nodes) / r.Window.Minutes()
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
	ctl, err := e.StartController(ctx)
	if err != nil {
		return nil, err
	}
	defer ctl.Stop()
	if err := poll(ctx, time.Minute, func() (bool, error) {
		l, err := e.Setup.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
		return err == nil && countHeld(l.Items, "bench-sim-") == n, nil
	}); err != nil {
		return nil, fmt.Errorf("node leases: %w\n%s", err, tail(ctl.Log, 20))
	}
	before, err := ctl.Metrics()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window):
	}
	after, err := ctl.Metrics()
	if err != nil {
		return nil, err
	}
	res := &NodesResult{Nodes: n, Window: time.Since(start), Requests: after.Requests().Sub(before.Requests())}
	nodes, err := e.Setup.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "bench.draforge/sim=true"})
	if err != nil {
		return nil, err
	}
	for _, node := range nodes.Items {
		ready := false
		for _, c := range node.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			res.NotReady++
		}
	}
	fmt.Fprintf(e.Log, "bench: %d simulated nodes for %s: %s (%.2f requests per node per minute), %d not Ready\n",
		n, res.Window.Round(time.Second), res.Requests, res.PerNodeMinute(res.Requests.Total()), res.NotReady)
	return res, nil
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
