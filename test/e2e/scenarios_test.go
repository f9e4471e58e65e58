package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// outcomeLine is "# outcome: <claim> allocated <node>[|<node>...] [device]" or
// "# outcome: <claim> pending".
var outcomeLine = regexp.MustCompile(`(?m)^# outcome: (\S+) (allocated|pending)(?: (\S+))?(?: (\S+))?$`)

// workloadLine is a workload's outcome, checked in file order after the scenario's other
// documents (claims aside) are applied and before its claims are:
//
//	# outcome: pod <name> running [<node>]   Running and Ready (on that node)
//	# outcome: pod <name> pending            unscheduled, PodScheduled=False with a reason
//	# outcome: pod <name> evicted            removed (e.g. by the device-taint eviction)
//	# outcome: job <name> complete           Complete, and its pods' claims freed
//	# outcome: job <name> queued             suspended by Kueue, its Workload without quota and told why
//	# outcome: job <a>|<b>|... concurrent <n>  those Jobs ran n at a time, never more (a queue held the rest)
//	# outcome: deployment <name> running <n> pending <m>
//	# outcome: podgroup <name> running <n>   its n pods Running, its claims reserved for it
//	# outcome: podgroup <name> pending <n>   none of its n pods placed, each told why
//	# outcome: podgroup <name> ends          its pods and it deleted: its claims go too
//	# outcome: computedomain <name> running <n>  Ready, n nodes listed Ready, each (clique, index) once
var workloadLine = regexp.MustCompile(`(?m)^# outcome: (pod|job|deployment|podgroup|computedomain) (\S+) (running|pending|evicted|complete|queued|concurrent|ends)(?: (\S+))?(?: pending (\d+))?$`)

// TestScenarios applies every example scenario to the real API server with a running
// controller and asserts each claim's documented outcome. Claims are applied one at a time in
// file order, as the outcomes assume.
func TestScenarios(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	ctrl := startController(t)
	files := scenarioFiles(t, "default")
	if len(files) < 7 {
		t.Fatalf("want at least 7 scenarios, found %d", len(files))
	}
	runScenarios(t, e, ctrl, files)
}

// profileLine names the control plane profile a scenario needs ("# profile: dra-all"); a
// scenario without one runs on the default profile.
var profileLine = regexp.MustCompile(`(?m)^# profile: (\S+)$`)

// scenarioFiles returns the example scenarios that need the control plane profile.
func scenarioFiles(t *testing.T, profile string) []string {
	t.Helper()
	files, _ := filepath.Glob("../../examples/scenarios/*.yaml")
	var out []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := "default"
		if m := profileLine.FindSubmatch(src); m != nil {
			want = string(m[1])
		}
		if want == profile {
			out = append(out, f)
		}
	}
	return out
}

// runScenarios applies each scenario file in turn and checks its outcomes.
func runScenarios(t *testing.T, e *env, ctrl *controller, files []string) {
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			terminalBefore := ctrl.Metric(t, "draforge_controller_terminal_errors_total")
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			outcomes := outcomeLine.FindAllStringSubmatch(string(src), -1)
			if len(outcomes) == 0 && !workloadLine.MatchString(string(src)) {
				t.Fatalf("%s documents no outcome", f)
			}
			docs := decodeDocs(t, src)
			var claims []*unstructured.Unstructured
			for _, u := range docs {
				if u.GetKind() == "ResourceClaim" {
					claims = append(claims, u)
					continue
				}
				e.Apply(t, "", u)
				if u.GetKind() == "SimulatedDevicePool" {
					e.WaitPoolReady(t, u.GetNamespace(), u.GetName())
				}
			}
			t.Cleanup(func() { e.DeleteDocs(t, docs) })
			for _, w := range workloadLine.FindAllStringSubmatch(string(src), -1) {
				e.checkWorkload(t, namespaceOf(docs), w[1], w[2], w[3], w[4], w[5])
			}
			for _, c := range claims {
				e.Apply(t, "", c)
				want := outcomeFor(outcomes, c.GetName())
				if want == nil {
					t.Fatalf("claim %s has no outcome line", c.GetName())
				}
				e.checkOutcome(t, c.GetNamespace(), c.GetName(), want[2], want[3], want[4])
			}
			if n := ctrl.Metric(t, "draforge_controller_terminal_errors_total"); n != terminalBefore {
				t.Errorf("terminal errors: %v during this scenario; the controller's errors so far:\n%s", n-terminalBefore, ctrl.ErrorLines())
			}
		})
	}
}

func outcomeFor(outcomes [][]string, claim string) []string {
	for _, o := range outcomes {
		if o[1] == claim {
			return o
		}
	}
	return nil
}

