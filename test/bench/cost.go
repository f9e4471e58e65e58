package bench

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/gvr"
)

// CostResult is the controller's API cost attributed client-side from its own
// rest_client_requests_total and draforge_controller_sync_attempts_total.
type CostResult struct {
	Pools, Claims, Slices int
	// Cold: a fresh controller converging Pools new pools and Claims new claims (everything
	// else in the cluster already converged).
	Cold Requests
	// Restart: a second fresh controller with nothing changed, until its queues are idle.
	Restart Requests
	// Steady: the window with nothing changing.
	Window      time.Duration
	Steady      Requests
	SteadySyncs float64
}

// Cost measures cold start, restart and a steady-state window. pools pools of devices devices
// on nodesPer nodes each (by name, starting at firstNode), and claims claims of class
// bench-alloc, are created while no controller runs.
func (e *Env) Cost(ctx context.Context, pools, nodesPer, devices, firstNode, claims int, window time.Duration) (*CostResult, error) {
	res := &CostResult{Pools: pools, Claims: claims, Slices: pools * nodesPer, Window: window}
	ns := "bench-cost"
	if err := e.Namespace(ctx, ns); err != nil {
		return nil, err
	}
	api := e.SetupDyn.Resource(gvr.SimulatedDevicePools).Namespace(ns)
	for p := range pools {
		var targets []string
		for i := range nodesPer {
			targets = append(targets, NodeName(firstNode+p*nodesPer+i))
		}
		if _, err := api.Create(ctx, PoolObject(ns, fmt.Sprintf("cost-%02d", p), "bench-cost", devices, nil, targets), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if err := e.CreateClaims(ctx, ns, "c", "bench-alloc", claims); err != nil {
		return nil, err
	}
	w := e.watchClaims(ctx, ns, nil)

	// Cold start.
	ctl, err := e.StartController(ctx)
	if err != nil {
		return nil, err
	}
	if err := w.wait(ctx, claims, 5*time.Minute); err != nil {
		ctl.Stop()
		return nil, err
	}
	poolWatch := e.watchPools(ctx, ns)
	if err := poll(ctx, 5*time.Minute, func() (bool, error) {
		return poolsReady(poolWatch.List()) == pools, nil
	}); err != nil {
		ctl.Stop()
		return nil, fmt.Errorf("cost pools not ready: %w", err)
	}
	if err := ctl.Quiesce(ctx, 3*time.Second, 2*time.Minute); err != nil {
		ctl.Stop()
		return nil, err
	}
	s, err := ctl.Metrics()
	ctl.Stop()
	if err != nil {
		return nil, err
	}
	res.Cold = s.Requests()
	fmt.Fprintf(e.Log, "bench: cold start for %d pools + %d claims: %s\n", pools, claims, res.Cold)

	// Restart with nothing changed.
	ctl, err = e.StartController(ctx)
	if err != nil {
		return nil, err
	}
	defer ctl.Stop()
	if err := ctl.Quiesce(ctx, 3*time.Second, 2*time.Minute); err != nil {
		return nil, err
	}
	s0, err := ctl.Metrics()
	if err != nil {
		return nil, err
	}
	res.Restart = s0.Requests()
	fmt.Fprintf(e.Log, "bench: restart: %s\n", res.Restart)

	// Steady state.
	fmt.Fprintf(e.Log, "bench: steady-state window of %s\n", window)
	if err := sleep(ctx, window); err != nil {
		return nil, err
	}
	s1, err := ctl.Metrics()
	if err != nil {
		return nil, err
	}
	res.Steady = s1.Requests().Sub(s0.Requests())
	res.SteadySyncs = s1.SyncAttempts() - s0.SyncAttempts()
	fmt.Fprintf(e.Log, "bench: steady: %s, %.0f syncs\n", res.Steady, res.SteadySyncs)
	return res, nil
}
