package explain

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/inventory"
)

// KueueQueueLabel names the LocalQueue a Job is queued in (Kueue's kueue.x-k8s.io/queue-name).
const KueueQueueLabel = "kueue.x-k8s.io/queue-name"

// JobResult explains a Job: Kueue's verdict on it (when Kueue manages it) beside
// kube-scheduler's on each of its pods.
type JobResult struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Suspended bool   `json:"suspended"`
	Active    int32  `json:"active"`
	Succeeded int32  `json:"succeeded"`
	Failed    int32  `json:"failed"`
	// Kueue is the Job's Workload as Kueue sees it; nil when the Job names no queue.
	Kueue *KueueVerdict `json:"kueue,omitempty"`
	// Pods are the Job's pods, each explained as `explain pod/NAME` does.
	Pods []*PodResult `json:"pods"`
}

// KueueVerdict is what Kueue decided about a Job's Workload.
type KueueVerdict struct {
	Queue string `json:"queue"`
	// Installed is false when the cluster does not serve Kueue's Workloads.
	Installed bool   `json:"installed"`
	Workload  string `json:"workload,omitempty"`
	// ClusterQueue is the queue that reserved quota for it (status.admission), when admitted.
	ClusterQueue string `json:"clusterQueue,omitempty"`
	Admitted     bool   `json:"admitted"`
	// Conditions are the Workload's conditions (QuotaReserved, Admitted, Finished, ...), whose
	// messages say why it waits ("insufficient quota for ... in flavor ...").
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ExplainJob explains job with its pods from s and its Kueue Workload: workloads are the
// Workloads of its namespace (nil when Kueue is not installed, servesKueue false).
func ExplainJob(ctx context.Context, s *inventory.Snapshot, job *batchv1.Job, workloads []unstructured.Unstructured, servesKueue bool) (*JobResult, error) {
	r := &JobResult{Namespace: job.Namespace, Name: job.Name, Suspended: ptr.Deref(job.Spec.Suspend, false),
		Active: job.Status.Active, Succeeded: job.Status.Succeeded, Failed: job.Status.Failed, Pods: []*PodResult{}}
	if q := job.Labels[KueueQueueLabel]; q != "" {
		r.Kueue = kueueVerdict(q, job, workloads, servesKueue)
	}
	for _, p := range s.Pods {
		if p.Namespace != job.Namespace || !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == job.UID }) {
			continue
		}
		pr, err := ExplainPod(ctx, s, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		r.Pods = append(r.Pods, pr)
	}
	return r, nil
}

func kueueVerdict(queue string, job *batchv1.Job, workloads []unstructured.Unstructured, served bool) *KueueVerdict {
	v := &KueueVerdict{Queue: queue, Installed: served}
	for _, w := range workloads {
		if !slices.ContainsFunc(w.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.UID == job.UID }) {
			continue
		}
		v.Workload = w.GetName()
		v.ClusterQueue, _, _ = unstructured.NestedString(w.Object, "status", "admission", "clusterQueue")
		conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			str := func(k string) string { s, _ := m[k].(string); return s }
			cond := metav1.Condition{Type: str("type"), Status: metav1.ConditionStatus(str("status")), Reason: str("reason"), Message: str("message")}
			v.Conditions = append(v.Conditions, cond)
			if cond.Type == "Admitted" && cond.Status == metav1.ConditionTrue {
				v.Admitted = true
			}
		}
		break
	}
	return v
}

// RenderJob writes a JobResult as text: the Job, Kueue's verdict, then each pod.
func RenderJob(w io.Writer, r *JobResult, opts RenderOptions) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Job:       %s/%s\n", r.Namespace, r.Name)
	state := fmt.Sprintf("%d active, %d succeeded, %d failed", r.Active, r.Succeeded, r.Failed)
	if r.Suspended {
		state = "suspended, " + state
	}
	fmt.Fprintf(&b, "Status:    %s\n", state)
	if k := r.Kueue; k != nil {
		switch {
		case !k.Installed:
			fmt.Fprintf(&b, "Kueue:     queue %q named, but this cluster does not serve Kueue's Workloads (Kueue not installed)\n", k.Queue)
		case k.Workload == "":
			fmt.Fprintf(&b, "Kueue:     queue %q; no Workload yet (Kueue has not seen the Job)\n", k.Queue)
		case k.Admitted:
			fmt.Fprintf(&b, "Kueue:     admitted by ClusterQueue %q (queue %q, Workload %s)\n", k.ClusterQueue, k.Queue, k.Workload)
		default:
			fmt.Fprintf(&b, "Kueue:     not admitted (queue %q, Workload %s)\n", k.Queue, k.Workload)
		}
		for _, c := range k.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if len(r.Pods) == 0 {
		why := ""
		if r.Suspended {
			why = ": the Job is suspended"
			if r.Kueue != nil && !r.Kueue.Admitted {
				why += " until Kueue admits its Workload"
			}
		}
		fmt.Fprintf(&b, "Pods:      none%s\n", why)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, p := range r.Pods {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		if err := RenderPod(w, p, opts); err != nil {
			return err
		}
	}
	return nil
}
