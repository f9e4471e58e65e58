//go:build oracle

package oracle

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/test/cluster"
)

// defaultSeeds and defaultClaims size the random corpus (defaultClaims claims per seed);
// ORACLE_SEED (one seed) and ORACLE_CLAIMS override them (a mismatch report names the seed to
// rerun with).
var defaultSeeds = []uint64{20261203, 20261206}

const (
	defaultClaims = 300
	namespace     = "oracle"
)

var kube kubernetes.Interface

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "draforge-oracle-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// kube-scheduler v1.37.2 with its defaults (the 1.37 feature gates the simulator's allocator
	// also uses) is the oracle. No kube-controller-manager: nothing may evict or clean up.
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: filepath.Join(dir, "cluster"), Log: os.Stderr,
		Extra: []cluster.Component{cluster.Scheduler},
		Args:  map[cluster.Component][]string{cluster.Scheduler: {"--kube-api-qps=1000", "--kube-api-burst=2000"}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle: start control plane:", err)
		return 1
	}
	defer c.Stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	kube = kubernetes.NewForConfigOrDie(cfg)
	return m.Run()
}

func envInt(name string, def uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

// TestSchedulerAgrees decides every scenario claim and a seeded random corpus with the
// simulator and with kube-scheduler and requires the same set of feasible nodes per claim.
//
// How the scheduler's verdict per node is read: every (claim, node template) pair gets its own
// copy of the template's Node and ResourceSlices (its own pool) and its own copy of the claim,
// used by one pod whose required node affinity (matchFields metadata.name) names that node. The
// pod is scheduled (spec.nodeName set, or the claim allocated) exactly when the claim fits on
// that node; PodScheduled=False with reason Unschedulable means it does not. Pairs never share
// devices, so all of them are decided at once, in parallel, and the feasible set of a claim is
// the set of templates whose pod was scheduled. (FailedScheduling messages summarize per
// reason, not per node, so they cannot give the set.)
func TestSchedulerAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane with kube-scheduler")
	}
	ctx := t.Context()
	seeds, n := defaultSeeds, int(envInt("ORACLE_CLAIMS", defaultClaims))
	if s := envInt("ORACLE_SEED", 0); s != 0 {
		seeds = []uint64{s}
	}
	cases, skipped, err := ScenarioCases("../../examples/scenarios", "../../examples/simulated-nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skipped {
		t.Logf("scenario skipped: %s", s)
	}
	scenarios := len(cases)
	world := RandomWorld()
	for _, seed := range seeds {
		for _, c := range RandomClaims(seed, n) {
			cases = append(cases, Case{ID: fmt.Sprintf("%s seed=%d", c.Name, seed), World: world, Claim: c})
		}
	}
	sim := Simulate(ctx, cases, allocator.Options{})
	start := time.Now()
	sched, err := schedule(ctx, t, cases)
	if err != nil {
		t.Fatal(err)
	}
	pairs, fits, undecided := 0, 0, 0
	for i, c := range cases {
		for j, tpl := range c.World.Templates {
			pairs++
			switch {
			case sched[i][j].Undecided:
				// Neither agreement nor disagreement: counted apart, and a failure.
				if undecided++; undecided <= 10 {
					t.Errorf("UNDECIDED case=%s node=%s: kube-scheduler reported nothing within the deadline", c.ID, tpl.Node.Name)
				}
			case sched[i][j].Fits:
				fits++
			}
		}
	}
	mismatches := disagreements(cases, sim, sched, func(c Case, i int) {
		spec, _ := json.Marshal(c.Claim.Spec)
		var b strings.Builder
		fmt.Fprintf(&b, "MISMATCH case=%s (rerun with ORACLE_SEED)\n  claim: %s\n  %-14s | %-50s | %s\n", c.ID, spec, "node", "simulator", "kube-scheduler")
		for j, tpl := range c.World.Templates {
			fmt.Fprintf(&b, "  %-14s | %-5v %-44s | %-5v %s\n", tpl.Node.Name, sim[i][j].Fits, trunc(sim[i][j].Why, 44), sched[i][j].Fits, sched[i][j].Why)
		}
		t.Error(b.String())
	})
	t.Logf("seeds %v: %d scenario claims + %d random claims per seed, %d (claim, node) pairs, %d fit, %d undecided; kube-scheduler decided them in %s; %d claims disagree",
		seeds, scenarios, n, pairs, fits, undecided, time.Since(start).Round(time.Second), mismatches)
	// A corpus where nothing or everything fits would prove little.
	if fits == 0 || fits == pairs-undecided {
		t.Errorf("degenerate corpus: %d of %d decided pairs fit", fits, pairs-undecided)
	}

	// The same verdicts of kube-scheduler against the simulator broken on purpose: an oracle
	// that cannot tell those apart proves nothing about what they break.
	mutations := Mutations()
	for _, name := range slices.Sorted(maps.Keys(mutations)) {
		n := disagreements(cases, Simulate(ctx, cases, mutations[name]), sched, func(Case, int) {})
		t.Logf("mutation %q: %d claims disagree with kube-scheduler", name, n)
		if n == 0 {
			t.Errorf("mutation %q: the simulator broken on purpose agrees with kube-scheduler on every claim: the corpus does not exercise it", name)
		}
	}
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// schedule creates the objects for every pair, waits until kube-scheduler has decided every
// pod and returns its verdicts, indexed like Simulate's.
func schedule(ctx context.Context, t *testing.T, cases []Case) ([][]Verdict, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
		Labels: map[string]string{resourcev1.DRAAdminNamespaceLabelKey: "true"}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	// No kube-controller-manager creates it; pods need it to be admitted.
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	worlds := map[*World]bool{}
	for _, c := range cases {
		if worlds[c.World] {
			continue
		}
		worlds[c.World] = true
		for _, cl := range c.World.Classes {
			if _, err := kube.ResourceV1().DeviceClasses().Create(ctx, cl, metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("world %s: %w", c.World.Name, err)
			}
		}
		for _, r := range c.World.Rules {
			if _, err := kube.ResourceV1().DeviceTaintRules().Create(ctx, r, metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("world %s: %w", c.World.Name, err)
			}
		}
	}
	type pair struct{ i, j int }
	var pairs []pair
	for i, c := range cases {
		for j := range c.World.Templates {
			pairs = append(pairs, pair{i, j})
		}
	}
	name := func(p pair) string { return fmt.Sprintf("o-%04d-%d", p.i, p.j) }
	// Nodes and slices first, so the scheduler never sees a pod before its node's devices.
	if err := parallel(ctx, len(pairs), func(k int) error {
		p := pairs[k]
		return createNode(ctx, name(p), cases[p.i].World.Templates[p.j])
	}); err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	time.Sleep(2 * time.Second) // let the scheduler's informers catch up with the slices
	if err := parallel(ctx, len(pairs), func(k int) error {
		p := pairs[k]
		claim := cases[p.i].Claim.DeepCopy()
		claim.ObjectMeta = metav1.ObjectMeta{Name: name(p), Namespace: namespace, Labels: map[string]string{"oracle.draforge/case": strconv.Itoa(p.i)}}
		if _, err := kube.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("case %s: create claim: %w", cases[p.i].ID, err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name(p), Namespace: namespace},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "devices"}}}}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "devices", ResourceClaimName: ptr.To(name(p))}},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
						Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name(p)}}}}}}}},
			},
		}
		if _, err := kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("case %s: create pod: %w", cases[p.i].ID, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	out := make([][]Verdict, len(cases))
	for i, c := range cases {
		out[i] = make([]Verdict, len(c.World.Templates))
	}
	decided := map[string]Verdict{}
	// About 5,500 pairs took kube-scheduler 5 minutes on the 2-core machine with -race.
	deadline := time.Now().Add(10 * time.Minute)
	for len(decided) < len(pairs) {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
		pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		claims, err := kube.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		allocated := map[string]bool{}
		for _, c := range claims.Items {
			allocated[c.Name] = c.Status.Allocation != nil
		}
		for _, pod := range pods.Items {
			switch {
			case pod.Spec.NodeName != "" || allocated[pod.Name]:
				decided[pod.Name] = Verdict{Fits: true, Why: "scheduled"}
			default:
				for _, cond := range pod.Status.Conditions {
					if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason != "" {
						decided[pod.Name] = Verdict{Why: cond.Reason + ": " + cond.Message}
					}
				}
			}
		}
		t.Logf("kube-scheduler: %d of %d pods decided", len(decided), len(pairs))
	}
	for _, p := range pairs {
		v, ok := decided[name(p)]
		if !ok {
			v = Verdict{Undecided: true, Why: "UNDECIDED: the scheduler reported nothing within the deadline"}
		}
		out[p.i][p.j] = v
	}
	return out, nil
}

