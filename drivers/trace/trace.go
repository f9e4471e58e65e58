// Package trace reads a workload trace (schemas/trace.cue #WorkloadTrace): jobs arriving over
// time, each pods × devices of a class running for a duration, and makes the objects that
// submit one job at a compressed speed. It is pure; drivers/replay submits and watches.
package trace

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/draforge/draforge/drivers/faultcampaign"
	"github.com/draforge/draforge/drivers/scenario"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/schemas"
)

// Labels the replayed objects carry.
const (
	// LabelRun is the replay's run id on every object it creates.
	LabelRun = "draforge.oaslananka/replay"
	// LabelJob is the trace job's name on its Job, template, PodGroup and pods.
	LabelJob = "draforge.oaslananka/trace-job"
	// LabelQueue is the label Kueue admits a Job by: its LocalQueue.
	LabelQueue = "kueue.x-k8s.io/queue-name"
	// Annotations the pod machine reads (machines/pod.cue).
	annotationRunFor   = "draforge.oaslananka/run-for"
	annotationExitCode = "draforge.oaslananka/exit-code"
)

// Trace is a decoded workload trace.
type Trace struct {
	Name string `json:"name"`
	Jobs []Job  `json:"jobs"` // sorted by arrival, then name
	// Faults and Campaigns are what the replay sets on SimulatedDevicePools, in file order.
	Faults    []Fault         `json:"faults,omitempty"`
	Campaigns []FaultCampaign `json:"faultCampaigns,omitempty"`
}

// FaultTiming is where a fault of a trace applies (a SimulatedDevicePool), when it is set and
// when it is removed.
type FaultTiming struct {
	// Source is where the trace says so: "spec.faults.3" or "spec.faultCampaigns.0".
	Source        string `json:"source"`
	Pool          string `json:"pool"`
	PoolNamespace string `json:"poolNamespace"`
	// At is when the fault is set (a campaign starts), from the trace's start.
	At time.Duration `json:"at"`
	// Clear is when it is removed, from the trace's start; RecoverAfter how long after each
	// fault is set it is removed. Neither: it stays until the replay ends.
	Clear        *time.Duration `json:"clear,omitempty"`
	RecoverAfter time.Duration  `json:"recoverAfter,omitempty"`
}

// PoolKey is the pool's namespace/name.
func (f FaultTiming) PoolKey() string { return f.PoolNamespace + "/" + f.Pool }

// ClearAt is when a fault of it set at set is removed, and whether it ever is.
func (f FaultTiming) ClearAt(set time.Duration) (time.Duration, bool) {
	switch {
	case f.Clear != nil:
		return max(*f.Clear, set), true
	case f.RecoverAfter > 0:
		return set + f.RecoverAfter, true
	}
	return 0, false
}

// Fault is one fault a trace sets: Mode (XID for mode xid) on each of Devices (an index or a
// name), on Node or on every node the pool targets ("").
type Fault struct {
	FaultTiming
	Node    string               `json:"node,omitempty"`
	Devices []intstr.IntOrString `json:"devices"`
	Mode    simdevice.FaultMode  `json:"mode"`
	XID     *int64               `json:"xid,omitempty"`
}

// FaultCampaign is a seeded fault campaign over the nodes the pool targets; its Start is the
// timing's At.
type FaultCampaign struct {
	FaultTiming
	Campaign faultcampaign.Campaign `json:"campaign"`
}

// Job is one job of a trace, with the trace's defaults applied.
type Job struct {
	Name              string        `json:"name"`
	Namespace         string        `json:"namespace"`
	Arrival           time.Duration `json:"arrival"`
	Duration          time.Duration `json:"duration"`
	Pods              int           `json:"pods"`
	Devices           int           `json:"devices"`
	DeviceClass       string        `json:"deviceClass"`
	Gang              bool          `json:"gang,omitempty"`
	Queue             string        `json:"queue,omitempty"`
	PriorityClassName string        `json:"priorityClassName,omitempty"`
}

// Key is the job's namespace/name.
func (j Job) Key() string { return j.Namespace + "/" + j.Name }

// Size is the job's devices in all: pods × devices.
func (j Job) Size() int { return j.Pods * j.Devices }

// VetError is a trace the schema refuses; Error lists every problem at its file:line:col.
type VetError struct {
	File string
	Err  error
}

