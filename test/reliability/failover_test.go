//go:build reliability

package reliability

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// Leader election timings: leaseDuration > renewDeadline > 1.2 × retryPeriod.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
	leaseName     = "draforge-controller"
)

// takeoverBound is test/e2e/leader_test.go's bound: leaseDuration + retryPeriod (the
// operations guide) plus client-go's acquire jitter (up to 1.2 × retryPeriod, twice: to see
// the last renewal and to retry after expiry) plus 0.5s for polling and the scrape.
var takeoverBound = leaseDuration + retryPeriod + 2*time.Duration(1.2*float64(retryPeriod)) + 500*time.Millisecond

func candidate(t *testing.T, e *e2eutil.Env, allocator, id string) *e2eutil.Controller {
	t.Helper()
	return e2eutil.StartController(t, e.Kubeconfig, allocatorFlag, allocator, "--leader-elect",
		"--leader-election-lease-namespace", e.Namespace, "--leader-election-identity", id,
		"--leader-election-lease-duration", leaseDuration.String(), "--leader-election-renew-deadline", renewDeadline.String(),
		"--leader-election-retry-period", retryPeriod.String(), "--shutdown-timeout", "3s")
}

func holder(e *e2eutil.Env) string {
	lease, err := e.Kube.CoordinationV1().Leases(e.Namespace).Get(bg(), leaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// TestLeaderFailoverUnderLoad: two controllers share a Lease; while pools are patched
// repeatedly and claims keep arriving, the leader is killed with SIGKILL. At every poll at most
// one process reports leader 1 and it is the Lease holder; the standby leads within the
// takeover bound; afterwards every claim is allocated exactly once, allocations made before
// the kill are byte-identical, and every pool publishes its last spec. With kube-scheduler
// allocating, the claims in flight at the kill are handed over by the new leader: every
// allocation pod is gone and no claim stays reserved.
func TestLeaderFailoverUnderLoad(t *testing.T) { forEachAllocator(t, testLeaderFailoverUnderLoad) }

func testLeaderFailoverUnderLoad(t *testing.T, allocator string) {
	e := newEnv(t)
	class := "rel-failover-" + e.Namespace
	deviceClass(t, e, class, class)
	// 80 devices for 60 claims; the burst pools carry another attribute, so their churn never
	// removes an allocated device.
	createPool(t, e, "capacity", pool(40, class, "node-a", "node-b"))
	const burstPools = 4
	for i := range burstPools {
		createPool(t, e, fmt.Sprintf("burst-%d", i), pool(2, "burst", "node-b", "node-c"))
	}

	procs := map[string]*e2eutil.Controller{"a": candidate(t, e, allocator, "a"), "b": candidate(t, e, allocator, "b")}
	gauges := func() map[string]float64 {
		out := map[string]float64{}
		for id, p := range procs {
			if p.Running() {
				out[id] = p.Gauge("draforge_controller_leader")
			}
		}
		return out
	}
	var leader string
	eventually(t, 60*time.Second, func() (bool, string) {
		g := gauges()
		leader = holder(e)
		return leader != "" && g[leader] == 1, fmt.Sprintf("holder %q gauges %v", leader, g)
	})
	standby := map[string]string{"a": "b", "b": "a"}[leader]
	eventually(t, 60*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "capacity", 40, "node-a", "node-b") })

	// 20 claims allocated before the burst: their allocations must survive the failover.
	createClaims(t, e, "pre", class, 0, 20, 0)
	var before map[string]string
	eventually(t, 60*time.Second, func() (bool, string) {
		before = allocations(t, e)
		return len(before) == 20, fmt.Sprintf("%d of 20 allocated", len(before))
	})

	// The safety monitor: at most one process says leader, and it holds the Lease.
	stop := make(chan struct{})
	var polls, violations atomic.Int64
	var monitor sync.WaitGroup
	monitor.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			g := gauges() // gauges before the holder: a gauge of 1 implies the Lease was already taken
			h := holder(e)
			leaders := 0
			for id, v := range g {
				if v == 1 {
					leaders++
					if h != id {
						violations.Add(1)
						t.Errorf("%s reports leader 1 but the Lease holder is %q (gauges %v)", id, h, g)
					}
				}
			}
			if leaders > 1 {
				violations.Add(1)
				t.Errorf("%d processes report leader 1: %v", leaders, g)
			}
			polls.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	})

	// The burst: every pool patched every 100ms with a changing count for 8s; 40 more claims
	// over the same time.
	last := make([]int, burstPools)
	var load sync.WaitGroup
	for i := range burstPools {
		load.Go(func() {
			for k := 0; k < 80; k++ {
				n := 1 + (k*7+i*3)%8
				if err := patchCount(e, fmt.Sprintf("burst-%d", i), n); err != nil {
					t.Errorf("patch burst-%d: %v", i, err)
					return
				}
				last[i] = n
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	load.Go(func() { createClaims(t, e, "burst", class, 0, 40, 200*time.Millisecond) })

	time.Sleep(2 * time.Second)
	killed := time.Now()
	procs[leader].Kill()
	var tookOver time.Duration
	for {
		if g := gauges(); g[standby] == 1 && holder(e) == standby {
			tookOver = time.Since(killed)
			break
		}
		if !procs[standby].Running() {
			t.Fatalf("standby %s exited: %v", standby, procs[standby].ExitErr)
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("standby never took over: holder %q gauges %v", holder(e), gauges())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("FIGURE failover (%s): kill -9 of leader %s during the burst; %s active after %s (bound %s)",
		allocator, leader, standby, tookOver.Round(time.Millisecond), takeoverBound)
	if tookOver > takeoverBound {
		t.Errorf("takeover after %s, more than %s", tookOver, takeoverBound)
	}
	load.Wait()

	var after map[string]string
	eventually(t, 90*time.Second, func() (bool, string) {
		after = allocations(t, e)
		return len(after) == 60, fmt.Sprintf("%d of 60 claims allocated (%d exist)", len(after), claimCount(t, e))
	})
	close(stop)
	monitor.Wait()
	t.Logf("FIGURE failover (%s): %d safety polls, %d violations", allocator, polls.Load(), violations.Load())
	if n := checkUnique(t, after); n != 60 {
		t.Errorf("60 claims hold %d distinct devices", n)
	}
	sameAllocations(t, "failover", before, after)
	eventually(t, 60*time.Second, func() (bool, string) { return handedOver(t, e, allocator) })
	for i := range burstPools {
		eventually(t, 60*time.Second, func() (bool, string) {
			return checkPoolSlices(t, e, fmt.Sprintf("burst-%d", i), last[i], "node-b", "node-c")
		})
	}
	eventually(t, 30*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "capacity", 40, "node-a", "node-b") })
	if n := procs[standby].Metric(t, "draforge_controller_terminal_errors_total"); n != 0 {
		t.Errorf("new leader: %v terminal errors", n)
	}
	t.Logf("new leader: %v retries, %v allocations", procs[standby].Metric(t, "draforge_controller_reconcile_retries_total"),
		procs[standby].Metric(t, "draforge_controller_allocations_total"))
}