// createNode creates a Ready node named name with allocatable room for pods and the
// template's slices, renamed to the node and to a pool of their own.
func createNode(ctx context.Context, name string, tpl Template) error {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	labels := map[string]string{}
	for k, v := range tpl.Node.Labels {
		labels[k] = v
	}
	labels["kubernetes.io/hostname"] = name
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}}
	if n, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// The TaintNodesByCondition admission plugin taints new nodes not-ready; no node lifecycle
	// controller runs to lift it.
	if len(n.Spec.Taints) > 0 {
		n.Spec.Taints = nil
		if _, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if len(tpl.Allocated) > 0 {
		// An allocated claim, as a scheduler would have written it: its devices are taken.
		busy := BusyClaim(name, name, tpl.Allocated, func(pool string) string { return pool + "-" + name })
		status := busy.Status
		busy.ObjectMeta = metav1.ObjectMeta{Name: busy.Name, Namespace: namespace}
		created, err := kube.ResourceV1().ResourceClaims(namespace).Create(ctx, busy, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("busy claim: %w", err)
		}
		created.Status = status
		if _, err := kube.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("busy claim status: %w", err)
		}
	}
	for _, s := range tpl.Slices {
		s = s.DeepCopy()
		s.ObjectMeta = metav1.ObjectMeta{Name: name + "-" + s.Name}
		s.Spec.NodeName = ptr.To(name)
		s.Spec.Pool.Name = s.Spec.Pool.Name + "-" + name
		if _, err := kube.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("slice %s: %w", s.Name, err)
		}
	}
	return nil
}

// parallel runs fn for 0..n-1 on 32 workers and returns the first error.
func parallel(ctx context.Context, n int, fn func(int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for k := range next {
				if err := fn(k); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for k := range n {
		if ctx.Err() != nil {
			break
		}
		next <- k
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d errors, first: %w", len(errs), errs[0])
	}
	return nil
}
