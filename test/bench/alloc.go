package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/test/cluster"
)

// AllocResult is claim allocation throughput of the controller, kube-scheduler and raw
// status writes, all with the same client QPS/burst.
type AllocResult struct {
	Nodes, Devices, Claims int
	// Rates in claims/s, from the first to the last allocation observed. Controller is the
	// controller with --allocator simulator, Scheduler kube-scheduler with plain pods, Default
	// the controller in its default mode (--allocator kube-scheduler; 0 when not measured).
	Controller, Scheduler, Raw, Default float64
	// Walls: from process start (or first write; for Default the first create) until every
	// claim was allocated.
	ControllerWall, SchedulerWall, RawWall, DefaultWall time.Duration
	// Requests of the controller and of kube-scheduler over their whole run (process start to
	// the last claim allocated, and for the scheduler to the last pod bound), each seen by a
	// counting proxy of its own, so writes per claim are measured the same way on both sides.
	ControllerReqs, SchedulerReqs Counts
	// DefaultReqs are the default mode's requests per agent (DefaultAgents), each behind a
	// counting proxy of its own, from the first claim created until every handoff was done.
	DefaultReqs map[string]Counts
	// LatencyRate is the claims/s of the latency runs (0: none): claims created one by one at
	// that rate while the agents run, after their throughput run.
	LatencyRate float64
	// Create-to-allocation latency of each side at LatencyRate.
	ControllerLat, SchedulerLat, DefaultLat Latency
}

// DefaultAgents are the processes whose API requests make the default mode's cost.
var DefaultAgents = []string{"controller", "kube-scheduler", "kube-controller-manager"}

// Latency is create-to-allocation latency: from just before a claim's create call to the
// watch event showing its status.allocation.
type Latency struct {
	Samples       int
	P50, P99, Max time.Duration
}

func (l Latency) String() string {
	return fmt.Sprintf("p50 %s / p99 %s", ms(l.P50), ms(l.P99))
}

// DefaultWrites are the default mode's writes over every agent.
func (r *AllocResult) DefaultWrites() Counts {
	all := Counts{}
	for _, a := range DefaultAgents {
		for k, v := range r.DefaultReqs[a] {
			all[k+" ("+a+")"] += v
		}
	}
	return all
}

// DefaultWritesPerSecond is the default mode's API writes/s over every agent (see
// ControllerWrites).
func (r *AllocResult) DefaultWritesPerSecond() float64 {
	return r.Default * r.WritesPerClaim(r.DefaultWrites())
}

// WritesPerClaim is a side's API writes per claim allocated.
func (r *AllocResult) WritesPerClaim(c Counts) float64 {
	return float64(c.Writes()) / float64(r.Claims)
}

// ControllerWrites and SchedulerWrites are API writes/s: claims/s times measured writes per
// claim, the equal-work figure (each side's rate per write it needs).
func (r *AllocResult) ControllerWrites() float64 {
	return r.Controller * r.WritesPerClaim(r.ControllerReqs)
}

// SchedulerWrites is kube-scheduler's API writes/s (see ControllerWrites).
func (r *AllocResult) SchedulerWrites() float64 {
	return r.Scheduler * r.WritesPerClaim(r.SchedulerReqs)
}

// claimWatch records when each claim of a namespace was first seen allocated.
type claimWatch struct {
	mu        sync.Mutex
	allocated map[string]time.Time
	created   map[string]time.Time
	onAlloc   func(*resourcev1.ResourceClaim)
}

