package snapshot

import (
	"bytes"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/trace"
)

var now = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func at(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }

func tpl(ns, name string, reqs ...resourcev1.DeviceRequest) resourcev1.ResourceClaimTemplate {
	return resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}}}
}

func exactly(name, class string, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count}}
}

func job(ns, name string, parallelism int32, tmpl string, mod func(*batchv1.Job)) batchv1.Job {
	j := batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: *at(time.Hour)},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "d", ResourceClaimTemplateName: ptr.To(tmpl)}}}}},
	}
	if mod != nil {
		mod(&j)
	}
	return j
}

func pod(ns, name string, owner *metav1.OwnerReference, started *metav1.Time, mod func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: *at(time.Hour)},
		Status: corev1.PodStatus{Phase: corev1.PodPending, StartTime: started}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if started != nil {
		p.Status.Phase = corev1.PodRunning
	}
	if mod != nil {
		mod(&p)
	}
	return p
}

func ownedBy(kind, name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}
}

func withClaims(refs ...corev1.PodResourceClaim) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.ResourceClaims = refs }
}

func inFlightWorkloads() Workloads {
	runFor10m := func(j *batchv1.Job) {
		j.Labels = map[string]string{trace.LabelQueue: "team-a"}
		j.Spec.Template.Annotations = map[string]string{trace.AnnotationRunFor: "10m"}
		j.Spec.Template.Spec.PriorityClassName = "high"
	}
	queued := func(j *batchv1.Job) {
		j.Spec.Suspend, j.Spec.Completions, j.Spec.ActiveDeadlineSeconds = ptr.To(true), ptr.To[int32](2), ptr.To[int64](3600)
		j.Spec.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("queued")}
		j.CreationTimestamp = *at(time.Minute)
	}
	done := func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	}
	trainPod := func(p *corev1.Pod) { p.Annotations = map[string]string{trace.AnnotationRunFor: "10m"} }
	rsClaims := withClaims(corev1.PodResourceClaim{Name: "d", ResourceClaimTemplateName: ptr.To("one")})
	return Workloads{
		Now: now,
		Templates: []resourcev1.ResourceClaimTemplate{
			tpl("ml", "eight", exactly("gpus", "gpu.nvidia.com", 8)),
			tpl("ml", "one", exactly("gpu", "gpu.nvidia.com", 0)),
			tpl("ml", "mixed", exactly("gpu", "gpu.nvidia.com", 1), exactly("nic", "nic.example.com", 1)),
			tpl("ml", "all", resourcev1.DeviceRequest{Name: "every", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeAll}}),
			tpl("ml", "choice", resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
				{Name: "big", DeviceClassName: "gpu.nvidia.com", Count: 2}, {Name: "small", DeviceClassName: "mig.nvidia.com", Count: 1}}}),
		},
		Claims: []resourcev1.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "nb-gpu"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactly("gpu", "gpu.nvidia.com", 1)}}}},
			// picked-0's claim: kube-scheduler chose the second subrequest.
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "picked-0-d"}, Status: resourcev1.ResourceClaimStatus{
				Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
					{Request: "gpu/small", Driver: "gpu.nvidia.com", Pool: "p", Device: "mig-0"}}}}}}},
		Jobs: []batchv1.Job{
			job("ml", "train", 2, "eight", runFor10m),
			job("ml", "queued", 3, "choice", queued),
			job("ml", "mixed", 1, "mixed", nil),
			job("ml", "all", 1, "all", nil),
			job("ml", "done", 1, "eight", done),
			job("ml", "picked", 1, "choice", nil),
		},
		Pods: []corev1.Pod{
			pod("ml", "train-1", ownedBy("Job", "train"), at(4*time.Minute), trainPod),
			pod("ml", "train-0", ownedBy("Job", "train"), at(4*time.Minute), trainPod),
			pod("ml", "done-0", ownedBy("Job", "done"), nil, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			pod("ml", "picked-0", ownedBy("Job", "picked"), at(30*time.Minute), func(p *corev1.Pod) {
				p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "d", ResourceClaimName: ptr.To("picked-0-d")}}
			}),
			pod("ml", "infer-7d9-a", ownedBy("ReplicaSet", "infer-7d9"), at(2*time.Hour), rsClaims),
			pod("ml", "infer-7d9-b", ownedBy("ReplicaSet", "infer-7d9"), at(time.Hour), rsClaims),
			pod("dev", "notebook.user-1", nil, nil, withClaims(corev1.PodResourceClaim{Name: "g", ResourceClaimName: ptr.To("nb-gpu")})),
			pod("dev", "no-devices", nil, at(time.Minute), nil),
			pod("dev", "deleting", nil, at(time.Minute), func(p *corev1.Pod) {
				p.DeletionTimestamp = at(0)
				withClaims(corev1.PodResourceClaim{Name: "g", ResourceClaimName: ptr.To("nb-gpu")})(p)
			}),
			pod("dev", "alloc", nil, nil, func(p *corev1.Pod) {
				p.Labels = map[string]string{allocationpod.Label: "c"}
				withClaims(corev1.PodResourceClaim{Name: "g", ResourceClaimName: ptr.To("nb-gpu")})(p)
			}),
		},
	}
}

