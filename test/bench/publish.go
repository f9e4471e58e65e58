package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
)

// PublishResult compares the controller publishing one pool with a raw client-go loop creating
// the same slices.
type PublishResult struct {
	Nodes, Devices, Slices int
	// Raw and Controller are the medians of each side's runs (RawRuns, ControllerRuns): the raw
	// loop runs before the first controller run and after every one.
	Raw, Controller         time.Duration
	RawRuns, ControllerRuns []time.Duration
	// When the benchmark's watch saw the first and the last slice, from each side's start (in
	// the median run: of two, the faster).
	RawFirst, RawLast, ControllerFirst, ControllerLast time.Duration
	// Requests the controller made from creating the pool until it was Ready (the median run's).
	Requests Requests
	// ControllerCPU is the controller's user+system CPU time over the same span.
	ControllerCPU time.Duration
}

// Publish measures slice publication for the given selector (which must match nodes nodes).
// The raw loop runs first, with no controller running (its orphan sweeper would delete the
// raw slices); the raw slices are then deleted and a fresh controller publishes the pool; once
// it is stopped the raw loop runs again (its slices deleted after), and the baseline is the
// mean of both raw runs (their median). Both sides use QPS/Burst; the raw loop creates one
// slice at a time.
func (e *Env) Publish(ctx context.Context, nodes, devices int, selector map[string]string) (*PublishResult, error) {
	return e.publish(ctx, publishRun{nodes: nodes, devices: devices, selector: selector, ns: "bench-pub",
		qps: QPS, burst: Burst, rawWorkers: 1, rounds: 1})
}

// publishRun is one slice publication measurement.
type publishRun struct {
	nodes, devices int
	selector       map[string]string
	// ns holds the controller's pool (a fresh one per run; "<ns>-<round>" with several rounds).
	ns string
	// qps and burst are the client limits of both sides.
	qps, burst int
	// rawWorkers are the raw loop's creates in flight at once.
	rawWorkers int
	// cleanup deletes the pool (and so its slices) with the controller still running.
	cleanup bool
	// rounds is how many times the controller publishes: the raw loop, then rounds times the
	// controller and the raw loop again. More than one needs cleanup.
	rounds int
}

func (e *Env) publish(ctx context.Context, run publishRun) (*PublishResult, error) {
	nodes, devices, selector := run.nodes, run.devices, run.selector
	if run.rounds < 1 || run.rounds > 1 && !run.cleanup {
		return nil, fmt.Errorf("publication: %d rounds (more than one needs cleanup)", run.rounds)
	}
	res := &PublishResult{Nodes: nodes, Devices: devices}
	nodeList, err := e.Setup.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labelsString(selector)})
	if err != nil {
		return nil, err
	}
	if len(nodeList.Items) != nodes {
		return nil, fmt.Errorf("selector matches %d nodes, want %d", len(nodeList.Items), nodes)
	}
	var ptrs []*corev1.Node
	for i := range nodeList.Items {
		ptrs = append(ptrs, &nodeList.Items[i])
	}

	// Raw baseline: the same content (DesiredSlices of the same spec, pool generation 1 as
	// the controller writes it) created one by one with the controller's QPS/burst.
	rawPool := pooltest.Pool("bench-raw", "pub", types.UID("00000000-0000-0000-0000-000000000raw"),
		simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: devices, NodeSelector: selector,
			Attributes: map[string]simdevice.AttributeValue{"scenario": {String: ptrTo("bench-pub")}}})
	desired, err := simdevice.DesiredSlices(rawPool, ptrs)
	if err != nil {
		return nil, err
	}
	res.Slices = len(desired)
	measured, err := e.Client(run.qps, run.burst)
	if err != nil {
		return nil, err
	}
	for _, s := range desired {
		s.Spec.Pool.Generation = 1 // as the controller writes the pool's first generation
	}
	api := measured.ResourceV1().ResourceSlices()
	raw, err := e.rawPublish(ctx, api, desired, rawPool.UID, run.rawWorkers)
	if err != nil {
		return nil, err
	}
	raws := []rawRun{raw}
	var ctls []controllerRun
	for i := range run.rounds {
		ns := run.ns
		if run.rounds > 1 {
			ns = fmt.Sprintf("%s-%d", run.ns, i)
		}
		c, err := e.controllerPublish(ctx, run, ns, len(desired))
		if err != nil {
			return nil, err
		}
		ctls = append(ctls, c)
		// The raw loop again, after the controller (stopped: its orphan sweeper would delete
		// the raw slices): the machine's speed drifts between runs by more than the target's
		// margin, so raw runs bracket every controller run.
		if raw, err = e.rawPublish(ctx, api, desired, rawPool.UID, run.rawWorkers); err != nil {
			return nil, err
		}
		raws = append(raws, raw)
	}
	for _, r := range raws {
		res.RawRuns = append(res.RawRuns, r.total)
	}
	for _, c := range ctls {
		res.ControllerRuns = append(res.ControllerRuns, c.total)
	}
	res.Raw, res.Controller = median(res.RawRuns), median(res.ControllerRuns)
	r := medianRun(raws, func(r rawRun) time.Duration { return r.total })
	res.RawFirst, res.RawLast = r.first, r.last
	c := medianRun(ctls, func(c controllerRun) time.Duration { return c.total })
	res.ControllerFirst, res.ControllerLast, res.Requests, res.ControllerCPU = c.first, c.last, c.requests, c.cpu
	return res, nil
}