func (e *Env) watchClaims(ctx context.Context, ns string, onAlloc func(*resourcev1.ResourceClaim)) *claimWatch {
	w := &claimWatch{allocated: map[string]time.Time{}, created: map[string]time.Time{}, onAlloc: onAlloc}
	f := informers.NewSharedInformerFactoryWithOptions(e.Setup, 0, informers.WithNamespace(ns))
	inf := f.Resource().V1().ResourceClaims().Informer()
	see := func(obj any) {
		c, ok := obj.(*resourcev1.ResourceClaim)
		if !ok || c.Status.Allocation == nil {
			return
		}
		w.mu.Lock()
		_, seen := w.allocated[c.Name]
		if !seen {
			w.allocated[c.Name] = time.Now()
		}
		w.mu.Unlock()
		if !seen && w.onAlloc != nil {
			w.onAlloc(c)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w
}

func (w *claimWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.allocated)
}

// span returns the first and last allocation times.
func (w *claimWatch) span() (time.Time, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ts []time.Time
	for _, t := range w.allocated {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts[0], ts[len(ts)-1]
}

func (w *claimWatch) rate() float64 {
	first, last := w.span()
	n := w.count()
	if n < 2 || !last.After(first) {
		return 0
	}
	return float64(n-1) / last.Sub(first).Seconds()
}

// latency is the create-to-allocation latency of the claims whose create time was recorded.
func (w *claimWatch) latency() Latency {
	w.mu.Lock()
	defer w.mu.Unlock()
	var lat []time.Duration
	for name, c := range w.created {
		if a, ok := w.allocated[name]; ok {
			lat = append(lat, a.Sub(c))
		}
	}
	if len(lat) == 0 {
		return Latency{}
	}
	slices.Sort(lat)
	return Latency{Samples: len(lat), P50: quantile(lat, 0.50), P99: quantile(lat, 0.99), Max: lat[len(lat)-1]}
}

func (w *claimWatch) wait(ctx context.Context, n int, timeout time.Duration) error {
	if err := poll(ctx, timeout, func() (bool, error) { return w.count() >= n, nil }); err != nil {
		return fmt.Errorf("%d/%d claims allocated: %w", w.count(), n, err)
	}
	return nil
}

// AllocSetup publishes the allocation pool (devices per node on the nodes matching selector)
// with a controller and creates its DeviceClass.
func (e *Env) AllocSetup(ctx context.Context, ns string, nodes, devices int, selector map[string]string) error {
	if err := e.Namespace(ctx, ns); err != nil {
		return err
	}
	if err := e.DeviceClass(ctx, "bench-alloc", "bench-alloc"); err != nil {
		return err
	}
	ctl, err := e.StartController(ctx)
	if err != nil {
		return err
	}
	defer ctl.Stop()
	watch := newSliceCounter(ctx, e, simdevice.LabelSDPNamespace+"="+ns)
	pools := e.SetupDyn.Resource(gvr.SimulatedDevicePools).Namespace(ns)
	if _, err := pools.Create(ctx, PoolObject(ns, "alloc", "bench-alloc", devices, selector, nil), metav1.CreateOptions{}); err != nil {
		return err
	}
	return poll(ctx, 5*time.Minute, func() (bool, error) {
		if watch.count() < nodes {
			return false, nil
		}
		u, err := pools.Get(ctx, "alloc", metav1.GetOptions{})
		return err == nil && PoolReady(u), err
	})
}

// Allocation measures claims/s for n one-device claims of class bench-alloc:
//   - controller (--allocator simulator): claims created first (no controller running), then a
//     fresh controller allocates them all;
//   - raw: UpdateStatus of precomputed allocations, one by one (the claim machine has one
//     worker), with the controller's QPS/burst;
//   - kube-scheduler: n pods each referencing one claim, created first with the scheduler
//     stopped; then the scheduler (QPS/burst as the controller) schedules them and allocates
//     their claims;
//   - default mode (--allocator kube-scheduler, defaultAllocation): the controller, kube-scheduler
//     and kube-controller-manager's resourceclaim controller running, n claims created at once.
//
// The controller and kube-scheduler (a second instance of the cluster's, with its arguments)
// each talk to the API server through a CountingProxy of their own, so their writes per claim
// are measured the same way (AllocResult.WritesPerClaim).
//
// With latencyRate > 0 each side then also measures create-to-allocation latency (steadyLatency):
// claims created one by one at that rate while its agents still run. The throughput runs start
// with a backlog, so their claims' latencies are queueing times, not what one claim waits.
//
// The claims of each run are deleted before the next, so each starts with every device free.
func (e *Env) Allocation(ctx context.Context, nodes, devices, n int, latencyRate float64) (*AllocResult, error) {
	return e.allocation(ctx, allocRun{nodes: nodes, devices: devices, claims: n, class: "bench-alloc", ns: "bench-alloc",
		raw: true, defaultMode: true, latencyRate: latencyRate})
}

// allocRun is one allocation measurement.
type allocRun struct {
	nodes, devices, claims int
	// class is the claims' DeviceClass; ns prefixes the namespaces of the runs.
	class, ns string
	// args go to both measured processes last (they override the client QPS/burst).
	args []string
	// raw also times status writes of precomputed allocations (of AllocSetup's pool).
	raw bool
	// defaultMode also measures the controller's default mode; the nodes must be NodeName(0)
	// to NodeName(nodes-1).
	defaultMode bool
	// latencyRate > 0 also measures each side's latency at that many claims/s.
	latencyRate float64
}

func (e *Env) allocation(ctx context.Context, run allocRun) (*AllocResult, error) {
	n := run.claims
	res := &AllocResult{Nodes: run.nodes, Devices: run.devices, Claims: n, LatencyRate: run.latencyRate}

	// Controller.
	ns := run.ns + "-ctl"
	if err := e.Namespace(ctx, ns); err != nil {
		return nil, err
	}
	if err := e.CreateClaims(ctx, ns, "c", run.class, n); err != nil {
		return nil, err
	}
	w := e.watchClaims(ctx, ns, nil)
	proxy, err := NewCountingProxy(e.Cluster.Dir, e.Cluster.Server, e.Cluster.Dir)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	start := time.Now()
	// StartControllerWith passes --allocator simulator: this run measures the simulator's own
	// allocation (the default hands standalone claims to kube-scheduler).
	ctl, err := e.StartControllerWith(ctx, proxy.Kubeconfig, run.args...)
	if err != nil {
		return nil, err
	}
	if err := w.wait(ctx, n, 5*time.Minute); err != nil {
		ctl.Stop()
		return nil, fmt.Errorf("controller: %w\n%s", err, tail(ctl.Log, 20))
	}
	res.ControllerWall = time.Since(start)
	res.Controller = w.rate()
	settle(ctx, proxy, time.Second, 10*time.Second)
	res.ControllerReqs = proxy.Counts()
	fmt.Fprintf(e.Log, "bench: controller allocated %d claims: %.1f claims/s (wall %s incl. start; %.2f writes per claim; %s)\n", n, res.Controller, res.ControllerWall.Round(time.Millisecond), res.WritesPerClaim(res.ControllerReqs), res.ControllerReqs)
	if run.latencyRate > 0 {
		res.ControllerLat, err = e.steadyLatency(ctx, ns+"-lat", n, run.latencyRate, func(ctx context.Context, ns string, i int) error {
			_, err := e.Setup.ResourceV1().ResourceClaims(ns).Create(ctx, Claim(ns, fmt.Sprintf("c-%04d", i), run.class), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			ctl.Stop()
			return nil, fmt.Errorf("controller latency: %w\n%s", err, tail(ctl.Log, 20))
		}
		fmt.Fprintf(e.Log, "bench: controller latency at %.0f claims/s: %s\n", run.latencyRate, res.ControllerLat)
		if err := e.deleteClaims(ctx, ns+"-lat"); err != nil {
			return nil, err
		}
	}
	ctl.Stop()
	if err := e.deleteClaims(ctx, ns); err != nil {
		return nil, err
	}

	// Raw status writes of precomputed allocations: claim i gets device i%devices of node i/devices.
	if run.raw {
		if err := e.rawAllocation(ctx, res, run); err != nil {
			return nil, err
		}
	}

	// kube-scheduler.
	ns = run.ns + "-sched"
	if err := e.Namespace(ctx, ns); err != nil {
		return nil, err
	}
	if err := e.CreateClaims(ctx, ns, "c", run.class, n); err != nil {
		return nil, err
	}
	if err := parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		_, err := e.Setup.CoreV1().Pods(ns).Create(ctx, Pod(ns, fmt.Sprintf("p-%04d", i), fmt.Sprintf("c-%04d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	w = e.watchClaims(ctx, ns, nil)
	sproxy, err := NewCountingProxy(e.Cluster.Dir, e.Cluster.Server, e.Cluster.Dir)
	if err != nil {
		return nil, err
	}
	defer sproxy.Close()
	start = time.Now()
	sched, err := e.spawnThrough(countedScheduler, cluster.Scheduler, sproxy.Kubeconfig, run.args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.Cluster.StopComponent(countedScheduler) }()
	if err := w.wait(ctx, n, time.Duration(n)*time.Second+time.Minute); err != nil {
		var why string
		if pods, _ := e.Setup.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1}); pods != nil && len(pods.Items) > 0 {
			why = fmt.Sprintf("first pod: node %q conditions %+v", pods.Items[0].Spec.NodeName, pods.Items[0].Status.Conditions)
		}
		return nil, fmt.Errorf("kube-scheduler: %w; %s\n%s", err, why, tail(sched.Log, 30))
	}
	res.SchedulerWall = time.Since(start)
	res.Scheduler = w.rate()
	// The scheduler binds after allocating; check that the pods really were scheduled.
	if err := e.allBound(ctx, ns, n); err != nil {
		return nil, fmt.Errorf("kube-scheduler did not bind every pod: %w", err)
	}
	settle(ctx, sproxy, time.Second, 10*time.Second)
	res.SchedulerReqs = sproxy.Counts()
	fmt.Fprintf(e.Log, "bench: kube-scheduler allocated %d claims: %.1f claims/s (wall %s incl. start; %.2f writes per claim; %s)\n", n, res.Scheduler, res.SchedulerWall.Round(time.Millisecond), res.WritesPerClaim(res.SchedulerReqs), res.SchedulerReqs)
	if run.latencyRate > 0 {
		// A user's claim and the plain pod using it, created one after the other.
		res.SchedulerLat, err = e.steadyLatency(ctx, ns+"-lat", n, run.latencyRate, func(ctx context.Context, ns string, i int) error {
			claim := fmt.Sprintf("c-%04d", i)
			if _, err := e.Setup.ResourceV1().ResourceClaims(ns).Create(ctx, Claim(ns, claim, run.class), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := e.Setup.CoreV1().Pods(ns).Create(ctx, Pod(ns, fmt.Sprintf("p-%04d", i), claim), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("kube-scheduler latency: %w\n%s", err, tail(sched.Log, 30))
		}
		fmt.Fprintf(e.Log, "bench: kube-scheduler latency at %.0f claims/s: %s\n", run.latencyRate, res.SchedulerLat)
		if err := e.deleteScheduled(ctx, ns+"-lat"); err != nil {
			return nil, err
		}
	}
	_ = e.Cluster.StopComponent(countedScheduler)
	// Without kube-controller-manager the scheduler's delete-protection finalizer stays: take
	// it off, so every device is free for the next run.
	if err := e.deleteScheduled(ctx, ns); err != nil {
		return nil, err
	}

	if run.defaultMode {
		if err := e.defaultAllocation(ctx, res, run); err != nil {
			return nil, fmt.Errorf("default mode: %w", err)
		}
	}
	return res, nil
}

// allBound waits until the n pods of ns are bound to nodes.
func (e *Env) allBound(ctx context.Context, ns string, n int) error {
	return poll(ctx, time.Minute, func() (bool, error) {
		pods, err := e.Setup.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == n, nil
	})
}

// Names of the default mode's second instances of kube-scheduler and kube-controller-manager
// (each behind a counting proxy of its own).
const (
	defaultScheduler         cluster.Component = "kube-scheduler-default"
	defaultControllerManager cluster.Component = "kube-controller-manager-default"
)

// defaultAllocation measures the controller's default mode (docs/allocator.md): one allocation
// pod per claim, which kube-scheduler schedules, allocating the claim; the controller then
// removes kube-scheduler's finalizer and deletes the pod, and kube-controller-manager's
// resourceclaim controller drops it from reservedFor (the controller does if it has not 3 s
// later; every agent's writes are counted).
// The three run first, each behind a
// counting proxy of its own (kube-controller-manager with only its resourceclaim controller: the
// node lifecycle controller would taint the bench's heartbeat-less nodes); then n claims are
// created at once, and the rate is from the first to the last allocation seen. Their requests
// are counted from the first create until every handoff is done (claim unreserved, finalizer
// off, allocation pod gone).
//
// Allocation pods go only to simulated nodes: the run labels the allocation nodes simulated for
// its duration, so the controller's node machine takes their Leases. It does so before the
// count starts, and their renewal and status report intervals are set to an hour, so no Lease
// or Node write falls into the count.
func (e *Env) defaultAllocation(ctx context.Context, res *AllocResult, run allocRun) error {
	n := run.claims
	if err := e.simulateNodes(ctx, run.nodes, true); err != nil {
		return err
	}
	// Runs after the controller stopped (deferred later): its node machine would take the
	// nodes again.
	defer func() { _ = e.simulateNodes(context.Background(), run.nodes, false) }()
	proxies := map[string]*CountingProxy{}
	for _, a := range DefaultAgents {
		p, err := NewCountingProxy(e.Cluster.Dir, e.Cluster.Server, e.Cluster.Dir)
		if err != nil {
			return err
		}
		defer p.Close()
		proxies[a] = p
	}
	sched, err := e.spawnThrough(defaultScheduler, cluster.Scheduler, proxies["kube-scheduler"].Kubeconfig, run.args...)
	if err != nil {
		return err
	}
	defer func() { _ = e.Cluster.StopComponent(defaultScheduler) }()
	if _, err := e.spawnThrough(defaultControllerManager, cluster.ControllerManager, proxies["kube-controller-manager"].Kubeconfig,
		append([]string{"--controllers=resourceclaim-controller"}, run.args...)...); err != nil {
		return err
	}
	defer func() { _ = e.Cluster.StopComponent(defaultControllerManager) }()
	ctl, err := e.StartControllerWith(ctx, proxies["controller"].Kubeconfig, append([]string{"--allocator", "kube-scheduler"}, run.args...)...)
	if err != nil {
		return err
	}
	defer ctl.Stop()
	if err := e.leasesHeld(ctx, run.nodes, "bench-node-"); err != nil {
		return fmt.Errorf("node leases: %w\n%s", err, tail(ctl.Log, 20))
	}
	if err := ctl.Quiesce(ctx, time.Second, time.Minute); err != nil {
		return err
	}
	before := map[string]Counts{}
	for a, p := range proxies {
		settle(ctx, p, time.Second, 10*time.Second)
		before[a] = p.Counts()
	}

	ns := run.ns + "-default"
	if err := e.Namespace(ctx, ns); err != nil {
		return err
	}
	w := e.watchClaims(ctx, ns, nil)
	start := time.Now()
	if err := e.CreateClaims(ctx, ns, "c", run.class, n); err != nil {
		return err
	}
	if err := w.wait(ctx, n, time.Duration(n)*time.Second+time.Minute); err != nil {
		return fmt.Errorf("%w\ncontroller:\n%s\nkube-scheduler:\n%s", err, tail(ctl.Log, 20), tail(sched.Log, 20))
	}
	res.DefaultWall = time.Since(start)
	res.Default = w.rate()
	if err := e.handedOver(ctx, ns, n); err != nil {
		return err
	}
	res.DefaultReqs = map[string]Counts{}
	for a, p := range proxies {
		settle(ctx, p, time.Second, 10*time.Second)
		res.DefaultReqs[a] = p.Counts().Sub(before[a])
	}
	fmt.Fprintf(e.Log, "bench: default mode allocated %d claims: %.1f claims/s (wall %s from the first create; %.2f writes per claim; %s)\n",
		n, res.Default, res.DefaultWall.Round(time.Millisecond), res.WritesPerClaim(res.DefaultWrites()), writesOnly(res.DefaultWrites()))
	if run.latencyRate > 0 {
		res.DefaultLat, err = e.steadyLatency(ctx, ns+"-lat", n, run.latencyRate, func(ctx context.Context, ns string, i int) error {
			_, err := e.Setup.ResourceV1().ResourceClaims(ns).Create(ctx, Claim(ns, fmt.Sprintf("c-%04d", i), run.class), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("latency: %w\n%s", err, tail(ctl.Log, 20))
		}
		fmt.Fprintf(e.Log, "bench: default mode latency at %.0f claims/s: %s\n", run.latencyRate, res.DefaultLat)
		if err := e.handedOver(ctx, ns+"-lat", n); err != nil {
			return err
		}
		if err := e.deleteClaims(ctx, ns+"-lat"); err != nil {
			return err
		}
	}
	return e.deleteClaims(ctx, ns)
}

// handedOver waits until the n claims of ns are as the default mode's handoff leaves them:
// allocated, reserved for nobody, without kube-scheduler's finalizer, no allocation pod left.
func (e *Env) handedOver(ctx context.Context, ns string, n int) error {
	var why string
	err := poll(ctx, 2*time.Minute, func() (bool, error) {
		claims, err := e.Setup.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for _, c := range claims.Items {
			if allocationpod.HandedOver(&c) {
				done++
			}
		}
		pods, err := e.Setup.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		why = fmt.Sprintf("%d/%d claims handed over, %d allocation pods left", done, n, len(pods.Items))
		return done == n && len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("handoff: %s: %w", why, err)
	}
	return nil
}

// simulateNodes labels nodes NodeName(0..n-1) simulated (on) with Lease renewal and status
// report intervals of an hour, or takes label and annotations off again and deletes their Leases.
func (e *Env) simulateNodes(ctx context.Context, n int, on bool) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"annotations":{%q:"1h",%q:"1h"}}}`,
		simnode.LabelSimulated, simnode.LabelSimulatedValue, simnode.AnnotationLeaseRenewInterval, simnode.AnnotationStatusReportInterval)
	if !on {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null},"annotations":{%q:null,%q:null}}}`,
			simnode.LabelSimulated, simnode.AnnotationLeaseRenewInterval, simnode.AnnotationStatusReportInterval)
	}
	return parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		if _, err := e.Setup.CoreV1().Nodes().Patch(ctx, NodeName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
		if on {
			return nil
		}
		err := e.Setup.CoordinationV1().Leases("kube-node-lease").Delete(ctx, NodeName(i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// steadyLatency creates n claims in a new namespace ns, one every 1/rate s (create(ctx, ns, i)
// creates claim i and whatever goes with it), while the agents under test run, and returns
// their create-to-allocation latencies. Creates run concurrently, so a slow one does not delay
// the next.
func (e *Env) steadyLatency(ctx context.Context, ns string, n int, rate float64, create func(ctx context.Context, ns string, i int) error) (Latency, error) {
	if err := e.Namespace(ctx, ns); err != nil {
		return Latency{}, err
	}
	w := e.watchClaims(ctx, ns, nil)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	for i := range n {
		<-tick.C
		w.mu.Lock()
		w.created[fmt.Sprintf("c-%04d", i)] = time.Now()
		w.mu.Unlock()
		wg.Go(func() {
			if err := create(ctx, ns, i); err != nil {
				once.Do(func() { first = err })
			}
		})
	}
	tick.Stop()
	wg.Wait()
	if first != nil {
		return Latency{}, first
	}
	if err := w.wait(ctx, n, time.Minute); err != nil {
		return Latency{}, err
	}
	return w.latency(), nil
}

// rawAllocation times UpdateStatus of precomputed allocations, one by one (the claim machine
// has one worker), with the controller's QPS/burst; the devices are AllocSetup's pool's.
func (e *Env) rawAllocation(ctx context.Context, res *AllocResult, run allocRun) error {
	n := run.claims
	ns := run.ns + "-raw"
	if err := e.Namespace(ctx, ns); err != nil {
		return err
	}
	if err := e.CreateClaims(ctx, ns, "c", run.class, n); err != nil {
		return err
	}
	list, err := e.Setup.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	w := e.watchClaims(ctx, ns, nil)
	claimsNS := "bench-alloc" // AllocSetup's pool
	api := e.Measured.ResourceV1().ResourceClaims(ns)
	start := time.Now()
	for i := range list.Items {
		c := &list.Items[i]
		node := NodeName(i / run.devices)
		now := metav1.Now()
		c.Status.Allocation = &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: simdevice.DefaultDriverName, Device: fmt.Sprintf("gpu-%d", i%run.devices),
				Pool: simdevice.PoolNameFor(claimsNS, "alloc", node),
			}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
			}}}}},
			AllocationTimestamp: &now,
		}
		if _, err := api.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("raw status write: %w", err)
		}
	}
	res.RawWall = time.Since(start)
	if err := w.wait(ctx, n, time.Minute); err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	res.Raw = float64(n) / res.RawWall.Seconds()
	fmt.Fprintf(e.Log, "bench: raw status writes: %.1f claims/s\n", res.Raw)
	return e.deleteClaims(ctx, ns)
}

// countedScheduler is kube-scheduler started behind a counting proxy.
const countedScheduler cluster.Component = "kube-scheduler-counted"

// spawnThrough starts another instance of a cluster component (its binary and arguments) as
// name, talking to the API server through kubeconfig, with extra arguments last; an original
// argument of a flag that extra sets (--flag=value) is dropped (list flags such as
// --controllers add up when repeated).
func (e *Env) spawnThrough(name, like cluster.Component, kubeconfig string, extra ...string) (*cluster.Proc, error) {
	for _, p := range e.Cluster.Procs {
		if p.Name == like {
			// A copy serves nothing: the original may hold a port (profiling, see StartCluster).
			extra = append([]string{"--kubeconfig=" + kubeconfig, "--secure-port=0"}, extra...)
			return e.Cluster.Spawn(string(name), append(append([]string{p.Bin}, overridden(p.Args, extra)...), extra...))
		}
	}
	return nil, fmt.Errorf("no component %s to copy", like)
}

// overridden is args without the --flag=value arguments whose flag extra sets.
func overridden(args, extra []string) []string {
	set := map[string]bool{}
	for _, a := range extra {
		if f, _, ok := strings.Cut(a, "="); ok {
			set[f] = true
		}
	}
	var out []string
	for _, a := range args {
		if f, _, ok := strings.Cut(a, "="); !ok || !set[f] {
			out = append(out, a)
		}
	}
	return out
}

// Pod references one claim by name; no kubelet runs it.
func Pod(ns, name, claim string) *corev1.Pod {
	return pausePod(ns, name, "registry.k8s.io/pause:3.10", corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: &claim})
}

// pausePod is one pause container using the pod's one claim, deleted without a grace period.
func pausePod(ns, name, image string, claim corev1.PodResourceClaim) *corev1.Pod {
	zero := int64(0)
	no := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pause", Image: image,
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: claim.Name}}}}},
			ResourceClaims:                []corev1.PodResourceClaim{claim},
			TerminationGracePeriodSeconds: &zero,
			AutomountServiceAccountToken:  &no,
		},
	}
}

