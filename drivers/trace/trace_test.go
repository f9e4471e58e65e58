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

func TestDecodeFaults(t *testing.T) {
	src := `apiVersion: draforge.oaslananka/v1alpha1
kind: WorkloadTrace
metadata: {name: faulty}
spec:
  deviceClass: gpu
  jobs:
    - {name: a, arrival: 0s, duration: 1m}
  faults:
    - {at: 30s, pool: gpus, devices: [0, gpu-1], mode: xid, xid: 79, clear: 2m}
    - {at: 1m, pool: gpus, poolNamespace: other, node: node-a, device: 3, mode: gpu-lost, recoverAfter: 90s}
  faultCampaigns:
    - {at: 10m, pool: gpus, seed: 7, mode: ecc, ratePerHour: 4, duration: 1h}
    - {at: 0s, pool: gpus, seed: 8, mode: unhealthy, fraction: 0.5}
`
	tr, err := Decode("faulty.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.HasFaults() || len(tr.Faults) != 2 || len(tr.Campaigns) != 2 {
		t.Fatalf("faults %+v campaigns %+v", tr.Faults, tr.Campaigns)
	}
	f := tr.Faults[0]
	if f.Source != "spec.faults.0" || f.PoolKey() != "draforge-replay/gpus" || f.At != 30*time.Second || len(f.Devices) != 2 ||
		f.Devices[0].IntValue() != 0 || f.Devices[1].String() != "gpu-1" || f.Mode != "xid" || *f.XID != 79 {
		t.Errorf("fault 0 decoded as %+v", f)
	}
	if at, ok := f.ClearAt(f.At); !ok || at != 2*time.Minute {
		t.Errorf("fault 0 clears at %s, %v", at, ok)
	}
	g := tr.Faults[1]
	if g.PoolKey() != "other/gpus" || g.Node != "node-a" || len(g.Devices) != 1 || g.Devices[0].IntValue() != 3 {
		t.Errorf("fault 1 decoded as %+v", g)
	}
	if at, ok := g.ClearAt(2 * time.Minute); !ok || at != 210*time.Second {
		t.Errorf("fault 1 set at 2m recovers at %s, %v; want 3m30s", at, ok)
	}
	c := tr.Campaigns[0]
	if c.Source != "spec.faultCampaigns.0" || c.Campaign.Start != 10*time.Minute || c.Campaign.Duration != time.Hour || c.Campaign.RatePerHour != 4 || c.Campaign.Seed != 7 {
		t.Errorf("campaign 0 decoded as %+v", c)
	}
	if _, ok := tr.Campaigns[1].ClearAt(0); ok {
		t.Error("a campaign without clear or recoverAfter clears")
	}
}

// Every problem of a trace's faults is reported at its file:line:col.
func TestDecodeReportsFaultProblems(t *testing.T) {
	src := `apiVersion: draforge.oaslananka/v1alpha1
kind: WorkloadTrace
metadata: {name: bad}
spec:
  deviceClass: gpu
  jobs:
    - {name: a, arrival: 0s, duration: 1m}
  faults:
    - {at: 30s, pool: gpus, mode: xid}
    - {at: 2m, pool: gpus, device: 0, mode: ecc, xid: 48, clear: 1m}
    - {at: 0s, pool: gpus, device: 0, devices: [1], mode: unhealthy, clear: 1m, recoverAfter: 1m}
    - {at: 0s, pool: gpus, device: 0, mode: healthy}
  faultCampaigns:
    - {at: 0s, pool: gpus, seed: 1, mode: ecc}
    - {at: 0s, pool: gpus, seed: 1, mode: ecc, fraction: 0.5, ratePerHour: 2, duration: 1h}
`
	_, err := Decode("bad.yaml", []byte(src))
	if err == nil {
		t.Fatal("a bad trace decoded")
	}
	msg := err.Error()
	for _, want := range []string{
		"spec.faults.0.xid: field is required",
		"spec.faults.0.device: field is required",
		"bad.yaml:10:55: spec.faults.1.xid: only with mode xid",
		"bad.yaml:10:66: spec.faults.1.clear: must be after at (2m)",
		"spec.faults.2.device: set device or devices, not both",
		"spec.faults.3.mode: unknown mode \"healthy\"",
		"spec.faults.2.recoverAfter: set clear (a time) or recoverAfter",
		"spec.faultCampaigns.0.fraction: field is required",
		"spec.faultCampaigns.1.ratePerHour: set fraction or ratePerHour, not both",
		"spec.faultCampaigns.1.duration: only with ratePerHour",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestDecodeFaultsExample(t *testing.T) {
	src, err := os.ReadFile("../../examples/traces/faults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Decode("faults.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 3 || len(tr.Faults) != 1 || len(tr.Faults[0].Devices) != 4 || len(tr.Campaigns) != 1 ||
		tr.Faults[0].PoolKey() != "draforge-replay/replay-gpus" || tr.Campaigns[0].Campaign.Fraction != 0.25 {
		t.Errorf("faults.yaml decoded as %+v", tr)
	}
}
