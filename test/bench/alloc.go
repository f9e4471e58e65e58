package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/test/cluster"
)

// AllocResult is claim allocation throughput of the controller, kube-scheduler and raw
// status writes, all with the same client QPS/burst.
type AllocResult struct {
	Nodes, Devices, Claims int
	// Rates in claims/s, from the first to the last allocation observed.
	Controller, Scheduler, Raw float64
	// Walls: from process start (or first write) until every claim was allocated.
	ControllerWall, SchedulerWall, RawWall time.Duration
	// Requests of the controller and of kube-scheduler over their whole run (process start to
	// the last claim allocated, and for the scheduler to the last pod bound), each seen by a
	// counting proxy of its own, so writes per claim are measured the same way on both sides.
	ControllerReqs, SchedulerReqs Counts
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
//   - controller: claims created first (no controller running), then a fresh controller
//     allocates them all;
//   - raw: UpdateStatus of precomputed allocations, one by one (the claim machine has one
//     worker), with the controller's QPS/burst;
//   - kube-scheduler: n pods each referencing one claim, created first with the scheduler
//     stopped; then the scheduler (QPS/burst as the controller) schedules them and allocates
//     their claims.
//
// The controller and kube-scheduler (a second instance of the cluster's, with its arguments)
// each talk to the API server through a CountingProxy of their own, so their writes per claim
// are measured the same way (AllocResult.WritesPerClaim).
//
// The claims of each run are deleted before the next, so each starts with every device free.
// The scheduler's claims stay (without kube-controller-manager their finalizer stays).
func (e *Env) Allocation(ctx context.Context, nodes, devices, n int) (*AllocResult, error) {
	return e.allocation(ctx, allocRun{nodes: nodes, devices: devices, claims: n, class: "bench-alloc", ns: "bench-alloc", raw: true})
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
}

func (e *Env) allocation(ctx context.Context, run allocRun) (*AllocResult, error) {
	n := run.claims
	res := &AllocResult{Nodes: run.nodes, Devices: run.devices, Claims: n}

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
	ctl.Stop()
	fmt.Fprintf(e.Log, "bench: controller allocated %d claims: %.1f claims/s (wall %s incl. start; %.2f writes per claim; %s)\n", n, res.Controller, res.ControllerWall.Round(time.Millisecond), res.WritesPerClaim(res.ControllerReqs), res.ControllerReqs)
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
	if err := poll(ctx, time.Minute, func() (bool, error) {
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
	}); err != nil {
		return nil, fmt.Errorf("kube-scheduler did not bind every pod: %w", err)
	}
	settle(ctx, sproxy, time.Second, 10*time.Second)
	res.SchedulerReqs = sproxy.Counts()
	_ = e.Cluster.StopComponent(countedScheduler)
	fmt.Fprintf(e.Log, "bench: kube-scheduler allocated %d claims: %.1f claims/s (wall %s incl. start; %.2f writes per claim; %s)\n", n, res.Scheduler, res.SchedulerWall.Round(time.Millisecond), res.WritesPerClaim(res.SchedulerReqs), res.SchedulerReqs)
	return res, nil
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
// name, talking to the API server through kubeconfig (the last --kubeconfig wins), with extra
// arguments last.
func (e *Env) spawnThrough(name, like cluster.Component, kubeconfig string, extra ...string) (*cluster.Proc, error) {
	for _, p := range e.Cluster.Procs {
		if p.Name == like {
			// A copy serves nothing: the original may hold a port (profiling, see StartCluster).
			argv := append(append(append([]string{p.Bin}, p.Args...), "--kubeconfig="+kubeconfig, "--secure-port=0"), extra...)
			return e.Cluster.Spawn(string(name), argv)
		}
	}
	return nil, fmt.Errorf("no component %s to copy", like)
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
