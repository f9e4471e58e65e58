package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/test/cluster"
)

// The two node agents of the scale-nodes phase.
const (
	agentDRAForge = "DRAForge"
	agentKwok     = "KWOK"
)

// KWOK's CI bounds (sigs.k8s.io/kwok v0.8.0 test/e2e/benchmark.go CaseBenchmark): 5,000 nodes
// Ready within 60 s, then 10,000 pods bound to one node Running within 60 s, and deleted
// within 90 s; all created by kwokctl scale.
const (
	kwokCINodes, kwokCIPods                                 = 5000, 10000
	kwokCINodesWithin, kwokCIPodsWithin, kwokCIDeleteWithin = 60 * time.Second, 60 * time.Second, 90 * time.Second
)

// ScaleSide is one node agent (DRAForge's controller or KWOK) keeping sc.SimNodes nodes on the
// scale-nodes control plane, behind a counting proxy of its own.
type ScaleSide struct {
	Agent string
	// Ready and Held are the times from the first node create to every node seen Ready, and to
	// every node's Lease seen held, by the benchmark's watches.
	Ready, Held time.Duration
	// CreateWrites are the writes of whoever created the nodes (DRAForge: `draforge nodes`'s
	// apply of each node and of its status; KWOK: kwokctl scale's one create per node).
	CreateWrites int
	// Created are the agent's requests from the first create to every Lease held.
	Created Counts
	// Steady is the agent over the window, its Requests counted by its proxy.
	Steady          NodeWindow
	Requests        Counts
	ControlPlaneCPU map[cluster.Component]time.Duration
	// Memory is the agent's VmRSS (and, for DRAForge, its heap in use) after the window.
	Memory ProcMemory
	Pods   PreboundPods
	// PodsErr is why the pre-bound pods were not measured (the other rows stand).
	PodsErr error
}

// PreboundPods is what KWOK's CI measures after its nodes: pods created with spec.nodeName set
// to one node (no scheduler involved) until every one is seen Running, then deleted.
type PreboundPods struct {
	Pods int
	// Running is from the first create to the last pod seen Running; Deleted from the first
	// delete to no pod left.
	Running, Deleted time.Duration
	// Requests and CPU are the agent's from the first create until its requests other than
	// Lease renewals stop (as the workloads rows).
	Requests Counts
	CPU      time.Duration
}

// Rate is pods Running per second.
func (p PreboundPods) Rate() float64 { return float64(p.Pods) / p.Running.Seconds() }

// Alive is the time from the first create until every node was seen both Ready and with its
// Lease held.
func (s *ScaleSide) Alive() time.Duration { return max(s.Ready, s.Held) }

// CreateRate is nodes per second from the first create until every one was alive.
func (s *ScaleSide) CreateRate() float64 { return float64(s.Steady.Nodes) / s.Alive().Seconds() }