// checkOutcome waits for an allocation on node (and device, when given), or for a claim to
// stay unallocated while the controller has had time to try it.
func (e *env) checkOutcome(t *testing.T, ns, name, kind, node, device string) {
	t.Helper()
	if kind == "pending" {
		time.Sleep(2 * time.Second)
		c, err := e.Kube.ResourceV1().ResourceClaims(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation != nil {
			t.Errorf("claim %s/%s: want pending, got %s", ns, name, describeAllocation(c))
		}
		return
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		c, err := e.Kube.ResourceV1().ResourceClaims(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := describeAllocation(c)
		f := strings.Fields(got)
		if len(f) < 2 || f[0] != "allocated" || !slices.Contains(strings.Split(node, "|"), f[1]) {
			return false, fmt.Sprintf("claim %s/%s: want allocated %s, got %s", ns, name, node, got)
		}
		if device != "" {
			return slices.Contains(f[2:], device), got
		}
		return true, ""
	})
}

// describeAllocation renders "allocated <node> <device>..." or "pending".
func describeAllocation(c *resourcev1.ResourceClaim) string {
	a := c.Status.Allocation
	if a == nil {
		return "pending"
	}
	node := "?"
	if ns := a.NodeSelector; ns != nil && len(ns.NodeSelectorTerms) > 0 {
		for _, f := range ns.NodeSelectorTerms[0].MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				node = f.Values[0]
			}
		}
	}
	var devs []string
	for _, r := range a.Devices.Results {
		devs = append(devs, r.Device)
	}
	return "allocated " + node + " " + strings.Join(devs, " ")
}

// namespaceOf is the namespace of the scenario's namespaced documents (the first one's).
func namespaceOf(docs []*unstructured.Unstructured) string {
	for _, u := range docs {
		if u.GetNamespace() != "" {
			return u.GetNamespace()
		}
	}
	return ""
}

// checkWorkload waits for a workload outcome (see workloadLine).
func (e *env) checkWorkload(t *testing.T, ns, kind, name, state, arg, pending string) {
	t.Helper()
	ctx := t.Context()
	switch kind + " " + state {
	case "pod running":
		eventually(t, 60*time.Second, func() (bool, string) {
			p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ok, why := podRunning(p)
			return ok && (arg == "" || p.Spec.NodeName == arg), fmt.Sprintf("%s (want node %q)", why, arg)
		})
	case "pod pending":
		eventually(t, 60*time.Second, func() (bool, string) {
			p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return unschedulable(p), fmt.Sprintf("pod %s: node %q conditions %+v", name, p.Spec.NodeName, p.Status.Conditions)
		})
	case "pod evicted":
		eventually(t, 60*time.Second, func() (bool, string) {
			p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			if err != nil {
				return false, err.Error()
			}
			return false, fmt.Sprintf("pod %s not evicted: phase %s conditions %+v", name, p.Status.Phase, p.Status.Conditions)
		})
	case "job complete":
		eventually(t, 90*time.Second, func() (bool, string) {
			j, err := e.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
				return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
			}) {
				return false, fmt.Sprintf("job %s status %+v", name, j.Status)
			}
			// The devices are freed: no claim of a job pod is allocated any more.
			claims, err := e.Kube.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range claims.Items {
				if c.Status.Allocation != nil && slices.ContainsFunc(c.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "Pod" }) {
					return false, fmt.Sprintf("claim %s of a job pod still allocated (reservedFor %v)", c.Name, c.Status.ReservedFor)
				}
			}
			return true, ""
		})
	case "job queued":
		e.checkQueued(t, ns, name)
	case "job concurrent":
		e.checkConcurrent(t, ns, strings.Split(name, "|"), arg)
	case "deployment running":
		eventually(t, 60*time.Second, func() (bool, string) {
			d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			sel := metav1.FormatLabelSelector(d.Spec.Selector)
			pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return false, err.Error()
			}
			running, waiting := 0, 0
			for i := range pods.Items {
				if ok, _ := podRunning(&pods.Items[i]); ok {
					running++
				} else if unschedulable(&pods.Items[i]) {
					waiting++
				}
			}
			got := fmt.Sprintf("%d running, %d pending", running, waiting)
			return got == fmt.Sprintf("%s running, %s pending", arg, pending), "deployment " + name + ": " + got
		})
	case "podgroup running", "podgroup pending", "podgroup ends":
		e.checkPodGroup(t, ns, name, state, arg)
	case "computedomain running":
		e.checkComputeDomainRunning(t, ns, name, arg)
	default:
		t.Fatalf("unknown outcome %s %s %s", kind, name, state)
	}
}

// unschedulable: the scheduler left the pod unbound and said why.
func unschedulable(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != ""
	})
}