func decodeTrace(t *testing.T, doc Document) *trace.Trace {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, "in flight", []Document{doc}); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Decode("trace.yaml", b.Bytes())
	if err != nil {
		t.Fatalf("not a valid trace: %v\n%s", err, b.String())
	}
	return tr
}

// TestTraceOfTheWorkloadsInFlight: every unfinished Job and every other group of pods with
// claims is one trace job (pods × devices of one class, what is left of its run, its queue,
// gang and priority), running ones first by start, then pending ones by creation; what the
// format cannot express is left out with the reason; the document is a valid trace.
func TestTraceOfTheWorkloadsInFlight(t *testing.T) {
	doc, sum, err := Trace(testCluster(), inFlightWorkloads(), Options{}, TraceOptions{Duration: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tr := decodeTrace(t, doc)
	var got []string
	for _, j := range tr.Jobs {
		got = append(got, strings.Join([]string{j.Arrival.String(), j.Key(), j.Duration.String(), j.DeviceClass,
			strings.Repeat("p", j.Pods) + "×" + strings.Repeat("d", j.Devices), j.Queue, j.PriorityClassName, map[bool]string{true: "gang"}[j.Gang]}, " "))
	}
	want := []string{
		// infer-7d9 started 2 h ago, picked 30 min ago (the choice kube-scheduler allocated),
		// train 4 min ago; all run on.
		"0s ml/infer-7d9 2h0m0s gpu.nvidia.com pp×d   ",
		"1ms ml/picked 2h0m0s mig.nvidia.com p×d   ",
		"2ms ml/train 6m0s gpu.nvidia.com pp×dddddddd team-a high ",
		// Pending: queued (its first choice: 2 GPUs; min(parallelism 3, completions 2) pods;
		// its deadline) was created after the notebook.
		"3ms dev/notebook-user-1-" + traceJobName("notebook.user-1")[len("notebook-user-1-"):] + " 2h0m0s gpu.nvidia.com p×d   ",
		"4ms ml/queued 1h0m0s gpu.nvidia.com pp×dd   gang",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("jobs:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if sum.Jobs != 5 || sum.Pods != 8 || sum.Devices != 2+1+16+1+4 {
		t.Errorf("summary %+v", sum)
	}
	wantOut := []string{"ml/all: request every asks for all matching devices",
		"ml/mixed: devices of several classes (gpu.nvidia.com, nic.example.com; a trace job has one)"}
	if strings.Join(sum.LeftOut, "\n") != strings.Join(wantOut, "\n") {
		t.Errorf("left out:\n%s\nwant\n%s", strings.Join(sum.LeftOut, "\n"), strings.Join(wantOut, "\n"))
	}
}

// TestTraceAnonymized: namespaces are renamed as the scenario documents rename them, jobs and
// queues are numbered; nothing of the original names is left.
func TestTraceAnonymized(t *testing.T) {
	c := testCluster()
	c.Namespaces = append(c.Namespaces, "ml", "dev")
	doc, _, err := Trace(c, inFlightWorkloads(), Options{Anonymize: true}, TraceOptions{Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tr := decodeTrace(t, doc)
	r := newRenamer(c, true)
	var keys []string
	for _, j := range tr.Jobs {
		keys = append(keys, j.Key()+" "+j.Queue)
	}
	ml, dev := rename(r.spaces, "ml"), rename(r.spaces, "dev")
	want := []string{ml + "/job-0 ", ml + "/job-1 ", ml + "/job-2 queue-0", dev + "/job-3 ", ml + "/job-4 "}
	if strings.Join(keys, ",") != strings.Join(want, ",") || ml == "ml" {
		t.Errorf("jobs %v, want %v", keys, want)
	}
}

// TestTraceOfNothing: a cluster without workloads holding devices has no trace.
func TestTraceOfNothing(t *testing.T) {
	if _, _, err := Trace(testCluster(), Workloads{Now: now}, Options{}, TraceOptions{Duration: time.Hour}); err == nil ||
		!strings.Contains(err.Error(), "no workload in flight") {
		t.Errorf("err %v", err)
	}
}