// scaleSide runs one agent through the scale-nodes measurements, on a control plane with
// kube-controller-manager running: the agent starts with no node, sc.SimNodes nodes are created
// (timed to Ready and Lease held), sc.SimSettle later its requests and CPU are counted over
// sc.Window, its memory read, sc.SimNodes pods bound to its first node taken to Running and
// deleted; then its nodes and Leases are deleted.
func (e *Env) scaleSide(ctx context.Context, sc ScaleConfig, agent string) (*ScaleSide, error) {
	n := sc.SimNodes
	prefix, label := "bench-sim", "bench.draforge/sim"
	if agent == agentKwok {
		prefix, label = "bench-kwok", "bench.draforge/kwok"
	}
	spec := simnode.Spec{Prefix: prefix, Count: n, Labels: map[string]string{label: "true"}}
	selector := label + "=true"
	if err := e.Cluster.StartComponent(ctx, cluster.ControllerManager); err != nil {
		return nil, err
	}
	defer func() { _ = e.Cluster.StopComponent(cluster.ControllerManager) }()
	defer func() {
		bg := context.Background()
		_ = e.Setup.CoreV1().Nodes().DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector})
		_ = e.Setup.CoordinationV1().Leases("kube-node-lease").DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
	}()
	proxy, err := NewCountingProxy(e.Cluster.Dir, e.Cluster.Server, e.Cluster.Dir)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	var (
		pid  int
		addr string
		logf string
	)
	if agent == agentKwok {
		bin, stages, err := cluster.Kwok(ctx, cluster.DefaultCacheDir(), e.Log)
		if err != nil {
			return nil, err
		}
		p, err := e.spawnKwok(bin, stages, proxy.Kubeconfig)
		if err != nil {
			return nil, err
		}
		defer func() { _ = e.Cluster.StopComponent("kwok") }()
		pid, logf = p.Pid, p.Log
	} else {
		ctl, err := e.StartControllerWith(ctx, proxy.Kubeconfig,
			"--kube-api-qps="+strconv.Itoa(sc.SimQPS), "--kube-api-burst="+strconv.Itoa(sc.SimBurst))
		if err != nil {
			return nil, err
		}
		defer ctl.Stop()
		pid, addr, logf = ctl.Pid, ctl.Addr, ctl.Log
	}
	s := &ScaleSide{Agent: agent, Steady: NodeWindow{Nodes: n}}

	// Creation: the agent runs, no node exists yet.
	w := e.watchNodes(ctx, selector, prefix+"-")
	before := proxy.Counts()
	start := time.Now()
	if agent == agentKwok {
		err = e.createKwokctlNodes(ctx, spec)
		s.CreateWrites = n
	} else {
		err = simnode.Apply(ctx, e.SetupDyn, spec, nil)
		s.CreateWrites = 2 * n
	}
	if err != nil {
		return nil, fmt.Errorf("create %d nodes: %w", n, err)
	}
	if err := poll(ctx, max(3*time.Minute, time.Duration(n)*60*time.Millisecond), func() (bool, error) {
		return w.ready.count() == n && w.held.count() == n, nil
	}); err != nil {
		return nil, fmt.Errorf("%d/%d nodes Ready, %d/%d Leases held: %w\n%s", w.ready.count(), n, w.held.count(), n, err, tail(logf, 20))
	}
	w.stop()
	s.Ready, s.Held = w.ready.latest().Sub(start), w.held.latest().Sub(start)
	s.Created = proxy.Counts().Sub(before)
	fmt.Fprintf(e.Log, "bench: %s: %d nodes Ready after %s, every Lease held after %s (%.0f nodes/s); agent requests %s\n",
		agent, n, s.Ready.Round(10*time.Millisecond), s.Held.Round(10*time.Millisecond), s.CreateRate(), s.Created)

	// Steady state.
	s.Steady.Settle = s.Held
	if err := sleep(ctx, sc.SimSettle); err != nil {
		return nil, err
	}
	before, cpuBefore, cpBefore := proxy.Counts(), procCPU(pid), e.controlPlaneCPU()
	start = time.Now()
	if err := sleep(ctx, sc.Window); err != nil {
		return nil, err
	}
	s.Requests, s.Steady.CPU, s.Steady.Window = proxy.Counts().Sub(before), procCPU(pid)-cpuBefore, time.Since(start)
	s.ControlPlaneCPU = cpuSince(cpBefore, e.controlPlaneCPU())
	if err := e.nodesAtEnd(ctx, &s.Steady, prefix+"-", selector); err != nil {
		return nil, err
	}
	fmt.Fprintf(e.Log, "bench: %s keeping %d nodes for %s: %s (%.2f writes per node per minute), %d not Ready, CPU %s, oldest Lease renewal %s ago\n",
		agent, n, s.Steady.Window.Round(time.Second), s.Requests, s.Steady.PerNodeMinute(float64(s.Requests.Writes())), s.Steady.NotReady,
		s.Steady.CPU.Round(10*time.Millisecond), s.Steady.OldestLease.Round(time.Second))

	// Memory, still keeping every node.
	if agent == agentKwok {
		s.Memory, err = settledRSS(ctx, pid)
	} else {
		s.Memory, err = settledMemory(ctx, pid, addr)
	}
	if err != nil {
		return nil, fmt.Errorf("%s memory: %w", agent, err)
	}

	// Pods bound to the first node, no scheduler.
	if s.Pods, err = e.preboundPods(ctx, proxy, pid, spec.NodeNames()[0], n); err != nil {
		s.PodsErr = err
		fmt.Fprintf(e.Log, "bench: %s pre-bound pods FAILED: %v\n%s\n", agent, err, tail(logf, 20))
	}
	return s, nil
}

// createKwokctlNodes creates the spec's nodes as `kwokctl scale node` does (kustomize/kwokctl/
// resource/node.yaml at KWOK v0.8.0): one create per node (kwokNode) with addresses, capacity
// and allocatable in its status, writeConcurrency at once, as `draforge nodes` applies its nodes.
func (e *Env) createKwokctlNodes(ctx context.Context, spec simnode.Spec) error {
	all := spec.Nodes(time.Now())
	return parallel(ctx, len(all), writeConcurrency, func(ctx context.Context, i int) error {
		_, err := e.Setup.CoreV1().Nodes().Create(ctx, kwokNode(all[i]), metav1.CreateOptions{})
		return err
	})
}

// preboundNS is the namespace of the pre-bound pods.
const preboundNS = "bench-prebound"

// PreboundPod is KWOK's CI pod (kwokctl's kustomize/kwokctl/resource/pod.yaml: one busybox
// container) bound to node by spec.nodeName.
func PreboundPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: preboundNS, Labels: map[string]string{"app": "fake-pod"}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "container-0", Image: "busybox"}},
		},
	}
}

