package explain

import (
	"bytes"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	it "github.com/draforge/draforge/drivers/inventory/inventorytest"
)

func queuedJob() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "too-big", UID: "uid-job",
		Labels: map[string]string{KueueQueueLabel: "team-a"}}, Spec: batchv1.JobSpec{Suspend: ptr.To(true)}}
}

// workload is a Workload owned by the Job with uid, with the given conditions.
func workload(name string, uid types.UID, admittedBy string, conds ...map[string]any) unstructured.Unstructured {
	w := unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}}
	w.SetName(name)
	w.SetNamespace("demo")
	w.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: uid}})
	var cs []any
	for _, c := range conds {
		cs = append(cs, c)
	}
	_ = unstructured.SetNestedSlice(w.Object, cs, "status", "conditions")
	if admittedBy != "" {
		_ = unstructured.SetNestedField(w.Object, admittedBy, "status", "admission", "clusterQueue")
	}
	return w
}

// A Job Kueue holds for lack of quota shows Kueue's reason from its own Workload, not
// another Job's, and says why it has no pods.
func TestJobQueuedByKueue(t *testing.T) {
	msg := "couldn't assign flavors to pod set main: insufficient quota for draforge.oaslananka/gpu in flavor gpu, request > maximum capacity (3 > 2)"
	other := workload("job-other", "uid-other", "gpus", map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted"})
	mine := workload("job-too-big", "uid-job", "", map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": msg})
	r, err := ExplainJob(t.Context(), it.Healthy(), queuedJob(), []unstructured.Unstructured{other, mine}, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kueue == nil || r.Kueue.Workload != "job-too-big" || r.Kueue.Admitted || r.Kueue.ClusterQueue != "" {
		t.Fatalf("kueue verdict %+v", r.Kueue)
	}
	var b bytes.Buffer
	if err := RenderJob(&b, r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Status:    suspended, 0 active, 0 succeeded, 0 failed",
		`Kueue:     not admitted (queue "team-a", Workload job-too-big)`,
		"  QuotaReserved=False Pending: " + msg,
		"Pods:      none: the Job is suspended until Kueue admits its Workload",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

// An admitted Job names the ClusterQueue and explains each of its pods as pod/NAME does.
func TestJobAdmittedWithPods(t *testing.T) {
	s := it.Healthy()
	job := queuedJob()
	job.Spec.Suspend = ptr.To(false)
	job.Status.Active = 1
	pod := templatePod("demo", "too-big-x1", "gpu", "")
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: job.Name, UID: job.UID}}
	unschedulable(pod, "0/3 nodes are available: 3 cannot allocate all claims")
	stranger := templatePod("demo", "stranger", "gpu", "")
	s.Pods = append(s.Pods, pod, stranger)
	w := workload("job-too-big", "uid-job", "gpus", map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"})
	r, err := ExplainJob(t.Context(), s, job, []unstructured.Unstructured{w}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Kueue.Admitted || r.Kueue.ClusterQueue != "gpus" || len(r.Pods) != 1 || r.Pods[0].Name != "too-big-x1" {
		t.Fatalf("result %+v kueue %+v", r, r.Kueue)
	}
	var b bytes.Buffer
	if err := RenderJob(&b, r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`Kueue:     admitted by ClusterQueue "gpus"`, "Pod:       demo/too-big-x1", "0/3 nodes are available"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

// A Job naming a queue on a cluster without Kueue says so instead of waiting silently.
func TestJobQueueWithoutKueue(t *testing.T) {
	r, err := ExplainJob(t.Context(), it.Healthy(), queuedJob(), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := RenderJob(&b, r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "does not serve Kueue's Workloads (Kueue not installed)") {
		t.Errorf("got\n%s", b.String())
	}
}