// deleteClaims deletes every claim of ns and waits until they are gone.
func (e *Env) deleteClaims(ctx context.Context, ns string) error {
	api := e.Setup.ResourceV1().ResourceClaims(ns)
	if err := api.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	return poll(ctx, time.Minute, func() (bool, error) {
		l, err := api.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, err
	})
}

// deleteScheduled deletes the pods and claims of a kube-scheduler run in ns: the pods at once (no
// kubelet runs them), the claims once the scheduler's delete-protection finalizer is taken off
// (kube-controller-manager, which would remove it, does not run in these phases).
func (e *Env) deleteScheduled(ctx context.Context, ns string) error {
	zero := int64(0)
	if err := e.Setup.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return err
	}
	l, err := e.Setup.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if err := parallel(ctx, len(l.Items), 32, func(ctx context.Context, i int) error {
		_, err := e.Setup.ResourceV1().ResourceClaims(ns).Patch(ctx, l.Items[i].Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return err
	}); err != nil {
		return err
	}
	if err := e.deleteClaims(ctx, ns); err != nil {
		return err
	}
	return poll(ctx, time.Minute, func() (bool, error) {
		p, err := e.Setup.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(p.Items) == 0, err
	})
}

func (e *Env) componentLog(c cluster.Component) string {
	for _, p := range e.Cluster.Procs {
		if p.Name == c {
			return p.Log
		}
	}
	return ""
}