func (e *VetError) Error() string { return scenario.Format(e.File, e.Err) }

type document struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Namespace   string `json:"namespace"`
		DeviceClass string `json:"deviceClass"`
		Jobs        []struct {
			Name              string `json:"name"`
			Arrival           string `json:"arrival"`
			Duration          string `json:"duration"`
			Namespace         string `json:"namespace"`
			Pods              *int   `json:"pods"`
			Devices           *int   `json:"devices"`
			DeviceClass       string `json:"deviceClass"`
			Gang              bool   `json:"gang"`
			Queue             string `json:"queue"`
			PriorityClassName string `json:"priorityClassName"`
		} `json:"jobs"`
		Faults []struct {
			timing
			Device  *intstr.IntOrString  `json:"device"`
			Devices []intstr.IntOrString `json:"devices"`
			Node    string               `json:"node"`
			Mode    simdevice.FaultMode  `json:"mode"`
			XID     *int64               `json:"xid"`
		} `json:"faults"`
		FaultCampaigns []struct {
			timing
			Seed        int64               `json:"seed"`
			Mode        simdevice.FaultMode `json:"mode"`
			XID         *int64              `json:"xid"`
			Fraction    float64             `json:"fraction"`
			RatePerHour float64             `json:"ratePerHour"`
			Duration    string              `json:"duration"`
		} `json:"faultCampaigns"`
	} `json:"spec"`
}

type timing struct {
	Pool          string `json:"pool"`
	PoolNamespace string `json:"poolNamespace"`
	At            string `json:"at"`
	Clear         string `json:"clear"`
	RecoverAfter  string `json:"recoverAfter"`
}

// decode parses the timing (the schema checked its grammar, Go's) of the fault at source.
func (t timing) decode(source, namespace string) (FaultTiming, error) {
	ft := FaultTiming{Source: source, Pool: t.Pool, PoolNamespace: cmp.Or(t.PoolNamespace, namespace)}
	var err error
	if ft.At, err = time.ParseDuration(t.At); err != nil {
		return ft, err
	}
	if t.Clear != "" {
		c, err := time.ParseDuration(t.Clear)
		if err != nil {
			return ft, err
		}
		ft.Clear = &c
	}
	if t.RecoverAfter != "" {
		if ft.RecoverAfter, err = time.ParseDuration(t.RecoverAfter); err != nil {
			return ft, err
		}
	}
	return ft, nil
}

// Decode vets src against #WorkloadTrace (every problem at its file:line:col, a *VetError)
// and decodes it.
func Decode(filename string, src []byte) (*Trace, error) {
	if err := schemas.ValidateTrace(filename, src); err != nil {
		return nil, &VetError{File: filename, Err: err}
	}
	var d document
	if err := yaml.Unmarshal(src, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", filename, err)
	}
	t := &Trace{Name: d.Metadata.Name}
	ns := cmp.Or(d.Spec.Namespace, "draforge-replay")
	for i, j := range d.Spec.Jobs {
		arrival, err1 := time.ParseDuration(j.Arrival)
		duration, err2 := time.ParseDuration(j.Duration)
		if err := cmp.Or(err1, err2); err != nil { // the schema's grammar is Go's
			return nil, fmt.Errorf("%s: spec.jobs.%d: %w", filename, i, err)
		}
		t.Jobs = append(t.Jobs, Job{
			Name: j.Name, Namespace: cmp.Or(j.Namespace, ns), Arrival: arrival, Duration: duration,
			Pods: ptr.Deref(j.Pods, 1), Devices: ptr.Deref(j.Devices, 1), DeviceClass: cmp.Or(j.DeviceClass, d.Spec.DeviceClass),
			Gang: j.Gang, Queue: j.Queue, PriorityClassName: j.PriorityClassName,
		})
	}
	slices.SortStableFunc(t.Jobs, func(a, b Job) int { return cmp.Or(cmp.Compare(a.Arrival, b.Arrival), cmp.Compare(a.Key(), b.Key())) })
	for i, f := range d.Spec.Faults {
		source := fmt.Sprintf("spec.faults.%d", i)
		ft, err := f.decode(source, ns)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", filename, source, err)
		}
		devices := f.Devices
		if f.Device != nil {
			devices = []intstr.IntOrString{*f.Device}
		}
		t.Faults = append(t.Faults, Fault{FaultTiming: ft, Node: f.Node, Devices: devices, Mode: f.Mode, XID: f.XID})
	}
	for i, c := range d.Spec.FaultCampaigns {
		source := fmt.Sprintf("spec.faultCampaigns.%d", i)
		ft, err := c.decode(source, ns)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", filename, source, err)
		}
		fc := FaultCampaign{FaultTiming: ft, Campaign: faultcampaign.Campaign{Seed: c.Seed, Mode: c.Mode, XID: c.XID,
			Fraction: c.Fraction, RatePerHour: c.RatePerHour, Start: ft.At}}
		if c.Duration != "" {
			if fc.Campaign.Duration, err = time.ParseDuration(c.Duration); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", filename, source, err)
			}
		}
		if err := fc.Campaign.Validate(); err != nil { // the schema's rules, once more
			return nil, fmt.Errorf("%s: %s: %w", filename, source, err)
		}
		t.Campaigns = append(t.Campaigns, fc)
	}
	return t, nil
}