// controllerRun is one publication by the controller.
type controllerRun struct {
	total, first, last time.Duration
	requests           Requests
	cpu                time.Duration
}

// controllerPublish starts a controller (ready and synced before the pool exists), times it
// from the create of the pool in ns until every slice is observed and the pool shows Ready,
// deletes the pool when run.cleanup says so, and stops the controller.
func (e *Env) controllerPublish(ctx context.Context, run publishRun, ns string, slices int) (controllerRun, error) {
	if err := e.Namespace(ctx, ns); err != nil {
		return controllerRun{}, err
	}
	ctl, err := e.StartController(ctx, "--kube-api-qps="+strconv.Itoa(run.qps), "--kube-api-burst="+strconv.Itoa(run.burst))
	if err != nil {
		return controllerRun{}, err
	}
	defer ctl.Stop()
	if err := ctl.Quiesce(ctx, time.Second, time.Minute); err != nil {
		return controllerRun{}, err
	}
	metricsBefore, err := ctl.Metrics()
	if err != nil {
		return controllerRun{}, err
	}
	cpuBefore, err := ProcessCPU(ctl.Pid)
	if err != nil {
		return controllerRun{}, err
	}
	watch := newSliceCounter(ctx, e, simdevice.LabelSDPNamespace+"="+ns)
	pools := e.SetupDyn.Resource(gvr.SimulatedDevicePools).Namespace(ns)
	poolWatch := e.watchPools(ctx, ns)
	start := time.Now()
	if _, err := pools.Create(ctx, PoolObject(ns, "pub", "bench-pub", run.devices, run.selector, nil), metav1.CreateOptions{}); err != nil {
		return controllerRun{}, err
	}
	if err := poll(ctx, 5*time.Minute, func() (bool, error) {
		return watch.count() >= slices && poolsReady(poolWatch.List()) == 1, nil
	}); err != nil {
		return controllerRun{}, fmt.Errorf("pool not published (%d/%d slices): %w\n%s", watch.count(), slices, err, tail(ctl.Log, 20))
	}
	c := controllerRun{total: time.Since(start)}
	if cpuAfter, err := ProcessCPU(ctl.Pid); err == nil {
		c.cpu = cpuAfter - cpuBefore
	}
	after, err := ctl.Metrics()
	if err != nil {
		return controllerRun{}, err
	}
	c.requests = after.Requests().Sub(metricsBefore.Requests())
	c.first, c.last = watch.span(start)
	fmt.Fprintf(e.Log, "bench: controller published %d slices in %s (%s; %s), controller CPU %s\n", slices, c.total.Round(time.Millisecond), spanString(c.first, c.last), c.requests, c.cpu)
	if run.cleanup {
		if err := e.deletePools(ctx, ns); err != nil {
			return controllerRun{}, err
		}
	}
	return c, nil
}

// median is the middle duration (of an even number, the mean of the two middle ones).
func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// medianRun returns the run of median duration (of an even number, the lower middle one), for
// the details reported with the median.
func medianRun[T any](runs []T, d func(T) time.Duration) T {
	sorted := slices.SortedFunc(slices.Values(runs), func(a, b T) int { return cmp.Compare(d(a), d(b)) })
	return sorted[(len(sorted)-1)/2]
}

