package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/test/cluster"
)

// ScaleConfig sizes the phases where the client rate limiter is not the floor (scale-publish:
// publication, cold start and process memory at thousands of nodes) and the steady state of
// thousands of simulated nodes (scale-nodes).
type ScaleConfig struct {
	// PubSizes are the node counts of publication and cold start; the largest is also the size
	// of the process memory measurement.
	PubSizes []int
	Devices  int
	// QPS and Burst are both sides' client limits in scale-publish, high enough that the API
	// server, not the limiter, is the floor.
	QPS, Burst int
	// PubRounds is how many times the controller publishes at each size, with a raw run before
	// the first and after each: the rows compare the medians (a single pair of runs on the
	// 2-core bench machine differed by more than the target's margin from one bench run to
	// the next).
	PubRounds int
	// NodesPerPool sizes the cold start's pools (targetNodes lists, at most 64 by the CRD).
	NodesPerPool int
	// Claims are allocated before the process memory is read.
	Claims int
	// SimNodes are the simulated nodes of scale-nodes, kept Ready by a controller with
	// SimQPS/SimBurst (a Lease renewal every 10s per node is SimNodes/10 writes per second).
	SimNodes          int
	SimQPS, SimBurst  int
	SimSettle, Window time.Duration
}

// DefaultScaleConfig is the size of the proof issue's scale rows.
func DefaultScaleConfig() ScaleConfig {
	return ScaleConfig{
		PubSizes: []int{1000, 5000}, Devices: 8, QPS: 2000, Burst: 4000, PubRounds: 3, NodesPerPool: 50, Claims: 1000,
		SimNodes: 10000, SimQPS: 2000, SimBurst: 4000, SimSettle: 20 * time.Second, Window: 60 * time.Second,
	}
}