// Namespaces are the namespaces the trace's jobs run in, sorted.
func (t *Trace) Namespaces() []string {
	var out []string
	for _, j := range t.Jobs {
		out = append(out, j.Namespace)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HasFaults reports whether the trace sets faults.
func (t *Trace) HasFaults() bool { return len(t.Faults) > 0 || len(t.Campaigns) > 0 }

// Span is the trace's simulated length: the last arrival plus its duration, or any job's end.
func (t *Trace) Span() time.Duration {
	var end time.Duration
	for _, j := range t.Jobs {
		end = max(end, j.Arrival+j.Duration)
	}
	return end
}

// Compress divides a simulated duration by speed, never below a millisecond for a positive one.
func Compress(d time.Duration, speed float64) time.Duration {
	if d <= 0 {
		return 0
	}
	return max(time.Duration(float64(d)/speed), time.Millisecond)
}

// AnnotationRunFor is the pod machine's run time annotation (machines/pod.cue), counted from
// the pod's status.startTime.
const AnnotationRunFor = annotationRunFor

// RunFor is the run-for a pod that started at started (as observed, to the nanosecond) needs to
// run for duration from then: status.startTime has a one-second resolution (it is truncated), so
// counting duration from it would end the pod up to a second early, a simulated minute at 60x.
func RunFor(startTime, started time.Time, duration time.Duration) time.Duration {
	return max(started.Sub(startTime), 0) + duration
}

// Objects are what submit one job: the claim template its pods' claims come from (nil
// without devices), the PodGroup of a gang (else nil) and the Job, whose pods run for the
// job's duration divided by speed.
type Objects struct {
	Template *resourcev1.ResourceClaimTemplate
	PodGroup *schedulingv1beta1.PodGroup
	Job      *batchv1.Job
}

// ObjectsFor makes job's objects for run (the LabelRun value).
func ObjectsFor(job Job, run string, speed float64) Objects {
	labels := map[string]string{LabelRun: run, LabelJob: job.Name}
	meta := metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, Labels: labels}
	var o Objects
	spec := corev1.PodSpec{
		RestartPolicy:     corev1.RestartPolicyNever,
		PriorityClassName: job.PriorityClassName,
		Containers:        []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
	}
	if job.Devices > 0 {
		o.Template = &resourcev1.ResourceClaimTemplate{ObjectMeta: meta, Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "devices", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: job.DeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(job.Devices)},
			}}}},
		}}
		spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "devices", ResourceClaimTemplateName: ptr.To(job.Name)}}
		spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "devices"}}
	}
	if job.Gang {
		o.PodGroup = &schedulingv1beta1.PodGroup{ObjectMeta: meta, Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(job.Pods)}},
		}}
		spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(job.Name)}
	}
	jobLabels := labels
	if job.Queue != "" {
		jobLabels = map[string]string{LabelRun: run, LabelJob: job.Name, LabelQueue: job.Queue}
	}
	o.Job = &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, Labels: jobLabels},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(int32(job.Pods)), Completions: ptr.To(int32(job.Pods)), BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{
				// No run-for yet: the replay sets it on each pod once it runs (RunFor), so that
				// its second-resolution start time does not cut the run short.
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{annotationExitCode: strconv.Itoa(0)}},
				Spec:       spec,
			},
		},
	}
	return o
}
