package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/replay"
)

// TestScenariosKueue runs the example scenarios that need the kueue profile on a control plane
// of their own with Kueue (built from its module, its CRDs and webhooks as released), the real
// kube-scheduler and kube-controller-manager, and a controller.
func TestScenariosKueue(t *testing.T) {
	e := runProfileScenarios(t, "kueue", nil)
	// A trace of two teams' queues, replayed through Kueue: b-train (4 GPUs) arrives while
	// a-train holds 4 of the ClusterQueue's 6; Kueue holds it, with 8 GPUs free, until a-train
	// ends at 60s.
	r := replayOn(t, e, "examples/traces/queues.yaml", "examples/traces/queues-cluster.yaml")
	s := replay.Summarize(r)
	b := r.Jobs[1]
	wait, _ := b.Wait()
	if s.Finished != 5 || s.ByQueue["team-a"].N != 3 || s.ByQueue["team-b"].N != 2 || b.Name != "b-train" ||
		wait < 40*time.Second || b.Admitted == nil || *b.Admitted-b.Arrival < 40*time.Second || !strings.Contains(b.Reason, "queue's admission") {
		t.Errorf("queues replayed: b-train %+v (waited %s), summary %+v", b, wait, s)
	}
}

var workloads = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

// checkQueued waits until a Job is held by Kueue: suspended, and its Workload refused quota
// (QuotaReserved=False) with Kueue's message; then checks that it stays so (no admission a
// moment later).
func (e *env) checkQueued(t *testing.T, ns, name string) {
	t.Helper()
	ctx := t.Context()
	queued := func() (bool, string) {
		j, err := e.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !ptr.Deref(j.Spec.Suspend, false) {
			return false, fmt.Sprintf("job %s not suspended (active %d)", name, j.Status.Active)
		}
		list, err := e.Dynamic.Resource(workloads).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, w := range list.Items {
			if !slices.ContainsFunc(w.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.Kind == "Job" && o.UID == j.UID }) {
				continue
			}
			conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
			for _, c := range conds {
				c, _ := c.(map[string]any)
				if c["type"] == "QuotaReserved" && c["status"] == "False" && c["message"] != "" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("job %s: workload %s conditions %v", name, w.GetName(), conds)
		}
		return false, fmt.Sprintf("job %s: no Workload yet", name)
	}
	eventually(t, 60*time.Second, queued)
	time.Sleep(3 * time.Second)
	if ok, why := queued(); !ok {
		t.Errorf("job %s admitted after it was queued: %s", name, why)
	}
	// draforge explain shows Kueue's verdict, its own words from the Workload.
	cmd := exec.CommandContext(ctx, draforgeBinary(t), "--kubeconfig", e.Kubeconfig, "explain", "-n", ns, "job/"+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("draforge explain job/%s: %v\n%s", name, err, out)
	}
	t.Logf("draforge explain job/%s:\n%s", name, out)
	for _, want := range []string{"Status:    suspended", "Kueue:     not admitted", "QuotaReserved=False", "insufficient quota", "Pods:      none: the Job is suspended until Kueue admits its Workload"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("draforge explain job/%s lacks %q:\n%s", name, want, out)
		}
	}
}

// checkConcurrent checks that the Jobs, all complete, ran at most n at a time and at some time
// n at once. A Job runs from its startTime (the Job controller sets it when a suspended Job
// resumes) to its pods' last finish: Kueue frees a Job's quota as its pods succeed
// (reclaimable pods), before the Job controller records the Job's completion, so pods are the
// clock. Both times are whole seconds; a start in the second another Job's pod finished does
// not overlap it.
func (e *env) checkConcurrent(t *testing.T, ns string, jobs []string, count string) {
	t.Helper()
	ctx := t.Context()
	n, err := strconv.Atoi(count)
	if err != nil {
		t.Fatalf("job %v concurrent %q: not a count", jobs, count)
	}
	type span struct {
		name       string
		start, end time.Time
	}
	var spans []span
	for _, name := range jobs {
		j, err := e.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.StartTime == nil {
			t.Fatalf("job %s never started", name)
		}
		s := span{name: name, start: j.Status.StartTime.Time}
		pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if term := cs.State.Terminated; term != nil && term.FinishedAt.After(s.end) {
					s.end = term.FinishedAt.Truncate(time.Second)
				}
			}
		}
		if s.end.IsZero() {
			t.Fatalf("job %s: no pod finished", name)
		}
		spans = append(spans, s)
	}
	most := 0
	for _, at := range spans {
		running := 0
		for _, s := range spans {
			if !at.start.Before(s.start) && at.start.Before(s.end) {
				running++
			}
		}
		most = max(most, running)
	}
	if most != n {
		t.Errorf("jobs %v ran up to %d at once, want %d: %+v", jobs, most, n, spans)
	}
}