// preboundPods creates n pods bound to node, 32 at once (as the workloads rows), waits until
// a watch saw every one Running, then deletes them the same way and waits until none is left
// (one deletecollection of 10,000 pods outlasts kube-apiserver's 60 s request timeout on 2
// cores; kwokctl scale pod --replicas 0 deletes them one by one too).
func (e *Env) preboundPods(ctx context.Context, proxy *CountingProxy, pid int, node string, n int) (PreboundPods, error) {
	if err := e.Namespace(ctx, preboundNS); err != nil {
		return PreboundPods{}, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := e.watchPods(wctx, preboundNS)
	before, cpuBefore := proxy.Counts(), procCPU(pid)
	start := time.Now()
	if err := parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		_, err := e.Setup.CoreV1().Pods(preboundNS).Create(ctx, PreboundPod(fmt.Sprintf("fake-pod-%05d", i), node), metav1.CreateOptions{})
		return err
	}); err != nil {
		return PreboundPods{}, err
	}
	var running int
	if err := poll(ctx, 10*time.Minute, func() (bool, error) {
		running = w.running.count()
		return running == n, nil
	}); err != nil {
		return PreboundPods{}, fmt.Errorf("%d/%d pods Running: %w", running, n, err)
	}
	last := w.running.latest()
	cancel()
	settle(ctx, proxy, 2*time.Second, 30*time.Second)
	p := PreboundPods{Pods: n, Running: last.Sub(start), Requests: proxy.Counts().Sub(before), CPU: procCPU(pid) - cpuBefore}
	start = time.Now()
	if err := parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		return e.Setup.CoreV1().Pods(preboundNS).Delete(ctx, fmt.Sprintf("fake-pod-%05d", i), metav1.DeleteOptions{})
	}); err != nil {
		return p, fmt.Errorf("delete pods: %w", err)
	}
	if err := poll(ctx, 10*time.Minute, func() (bool, error) {
		l, err := e.Setup.CoreV1().Pods(preboundNS).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	}); err != nil {
		return p, fmt.Errorf("pods not deleted: %w", err)
	}
	p.Deleted = time.Since(start)
	fmt.Fprintf(e.Log, "bench: %d pods bound to %s Running after %s (%.0f pods/s), deleted after %s; agent requests %s, CPU %s\n",
		n, node, p.Running.Round(10*time.Millisecond), p.Rate(), p.Deleted.Round(10*time.Millisecond), p.Requests, p.CPU.Round(10*time.Millisecond))
	return p, nil
}

// firstSeen records when each name was first seen in a state; its zero value is ready to use.
type firstSeen struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (f *firstSeen) mark(name string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]time.Time{}
	}
	if _, ok := f.seen[name]; !ok {
		f.seen[name] = at
	}
}

func (f *firstSeen) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

func (f *firstSeen) latest() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var last time.Time
	for _, t := range f.seen {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// nodeWatch records when each node matching a label selector was first seen Ready, and when
// each Lease named prefix* was first seen held.
type nodeWatch struct {
	ready, held firstSeen
	stop        context.CancelFunc
}

// watchNodes starts informers on the nodes matching selector and on kube-node-lease, synced
// before it returns (the watches exist before the first create).
func (e *Env) watchNodes(ctx context.Context, selector, prefix string) *nodeWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &nodeWatch{stop: cancel}
	nodes := informers.NewSharedInformerFactoryWithOptions(e.Setup, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	leases := informers.NewSharedInformerFactoryWithOptions(e.Setup, 0, informers.WithNamespace("kube-node-lease"))
	onNode := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && notReady([]corev1.Node{*n}) == 0 {
			w.ready.mark(n.Name, time.Now())
		}
	}
	onLease := func(obj any) {
		l, ok := obj.(*coordinationv1.Lease)
		if ok && l.Spec.HolderIdentity != nil && countHeld([]coordinationv1.Lease{*l}, prefix) == 1 {
			w.held.mark(l.Name, time.Now())
		}
	}
	_, _ = nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onNode, UpdateFunc: func(_, o any) { onNode(o) }})
	_, _ = leases.Coordination().V1().Leases().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onLease, UpdateFunc: func(_, o any) { onLease(o) }})
	nodes.Start(ctx.Done())
	leases.Start(ctx.Done())
	nodes.WaitForCacheSync(ctx.Done())
	leases.WaitForCacheSync(ctx.Done())
	return w
}

// settledRSS waits MemorySettle and reads the process's VmRSS (a process without the
// controller's metrics: KWOK).
func settledRSS(ctx context.Context, pid int) (ProcMemory, error) {
	if err := sleep(ctx, MemorySettle); err != nil {
		return ProcMemory{}, err
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return ProcMemory{}, err
	}
	rss, err := ParseVmRSS(string(b))
	if err != nil {
		return ProcMemory{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return ProcMemory{RSS: rss}, nil
}

// thousands formats n with a comma between thousands, as the docs write counts.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
