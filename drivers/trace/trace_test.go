package trace

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestDecodeSmallTrace(t *testing.T) {
	src, err := os.ReadFile("../../examples/traces/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Decode("small.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Name != "small" || len(tr.Jobs) != 14 || tr.Span() != 100*time.Second {
		t.Fatalf("trace %s: %d jobs over %s", tr.Name, len(tr.Jobs), tr.Span())
	}
	j := tr.Jobs[1] // eval-a: the defaults filled in
	if j.Name != "eval-a" || j.Namespace != "draforge-replay" || j.Pods != 1 || j.Devices != 1 || j.DeviceClass != "draforge-replay-gpu" || j.Arrival != 5*time.Second {
		t.Errorf("eval-a decoded as %+v", j)
	}
	if got := tr.Namespaces(); len(got) != 1 || got[0] != "draforge-replay" {
		t.Errorf("namespaces %v", got)
	}
}

// Every problem of a trace is reported at its file:line:col.
func TestDecodeReportsEveryProblemWithItsPosition(t *testing.T) {
	src := `apiVersion: draforge.oaslananka/v1alpha1
kind: WorkloadTrace
metadata: {name: bad}
spec:
  jobs:
    - {name: a, arrival: 0s, duration: 0s}
    - {name: b, arrival: -5s, duration: 1m, pods: 0}
    - {name: c, arrival: 1m, duration: 1m, devices: 2}
`
	_, err := Decode("bad.yaml", []byte(src))
	if err == nil {
		t.Fatal("a bad trace decoded")
	}
	msg := err.Error()
	for _, want := range []string{
		"bad.yaml:6:40: spec.jobs.0.duration",
		"bad.yaml:7:26: spec.jobs.1.arrival",
		"bad.yaml:7:51: spec.jobs.1.pods",
		"spec.jobs.0.deviceClass: field is required", // no class for the job, none for the trace
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestObjectsFor(t *testing.T) {
	j := Job{Name: "train", Namespace: "ml", Arrival: time.Minute, Duration: 10 * time.Minute, Pods: 4, Devices: 8, DeviceClass: "gpu", Gang: true, Queue: "team-a"}
	o := ObjectsFor(j, "run-1", 60)
	if o.Template == nil || o.Template.Spec.Spec.Devices.Requests[0].Exactly.Count != 8 || o.Template.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName != "gpu" {
		t.Errorf("template %+v", o.Template)
	}
	if o.Template.Spec.ObjectMeta.Labels[LabelRun] != "run-1" {
		t.Errorf("the claims made from the template are not labelled with the run: %v", o.Template.Spec.ObjectMeta.Labels)
	}
	if o.PodGroup == nil || o.PodGroup.Spec.SchedulingPolicy.Gang.MinCount != 4 {
		t.Errorf("pod group %+v", o.PodGroup)
	}
	js := o.Job.Spec
	if *js.Parallelism != 4 || *js.Completions != 4 || o.Job.Labels["kueue.x-k8s.io/queue-name"] != "team-a" || js.Template.Labels[LabelJob] != "train" {
		t.Errorf("job %+v", o.Job)
	}
	// The replay sets run-for on each pod once it runs (RunFor), not in the template.
	if got, ok := js.Template.Annotations[AnnotationRunFor]; ok {
		t.Errorf("template run-for %s", got)
	}
	if *js.Template.Spec.SchedulingGroup.PodGroupName != "train" || js.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName == nil {
		t.Errorf("pod spec %+v", js.Template.Spec)
	}
	if o := ObjectsFor(Job{Name: "cpu", Namespace: "ml", Duration: time.Second, Pods: 1}, "r", 1); o.Template != nil || len(o.Job.Spec.Template.Spec.ResourceClaims) != 0 || o.PodGroup != nil {
		t.Errorf("a job without devices got %+v", o)
	}
}

func TestCompress(t *testing.T) {
	for _, c := range []struct {
		d     time.Duration
		speed float64
		want  time.Duration
	}{{time.Hour, 60, time.Minute}, {time.Second, 1, time.Second}, {time.Microsecond, 60, time.Millisecond}, {0, 60, 0}} {
		if got := Compress(c.d, c.speed); got != c.want {
			t.Errorf("Compress(%s, %g) = %s, want %s", c.d, c.speed, got, c.want)
		}
	}
}

func TestRunFor(t *testing.T) {
	start := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC) // status.startTime, truncated
	// Observed running 700ms into that second: ten wall seconds from then end 10.7s after startTime.
	if got := RunFor(start, start.Add(700*time.Millisecond), 10*time.Second); got != 10700*time.Millisecond {
		t.Errorf("RunFor = %s", got)
	}
	if got := RunFor(start, start.Add(-time.Second), time.Second); got != time.Second {
		t.Errorf("an observation before startTime (clock skew) counts from startTime: %s", got)
	}
}
