package e2eutil

import (
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/draforge/draforge/drivers/simnode"
)

// CountHeartbeats counts the node machine's writes from now until the returned function is
// called: Lease creations and renewals in kube-node-lease and Ready heartbeats of simulated
// nodes, seen as watch events (only the node machine writes them; no kubelet runs). Tests that
// prove a controller makes no needless writes allow exactly these: heartbeats are due by time,
// not caused by anything the test changed. The function waits briefly for in-flight events.
func (e *Env) CountHeartbeats(t *testing.T) func() int {
	t.Helper()
	ctx := t.Context()
	// Watches start at a list's resourceVersion: only changes after it are events.
	leaseList, err := e.Kube.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := e.Kube.CoordinationV1().Leases("kube-node-lease").Watch(ctx, metav1.ListOptions{ResourceVersion: leaseList.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	sel := simnode.LabelSimulated + "=true"
	nodeList, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := e.Kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: nodeList.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		n    int
		wg   sync.WaitGroup
		last = map[string]time.Time{} // Ready lastHeartbeatTime per node
	)
	for _, node := range nodeList.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last[node.Name] = c.LastHeartbeatTime.Time
			}
		}
	}
	wg.Go(func() {
		for ev := range leases.ResultChan() {
			if _, ok := ev.Object.(*coordinationv1.Lease); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
	})
	wg.Go(func() {
		for ev := range nodes.ResultChan() {
			node, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			for _, c := range node.Status.Conditions {
				if c.Type != corev1.NodeReady {
					continue
				}
				mu.Lock()
				if prev := last[node.Name]; !c.LastHeartbeatTime.Time.Equal(prev) {
					n++
				}
				last[node.Name] = c.LastHeartbeatTime.Time
				mu.Unlock()
			}
		}
	})
	return func() int {
		time.Sleep(500 * time.Millisecond)
		leases.Stop()
		nodes.Stop()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}