// Client returns a clientset with the given limits, speaking as the controller does (asController).
func (e *Env) Client(qps, burst int) (kubernetes.Interface, error) {
	cfg, err := inlineConfig(e.Cluster.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(asController(cfg, qps, burst))
}

// APIServerLimits describes the local kube-apiserver's own concurrency limits: its defaults, as
// test/cluster passes none of these flags, and every client here authenticates as
// system:masters, whose requests API Priority and Fairness exempts from its queues.
const APIServerLimits = "kube-apiserver defaults: --max-requests-inflight=400, --max-mutating-requests-inflight=200, " +
	"API Priority and Fairness on; all clients are system:masters (APF's exempt priority level)"

// RunScale runs the scale phases selected in cfg, each on a control plane of its own.
func RunScale(ctx context.Context, cfg Config, log io.Writer) ([]Row, error) {
	var rows []Row
	sc := cfg.Scale
	if cfg.run("scale-publish") {
		r, err := withEnv(ctx, log, func(e *Env) ([]Row, error) { return e.scalePublish(ctx, sc) })
		rows = append(rows, r...)
		if err != nil {
			rows = append(rows, failedRow("scale: publication, cold start and process memory", err, log))
		}
	}
	if cfg.run("scale-nodes") {
		r, err := withEnv(ctx, log, func(e *Env) ([]Row, error) { return e.scaleNodes(ctx, sc) })
		rows = append(rows, r...)
		if err != nil {
			rows = append(rows, failedRow(fmt.Sprintf("scale: %d simulated nodes steady state", sc.SimNodes), err, log))
		}
	}
	return rows, nil
}

func failedRow(metric string, err error, log io.Writer) Row {
	fmt.Fprintf(log, "bench: %s FAILED: %v\n", metric, err)
	return Row{Metric: metric, Value: "failed: " + firstLine(err.Error()), Skip: true, Failed: true}
}

func withEnv(ctx context.Context, log io.Writer, fn func(*Env) ([]Row, error)) ([]Row, error) {
	dir, err := os.MkdirTemp("", "draforge-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e, err := Start(ctx, dir, log)
	if err != nil {
		return nil, err
	}
	defer e.Stop()
	return fn(e)
}

// scalePublish measures, on one control plane: the controller's and serve's memory with
// nothing to cache; publication at sc.QPS for each size against a raw loop with the
// controller's concurrency; the cold start to every pool Ready for each size; then, at the
// largest size with claims allocated, both processes' VmRSS.
func (e *Env) scalePublish(ctx context.Context, sc ScaleConfig) ([]Row, error) {
	var rows []Row
	if sc.NodesPerPool < 1 || sc.NodesPerPool > 64 {
		return nil, fmt.Errorf("nodes per pool %d: the CRD allows 1 to 64 targetNodes", sc.NodesPerPool)
	}
	qpsArgs := []string{"--kube-api-qps=" + strconv.Itoa(sc.QPS), "--kube-api-burst=" + strconv.Itoa(sc.Burst)}
	limits := fmt.Sprintf("QPS %d/burst %d both sides", sc.QPS, sc.Burst)

	// Empty-cluster baselines of both processes' memory.
	emptyCtl, err := e.processMemory(ctx, "controller", qpsArgs)
	if err != nil {
		return rows, err
	}
	emptyServe, err := e.processMemory(ctx, "serve", qpsArgs)
	if err != nil {
		return rows, err
	}

	sizes := slices.Sorted(slices.Values(sc.PubSizes))
	largest := sizes[len(sizes)-1]
	prev := 0
	for _, n := range sizes {
		labels := map[string]string{}
		for _, m := range sizes {
			if m >= n {
				labels[scaleLabel(m)] = "true"
			}
		}
		fmt.Fprintf(e.Log, "bench: scale: creating nodes %d..%d\n", prev, n)
		if err := e.CreateNodes(ctx, prev, n, labels); err != nil {
			return rows, err
		}
		prev = n
	}

	for _, n := range sizes {
		r, err := e.publish(ctx, publishRun{nodes: n, devices: sc.Devices, selector: map[string]string{scaleLabel(n): "true"},
			ns: fmt.Sprintf("bench-pub-%d", n), qps: sc.QPS, burst: sc.Burst, rawWorkers: writeConcurrency, cleanup: true, rounds: sc.PubRounds})
		if err != nil {
			return rows, fmt.Errorf("publication at %d nodes: %w", n, err)
		}
		rows = append(rows, Row{
			Metric: fmt.Sprintf("slice publication at %s: controller vs raw client-go loop, %d creates in flight, both until watched (%d nodes x %d devices, %d slices)", limits, writeConcurrency, r.Nodes, r.Devices, r.Slices),
			Value: fmt.Sprintf("%s (%.0f slices/s; %s, controller CPU %s)", sec(r.Controller), float64(r.Slices)/r.Controller.Seconds(),
				spanString(r.ControllerFirst, r.ControllerLast), sec(r.ControllerCPU)),
			Baseline: fmt.Sprintf("%s (%.0f slices/s; %s; median raw run %s)", sec(r.Raw), float64(r.Slices)/r.Raw.Seconds(), r.runsText(), spanString(r.RawFirst, r.RawLast)),
			Ratio:    ratio(r.Controller.Seconds(), r.Raw.Seconds()), Target: "<= 1.2",
			OK: r.Controller.Seconds()/r.Raw.Seconds() <= 1.2})
	}

	var full *ColdStart
	for _, n := range sizes {
		cs, err := e.coldStart(ctx, n, sc, qpsArgs)
		if err != nil {
			return rows, fmt.Errorf("cold start at %d nodes: %w", n, err)
		}
		rows = append(rows, Row{
			Metric: fmt.Sprintf("cold start to every pool Ready at %s (%d nodes x %d devices, %d pools, controller started with pools and nodes existing)", limits, n, sc.Devices, cs.Pools),
			Value:  fmt.Sprintf("%s (ready after %s)", sec(cs.AllReady), sec(cs.Ready)), Target: "report", OK: true})
		// Allocation of this size's devices at the same QPS on both sides; the cold start's
		// controller stops first (it would allocate the claims too).
		cs.ctl.Stop()
		allocRows, err := e.scaleAllocation(ctx, cs, n, sc, qpsArgs, limits)
		rows = append(rows, allocRows...)
		if err != nil {
			return rows, fmt.Errorf("allocation at %d nodes: %w", n, err)
		}
		// A controller again: it keeps the largest size for the claims and memory below, and
		// deletes the smaller sizes' pools.
		if cs.ctl, err = e.StartController(ctx, qpsArgs...); err != nil {
			return rows, err
		}
		if n == largest {
			full = cs
			continue
		}
		err = e.deletePools(ctx, cs.ns)
		cs.ctl.Stop()
		if err != nil {
			return rows, err
		}
	}
	defer full.ctl.Stop()

	// Claims, then the largest size's process memory.
	took, err := e.allocateClaims(ctx, full.ns, sc.Claims)
	if err != nil {
		return rows, err
	}
	rows = append(rows, Row{
		Metric: fmt.Sprintf("allocation at QPS %d/burst %d: %d one-device claims created (32 at once) while the controller runs, on %d nodes x %d devices, first create to last allocation seen", sc.QPS, sc.Burst, sc.Claims, largest, sc.Devices),
		Value:  fmt.Sprintf("%.1f claims/s (%s)", float64(sc.Claims)/took.Seconds(), sec(took)), Target: "report", OK: true})
	objects := largest /* nodes */ + largest /* slices */ + full.Pools + sc.Claims
	what := fmt.Sprintf("%d nodes, %d slices of %d devices, %d pools, %d claims", largest, largest, sc.Devices, full.Pools, sc.Claims)
	if err := full.ctl.Quiesce(ctx, 2*time.Second, 3*time.Minute); err != nil {
		return rows, err
	}
	ctlMem, err := settledMemory(ctx, full.ctl.Pid, full.ctl.Addr)
	if err != nil {
		return rows, err
	}
	full.ctl.Stop()
	serveMem, err := e.processMemory(ctx, "serve", qpsArgs)
	if err != nil {
		return rows, err
	}
	for _, p := range []struct {
		name        string
		full, empty ProcMemory
	}{{"controller", ctlMem, emptyCtl}, {"serve", serveMem, emptyServe}} {
		rss := float64(p.full.RSS-p.empty.RSS) / float64(objects)
		heap := float64(p.full.Heap-p.empty.Heap) / float64(objects)
		rows = append(rows,
			Row{Metric: fmt.Sprintf("%s VmRSS per cached object (%s; above the %s with nothing cached)", p.name, what, mib(p.empty.RSS)),
				Value: fmt.Sprintf("%.2f KiB (VmRSS %s)", rss/1024, mib(p.full.RSS)), Target: "report", OK: true},
			Row{Metric: fmt.Sprintf("%s Go heap in use per cached object (%s; go_memstats_heap_inuse_bytes above %s with nothing cached)", p.name, what, mib(p.empty.Heap)),
				Value: fmt.Sprintf("%.2f KiB (%s)", heap/1024, mib(p.full.Heap)), Target: "report", OK: true})
	}
	return rows, nil
}

func scaleLabel(n int) string { return fmt.Sprintf("bench.draforge/scale-%d", n) }

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// ColdStart is a controller started with pools and nodes already there.
type ColdStart struct {
	Pools int
	// Ready is from spawning the process to /readyz (caches synced); AllReady to every pool
	// showing Ready for its generation.
	Ready, AllReady time.Duration
	ns              string
	ctl             *Controller
}

// coldStart creates n/NodesPerPool pools (each targeting its own nodes) with no controller
// running, then times a controller's start until every pool is Ready; the controller is left
// running for the caller.
func (e *Env) coldStart(ctx context.Context, n int, sc ScaleConfig, qpsArgs []string) (*ColdStart, error) {
	ns := fmt.Sprintf("bench-cold-%d", n)
	if err := e.Namespace(ctx, ns); err != nil {
		return nil, err
	}
	pools := e.SetupDyn.Resource(gvr.SimulatedDevicePools).Namespace(ns)
	poolWatch := e.watchPools(ctx, ns)
	cs := &ColdStart{ns: ns}
	for first := 0; first < n; first += sc.NodesPerPool {
		var targets []string
		for i := first; i < min(first+sc.NodesPerPool, n); i++ {
			targets = append(targets, NodeName(i))
		}
		name := fmt.Sprintf("cold-%04d", first/sc.NodesPerPool)
		if _, err := pools.Create(ctx, PoolObject(ns, name, ns, sc.Devices, nil, targets), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		cs.Pools++
	}
	start := time.Now()
	ctl, err := e.StartController(ctx, qpsArgs...)
	if err != nil {
		return nil, err
	}
	cs.Ready = time.Since(start)
	if err := poll(ctx, 10*time.Minute, func() (bool, error) {
		return poolsReady(poolWatch.List()) == cs.Pools, nil
	}); err != nil {
		ctl.Stop()
		return nil, fmt.Errorf("pools not Ready: %w\n%s", err, tail(ctl.Log, 20))
	}
	cs.AllReady = time.Since(start)
	fmt.Fprintf(e.Log, "bench: cold start at %d nodes: ready %s, %d pools Ready %s\n", n, cs.Ready.Round(time.Millisecond), cs.Pools, cs.AllReady.Round(time.Millisecond))
	cs.ctl = ctl
	return cs, nil
}

// scaleAllocation compares the controller with kube-scheduler allocating claims for the cold
// start's devices of n nodes, both at the scale phase's QPS (Allocation's method: each side
// through a counting proxy of its own, writes per claim measured; it deletes both runs' claims
// and pods, so every device is free again).
func (e *Env) scaleAllocation(ctx context.Context, cs *ColdStart, n int, sc ScaleConfig, qpsArgs []string, limits string) ([]Row, error) {
	if err := e.DeviceClass(ctx, cs.ns, cs.ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	ns := fmt.Sprintf("bench-scale-alloc-%d", n)
	r, err := e.allocation(ctx, allocRun{nodes: n, devices: sc.Devices, claims: sc.Claims, class: cs.ns, ns: ns, args: qpsArgs})
	if err != nil {
		return nil, err
	}
	label := fmt.Sprintf("at %s (%d one-device claims, %d nodes x %d devices)", limits, r.Claims, n, sc.Devices)
	return []Row{
		{Metric: "allocation: controller vs kube-scheduler, claims/s (unequal work) " + label,
			Value: fmt.Sprintf("%.1f claims/s", r.Controller), Baseline: fmt.Sprintf("kube-scheduler %.1f claims/s", r.Scheduler),
			Ratio: ratio(r.Controller, r.Scheduler), Target: "report", OK: true},
		{Metric: "allocation per API write (equal work): controller vs kube-scheduler, claims/s x measured writes per claim " + label,
			Value:    fmt.Sprintf("%.1f writes/s (%.2f writes/claim)", r.ControllerWrites(), r.WritesPerClaim(r.ControllerReqs)),
			Baseline: fmt.Sprintf("kube-scheduler %.1f writes/s (%.2f writes/claim)", r.SchedulerWrites(), r.WritesPerClaim(r.SchedulerReqs)),
			Ratio:    ratio(r.ControllerWrites(), r.SchedulerWrites()), Target: "report", OK: true},
	}, nil
}

// allocateClaims creates n one-device claims of a class selecting the cold start's devices in ns
// and waits until the running controller has allocated them all; it returns the time from the
// first create until a watch saw the last allocation.
func (e *Env) allocateClaims(ctx context.Context, ns string, n int) (time.Duration, error) {
	class := ns
	if err := e.DeviceClass(ctx, class, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		last time.Time
	)
	e.watchClaims(ctx, ns, func(c *resourcev1.ResourceClaim) {
		mu.Lock()
		defer mu.Unlock()
		if !seen[c.Name] {
			seen[c.Name], last = true, time.Now()
		}
	})
	start := time.Now()
	if err := e.CreateClaims(ctx, ns, "c", class, n); err != nil {
		return 0, err
	}
	err := poll(ctx, 10*time.Minute, func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n, nil
	})
	mu.Lock()
	defer mu.Unlock()
	return last.Sub(start), err
}

// deletePools deletes every pool of ns and waits until they are gone (a running controller
// removes their slices and finalizers).
func (e *Env) deletePools(ctx context.Context, ns string) error {
	pools := e.SetupDyn.Resource(gvr.SimulatedDevicePools).Namespace(ns)
	if err := pools.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	return poll(ctx, 5*time.Minute, func() (bool, error) {
		l, err := pools.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, err
	})
}

// ProcMemory is one process's memory after its caches synced and it went quiet.
type ProcMemory struct {
	// RSS is VmRSS from /proc/<pid>/status; Heap is go_memstats_heap_inuse_bytes.
	RSS, Heap uint64
}

// processMemory starts `draforge <command>` with args, waits for /readyz and quiet, reads its
// memory and stops it.
func (e *Env) processMemory(ctx context.Context, command string, args []string) (ProcMemory, error) {
	if command == "controller" {
		ctl, err := e.StartController(ctx, args...)
		if err != nil {
			return ProcMemory{}, err
		}
		defer ctl.Stop()
		if err := ctl.Quiesce(ctx, 2*time.Second, 3*time.Minute); err != nil {
			return ProcMemory{}, err
		}
		return settledMemory(ctx, ctl.Pid, ctl.Addr)
	}
	addr, err := freeAddr()
	if err != nil {
		return ProcMemory{}, err
	}
	e.mu.Lock()
	e.procs++
	name := fmt.Sprintf("draforge-serve-%d", e.procs)
	e.mu.Unlock()
	argv := append([]string{e.Bin, "serve", "--kubeconfig", e.Cluster.Kubeconfig, "--address", addr}, args...)
	p, err := e.Cluster.Spawn(name, argv)
	if err != nil {
		return ProcMemory{}, err
	}
	defer func() { _ = e.Cluster.StopComponent(cluster.Component(name)) }()
	c := &Controller{Name: name, Addr: addr, Log: p.Log, Pid: p.Pid, e: e}
	if err := poll(ctx, 3*time.Minute, func() (bool, error) {
		code, _ := c.get("/readyz")
		return code == http.StatusOK, nil
	}); err != nil {
		return ProcMemory{}, fmt.Errorf("serve not ready: %w\n%s", err, tail(p.Log, 20))
	}
	return settledMemory(ctx, p.Pid, addr)
}

// MemorySettle is how long a process is left alone before its memory is read: the Go runtime
// returns freed pages to the OS gradually (its background scavenger), and a GC cycle must run
// after the caches filled for the heap to show only what is live.
const MemorySettle = 15 * time.Second

// settledMemory waits MemorySettle and reads the process's VmRSS and heap in use.
func settledMemory(ctx context.Context, pid int, addr string) (ProcMemory, error) {
	m, err := settledRSS(ctx, pid)
	if err != nil {
		return ProcMemory{}, err
	}
	c := &Controller{Addr: addr}
	s, err := c.Metrics()
	if err != nil {
		return ProcMemory{}, err
	}
	m.Heap = uint64(s.Sum("go_memstats_heap_inuse_bytes"))
	return m, nil
}

// controlPlaneCores formats the control plane's CPU over a window in cores per component.
func controlPlaneCores(cpu map[cluster.Component]time.Duration, window time.Duration) string {
	var parts []string
	for _, c := range []cluster.Component{cluster.APIServer, cluster.Etcd, cluster.ControllerManager} {
		if d, ok := cpu[c]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", c, d.Seconds()/window.Seconds()))
		}
	}
	if len(parts) == 0 {
		return "not read"
	}
	return strings.Join(parts, ", ") + " cores"
}

// LeaseRenewalsPerMinute is a kubelet's (and the node machine's) Lease cadence: every 10s.
const LeaseRenewalsPerMinute = 6.0

// writeConcurrency mirrors drivers/pools' writeConcurrency (slice writes of one pass in
// flight at once), so the raw loop at a high QPS does what the controller does.
const writeConcurrency = 16

// scaleNodes runs DRAForge and then KWOK through the same measurements at sc.SimNodes nodes
// on one control plane (scaleSide; each side deletes its nodes and Leases when done): creation
// to Ready, the steady state, process memory and pods bound to one node without a scheduler.
func (e *Env) scaleNodes(ctx context.Context, sc ScaleConfig) ([]Row, error) {
	r, err := e.scaleSide(ctx, sc, agentDRAForge)
	if err != nil {
		return nil, err
	}
	k, err := e.scaleSide(ctx, sc, agentKwok)
	if err != nil {
		return nil, fmt.Errorf("KWOK side: %w", err)
	}
	return scaleNodeRows(sc, r, k), nil
}

// scaleNodeRows are the scale-nodes rows of DRAForge's side r beside KWOK's k.
func scaleNodeRows(sc ScaleConfig, r, k *ScaleSide) []Row {
	n := r.Steady.Nodes
	both := fmt.Sprintf("each agent behind a counting proxy of its own, controller QPS %d/burst %d, KWOK unlimited, kube-controller-manager running", sc.SimQPS, sc.SimBurst)
	create := fmt.Sprintf("(%s nodes created %d at once by a client at QPS 2000/burst 4000 with the agent running; DRAForge: `draforge nodes`, an apply of each node and of its status, Ready as written; KWOK: kwokctl scale's node, one create, Ready by its node-initialize stage; %s)",
		thousands(n), writeConcurrency, both)
	label := fmt.Sprintf("(%s simulated nodes, %s from %s after every Lease was held (DRAForge %s, KWOK %s to get there), %s)",
		thousands(n), r.Steady.Window.Round(time.Second), sc.SimSettle, r.Held.Round(time.Second), k.Held.Round(time.Second), both)
	pods := fmt.Sprintf("(%s pods created 32 at once, each with spec.nodeName set to the agent's first node, no scheduler; KWOK's CI shape; %s nodes kept alive meanwhile)",
		thousands(n), thousands(n))
	w, kw := r.Steady.PerNodeMinute(float64(r.Requests.Writes())), k.Steady.PerNodeMinute(float64(k.Requests.Writes()))
	cpuPerNode := r.Steady.CPU.Seconds() * 1000 / float64(n) / r.Steady.Window.Minutes()
	kwokCIRate := float64(kwokCINodes) / kwokCINodesWithin.Seconds()
	kwokCIPodRate := float64(kwokCIPods) / kwokCIPodsWithin.Seconds()
	perNode := func(m ProcMemory) string { return fmt.Sprintf("%.1f KiB per node", float64(m.RSS)/1024/float64(n)) }
	rows := []Row{
		// Creation to Ready: the rate KWOK's CI bounds (5,000 nodes within 60 s), Lease held
		// included, as a node is alive only once its agent renews it.
		{Metric: "creation: nodes per second from the first create to every node Ready and every Lease held, DRAForge vs KWOK " + create,
			Value: fmt.Sprintf("%.0f nodes/s (Ready after %s, Leases held after %s; creator writes %d, controller %s)",
				r.CreateRate(), sec(r.Ready), sec(r.Held), r.CreateWrites, writesOnly(r.Created)),
			Baseline: fmt.Sprintf("KWOK %.0f nodes/s (Ready after %s, Leases held after %s; creator writes %d, KWOK %s); KWOK's CI: %s nodes within %s (%.0f/s)",
				k.CreateRate(), sec(k.Ready), sec(k.Held), k.CreateWrites, writesOnly(k.Created), thousands(kwokCINodes), kwokCINodesWithin, kwokCIRate),
			Ratio: ratio(r.CreateRate(), k.CreateRate()), Target: "≥ 0.9× KWOK",
			OK: r.CreateRate() >= 0.9*k.CreateRate()},
		// Fewer writes than the cadence is not cheaper but late: the Lease renewals must keep up
		// as well as KWOK's do on the same control plane (both renew every 10 s).
		{Metric: "steady state: writes per node per minute, DRAForge vs KWOK " + label, Value: fmt.Sprintf("%.2f (%s)", w, writesOnly(r.Requests)),
			Baseline: fmt.Sprintf("KWOK %.2f (%s); kubelet %.1f", kw, writesOnly(k.Requests), KubeletWritesPerMinute), Ratio: ratio(w, kw),
			Target: "≥ 0.95× KWOK, ≤ 1.1× kubelet, all Ready",
			OK:     kw > 0 && w >= 0.95*kw && w/KubeletWritesPerMinute <= 1.1 && r.Steady.NotReady == 0},
		{Metric: "steady state: oldest Lease renewal at the end / nodes not Ready, DRAForge " + label,
			Value:    fmt.Sprintf("%s / %d", sec(r.Steady.OldestLease), r.Steady.NotReady),
			Baseline: fmt.Sprintf("KWOK %s / %d; kubelet 10 s", sec(k.Steady.OldestLease), k.Steady.NotReady),
			// At 10,000 nodes on 2 cores kube-apiserver cannot take every agent's renewals at the
			// kubelet's 10 s (KWOK's Leases were 28.8 s old at 26833d2): as fresh as KWOK keeps
			// them on the same control plane, and never expired (both agents' Leases last 40 s).
			Target: "≤ 1.1× KWOK and < 40 s / 0",
			OK:     r.Steady.OldestLease <= k.Steady.OldestLease*11/10 && r.Steady.OldestLease < cluster.KwokLeaseDurationSeconds*time.Second && r.Steady.NotReady == 0},
		{Metric: "steady state: requests per node per minute " + label, Value: fmt.Sprintf("%.2f", r.Steady.PerNodeMinute(float64(r.Requests.Total()))),
			Baseline: fmt.Sprintf("KWOK %.2f; kubelet %.1f", k.Steady.PerNodeMinute(float64(k.Requests.Total())), KubeletRequestsPerMinute),
			Ratio:    ratio(r.Steady.PerNodeMinute(float64(r.Requests.Total())), KubeletRequestsPerMinute), Target: "report", OK: true},
		{Metric: "steady state: node agent CPU " + label, Value: fmt.Sprintf("DRAForge controller %.3f cores (%.2f ms CPU per node per minute)", r.Steady.Cores(), cpuPerNode),
			Baseline: fmt.Sprintf("KWOK %.3f cores", k.Steady.Cores()), Ratio: ratio(r.Steady.Cores(), k.Steady.Cores()), Target: "report", OK: true},
		{Metric: "steady state: control plane CPU, of the machine's " + strconv.Itoa(runtime.NumCPU()) + " cores " + label,
			Value: "DRAForge side: " + controlPlaneCores(r.ControlPlaneCPU, r.Steady.Window), Baseline: "KWOK side: " + controlPlaneCores(k.ControlPlaneCPU, k.Steady.Window),
			Target: "report", OK: true},
		{Metric: fmt.Sprintf("process memory keeping %s nodes: node agent VmRSS after the steady-state window and %s quiet", thousands(n), MemorySettle),
			Value:    fmt.Sprintf("DRAForge controller %s (%s; heap in use %s)", mib(r.Memory.RSS), perNode(r.Memory), mib(r.Memory.Heap)),
			Baseline: fmt.Sprintf("KWOK %s (%s)", mib(k.Memory.RSS), perNode(k.Memory)), Ratio: ratio(float64(r.Memory.RSS), float64(k.Memory.RSS)),
			Target: "report", OK: true},
	}
	// A side whose pods failed keeps its other rows; the pod rows say why.
	if err := errors.Join(r.PodsErr, k.PodsErr); err != nil {
		return append(rows, failedRow("pre-bound pods "+pods, err, io.Discard))
	}
	return append(rows, []Row{
		{Metric: "pre-bound pods: pods/s from the first create to the last pod seen Running, DRAForge vs KWOK " + pods,
			Value:    fmt.Sprintf("%.0f pods/s (%s)", r.Pods.Rate(), sec(r.Pods.Running)),
			Baseline: fmt.Sprintf("KWOK %.0f pods/s (%s); KWOK's CI: %s within %s (%.0f/s)", k.Pods.Rate(), sec(k.Pods.Running), thousands(kwokCIPods), kwokCIPodsWithin, kwokCIPodRate),
			Ratio:    ratio(r.Pods.Rate(), k.Pods.Rate()), Target: "≥ 0.9× KWOK", OK: r.Pods.Rate() >= 0.9*k.Pods.Rate()},
		{Metric: "pre-bound pods: node agent requests and CPU per pod " + pods,
			Value: fmt.Sprintf("%.2f requests (%s), %.2f ms CPU", float64(r.Pods.Requests.Total())/float64(r.Pods.Pods), writesOnly(r.Pods.Requests),
				r.Pods.CPU.Seconds()*1000/float64(r.Pods.Pods)),
			Baseline: fmt.Sprintf("KWOK %.2f requests (%s), %.2f ms CPU", float64(k.Pods.Requests.Total())/float64(k.Pods.Pods), writesOnly(k.Pods.Requests),
				k.Pods.CPU.Seconds()*1000/float64(k.Pods.Pods)),
			Ratio: ratio(float64(r.Pods.Requests.Total()), float64(k.Pods.Requests.Total())), Target: "report", OK: true},
		{Metric: "pre-bound pods: deleted 32 at once, first delete to no pod left " + pods, Value: sec(r.Pods.Deleted),
			Baseline: fmt.Sprintf("KWOK %s; KWOK's CI: within %s", sec(k.Pods.Deleted), kwokCIDeleteWithin),
			Ratio:    ratio(r.Pods.Deleted.Seconds(), k.Pods.Deleted.Seconds()), Target: "report", OK: true},
	}...)
}