// runsText names the runs each side's median is taken from.
func (r *PublishResult) runsText() string {
	return fmt.Sprintf("median of raw runs %s; controller runs %s", secs(r.RawRuns), secs(r.ControllerRuns))
}

func secs(ds []time.Duration) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		parts = append(parts, sec(d))
	}
	return strings.Join(parts, ", ")
}

// rawRun is one run of the raw loop: its duration and when the watch saw the first and the
// last slice.
type rawRun struct{ total, first, last time.Duration }

// rawPublish creates desired (as the controller would for the pool with UID uid) with workers
// creates in flight, waits until the benchmark's watch has seen them all, then deletes them.
func (e *Env) rawPublish(ctx context.Context, api resourceclient.ResourceSliceInterface, desired []*resourcev1.ResourceSlice, uid types.UID, workers int) (rawRun, error) {
	sel := simdevice.LabelSDPUID + "=" + string(uid)
	// Both sides end when this process's watch has seen every slice, so both pay for the same
	// watch and the raw loop is not timed to its last response only.
	rawWatch := newSliceCounter(ctx, e, sel)
	start := time.Now()
	if err := parallel(ctx, len(desired), workers, func(ctx context.Context, i int) error {
		if _, err := api.Create(ctx, desired[i], metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("raw create: %w", err)
		}
		return nil
	}); err != nil {
		return rawRun{}, err
	}
	if err := poll(ctx, 5*time.Minute, func() (bool, error) { return rawWatch.count() >= len(desired), nil }); err != nil {
		return rawRun{}, fmt.Errorf("raw slices not observed (%d/%d): %w", rawWatch.count(), len(desired), err)
	}
	r := rawRun{total: time.Since(start)}
	r.first, r.last = rawWatch.span(start)
	fmt.Fprintf(e.Log, "bench: raw loop created %d slices in %s (%s)\n", len(desired), r.total.Round(time.Millisecond), spanString(r.first, r.last))
	if err := e.Setup.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return rawRun{}, err
	}
	if err := poll(ctx, 60*time.Second, func() (bool, error) {
		l, err := e.Setup.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: 1})
		return err == nil && len(l.Items) == 0, err
	}); err != nil {
		return rawRun{}, err
	}
	return r, nil
}

// sliceCounter counts slices matching a label selector through a watch.
type sliceCounter struct {
	store cache.Store
	// first and last are when the watch delivered the first and the latest slice.
	mu          sync.Mutex
	first, last time.Time
}

func newSliceCounter(ctx context.Context, e *Env, selector string) *sliceCounter {
	f := informers.NewSharedInformerFactoryWithOptions(e.Setup, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = selector
	}))
	inf := f.Resource().V1().ResourceSlices().Informer()
	c := &sliceCounter{store: inf.GetStore()}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.first.IsZero() {
			c.first = time.Now()
		}
		c.last = time.Now()
	}})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return c
}

func (c *sliceCounter) count() int { return len(c.store.ListKeys()) }

// span returns when the first and the latest slice arrived, relative to start.
func (c *sliceCounter) span(start time.Time) (first, last time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first.Sub(start), c.last.Sub(start)
}

func spanString(first, last time.Duration) string {
	return fmt.Sprintf("first slice seen after %s, last after %s", first.Round(time.Millisecond), last.Round(time.Millisecond))
}

func labelsString(m map[string]string) string {
	s := ""
	for k, v := range m {
		if s != "" {
			s += ","
		}
		s += k + "=" + v
	}
	return s
}

func ptrTo[T any](v T) *T { return &v }

// poolsReady counts the Ready pools among objs (a pool store's List).
func poolsReady(objs []any) int {
	n := 0
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok && PoolReady(u) {
			n++
		}
	}
	return n
}

// watchPools returns a store of the pools in ns kept by a watch. Waiting on it instead of
// polling keeps the benchmark off the API server it measures: a 5,000-node pool is 709 KiB of
// JSON (its status lists every node), and a GET every 50 ms made kube-apiserver encode one
// while the controller's status write was waiting on it.
func (e *Env) watchPools(ctx context.Context, ns string) cache.Store {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(e.SetupDyn, 0, ns, nil)
	inf := f.ForResource(gvr.SimulatedDevicePools).Informer()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return inf.GetStore()
}
