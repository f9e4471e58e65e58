package snapshot

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/trace"
)

// Workloads are what the trace of the workloads in flight is made of: the cluster's Jobs, pods,
// ResourceClaimTemplates and ResourceClaims at Now.
type Workloads struct {
	Jobs      []batchv1.Job
	Pods      []corev1.Pod
	Templates []resourcev1.ResourceClaimTemplate
	Claims    []resourcev1.ResourceClaim
	Now       time.Time
}

// TraceOptions shape the trace of the workloads in flight.
type TraceOptions struct {
	// Name is the trace's metadata.name.
	Name string
	// Duration is how long a workload runs when nothing says how much of it is left (no
	// draforge.oaslananka/run-for annotation, no Job activeDeadlineSeconds).
	Duration time.Duration
}

// TraceSummary counts what the trace holds and says what it leaves out and why.
type TraceSummary struct {
	Jobs, Pods, Devices int
	// LeftOut are the workloads the trace format cannot express, each "namespace/name: why".
	LeftOut []string
}

func (s TraceSummary) String() string {
	out := fmt.Sprintf("%d workloads in flight (%d pods, %d devices)", s.Jobs, s.Pods, s.Devices)
	if len(s.LeftOut) > 0 {
		out += fmt.Sprintf("; %d left out", len(s.LeftOut))
	}
	return out
}

// workload is one group of pods in flight: a Job's, another controller's (a ReplicaSet's, a
// JobSet's...) or a pod of its own.
type workload struct {
	namespace, name string
	spec            *corev1.PodSpec
	labels          map[string]string
	pods            []*corev1.Pod // not finished, not being deleted
	job             *batchv1.Job
	created         time.Time
}

// Trace returns a #WorkloadTrace document of the workloads in flight in w: every Job that has
// not finished, and every other group of running or pending pods with ResourceClaims (grouped
// by their controller), as one trace job each, pods × devices of one class. Workloads that
// already run come first, in the order they started, then pending ones in the order they were
// created; their arrivals are a millisecond apart, so a replay submits them at once and in
// that order. A job's duration is what is left of it: its pods' run-for annotation from their
// start, else the Job's activeDeadlineSeconds from its start, else o.Duration. With
// o.Anonymize, namespaces are renamed as in Documents, jobs job-<i> and queues queue-<i>.
func Trace(c Cluster, w Workloads, o Options, t TraceOptions) (Document, TraceSummary, error) {
	r := newRenamer(c, o.Anonymize)
	var sum TraceSummary
	templates := map[string]*resourcev1.DeviceClaim{}
	for i := range w.Templates {
		tp := &w.Templates[i]
		templates[tp.Namespace+"/"+tp.Name] = &tp.Spec.Spec.Devices
	}
	claims := map[string]*resourcev1.ResourceClaim{}
	for i := range w.Claims {
		cl := &w.Claims[i]
		claims[cl.Namespace+"/"+cl.Name] = cl
	}

	groups := inFlight(w)
	type entry struct {
		job     map[string]any
		started time.Time // zero for a workload none of whose pods started
		created time.Time
		key     string
	}
	var entries []entry
	for _, g := range groups {
		key := g.namespace + "/" + g.name
		devices, class, why := devicesPerPod(g, templates, claims)
		if why != "" {
			sum.LeftOut = append(sum.LeftOut, key+": "+why)
			continue
		}
		if devices == 0 {
			continue // no DRA devices: nothing the simulator's pools decide
		}
		pods := len(g.pods)
		if pods == 0 { // a Job whose pods are not created yet (suspended, or just created)
			pods = jobPodsToCome(g.job)
		}
		if pods == 0 {
			continue
		}
		j := map[string]any{
			"name":        g.name,
			"namespace":   g.namespace,
			"pods":        pods,
			"devices":     devices,
			"deviceClass": class,
			"duration":    remaining(g, w.Now, t.Duration).String(),
		}
		if g.spec.SchedulingGroup != nil {
			j["gang"] = true
		}
		if q := g.labels[trace.LabelQueue]; q != "" {
			j["queue"] = q
		}
		if p := g.spec.PriorityClassName; p != "" {
			j["priorityClassName"] = p
		}
		e := entry{job: j, created: g.created, key: key}
		for _, p := range g.pods {
			if p.Status.StartTime != nil && (e.started.IsZero() || p.Status.StartTime.Time.Before(e.started)) {
				e.started = p.Status.StartTime.Time
			}
		}
		entries = append(entries, e)
		sum.Jobs++
		sum.Pods += pods
		sum.Devices += pods * devices
	}
	// Running first, by start; then pending, by creation.
	slices.SortStableFunc(entries, func(a, b entry) int {
		if a.started.IsZero() != b.started.IsZero() {
			if a.started.IsZero() {
				return 1
			}
			return -1
		}
		if c := a.started.Compare(b.started); c != 0 {
			return c
		}
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	jobNames, queues := map[string]string{}, map[string]string{}
	taken := map[string]bool{}
	jobs := make([]any, 0, len(entries))
	for i, e := range entries {
		j := e.job
		ns := j["namespace"].(string)
		name := traceJobName(j["name"].(string))
		if r.on {
			ns = rename(r.spaces, ns)
			name = numbered(jobNames, "job", e.key)
			if q, ok := j["queue"].(string); ok {
				j["queue"] = numbered(queues, "queue", q)
			}
		}
		for base, n := name, 2; taken[ns+"/"+name]; n++ {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		taken[ns+"/"+name] = true
		j["name"], j["namespace"] = name, ns
		j["arrival"] = (time.Duration(i) * time.Millisecond).String()
		jobs = append(jobs, j)
	}
	slices.Sort(sum.LeftOut)
	if len(jobs) == 0 {
		return nil, sum, fmt.Errorf("no workload in flight holds devices: no trace to write (%s)", sum)
	}
	name := t.Name
	if name == "" {
		name = "in-flight"
	}
	doc := Document{
		"apiVersion": "draforge.oaslananka/v1alpha1",
		"kind":       "WorkloadTrace",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"jobs": jobs},
	}
	return doc, sum, nil
}

// inFlight groups w's pods that neither finished nor are being deleted by the Job or other
// controller that owns them (a pod of its own is its own group), with every Job that has not
// finished, even one without pods yet. DRAForge's allocation pods are left out.
func inFlight(w Workloads) []*workload {
	byUID := map[types.UID]*workload{}
	var out []*workload
	for i := range w.Jobs {
		j := &w.Jobs[i]
		if jobFinished(j) {
			continue
		}
		g := &workload{namespace: j.Namespace, name: j.Name, spec: &j.Spec.Template.Spec, labels: j.Labels, job: j, created: j.CreationTimestamp.Time}
		byUID[j.UID] = g
		out = append(out, g)
	}
	pods := make([]*corev1.Pod, 0, len(w.Pods))
	for i := range w.Pods {
		pods = append(pods, &w.Pods[i])
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || allocationpod.Is(p) {
			continue
		}
		owner := metav1.GetControllerOf(p)
		if owner == nil {
			if len(p.Spec.ResourceClaims) > 0 {
				out = append(out, &workload{namespace: p.Namespace, name: p.Name, spec: &p.Spec, labels: p.Labels,
					pods: []*corev1.Pod{p}, created: p.CreationTimestamp.Time})
			}
			continue
		}
		g := byUID[owner.UID]
		if g == nil {
			if owner.Kind == "Job" || len(p.Spec.ResourceClaims) == 0 {
				continue // a finished Job's last pod, or a controller's pods without claims
			}
			g = &workload{namespace: p.Namespace, name: owner.Name, spec: &p.Spec, labels: p.Labels, created: p.CreationTimestamp.Time}
			byUID[owner.UID] = g
			out = append(out, g)
		}
		g.pods = append(g.pods, p)
	}
	return out
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobPodsToCome is how many pods a Job without pods will run at once: its parallelism (1 by
// default), at most the completions it still needs.
func jobPodsToCome(j *batchv1.Job) int {
	if j == nil {
		return 0
	}
	n := 1
	if j.Spec.Parallelism != nil {
		n = int(*j.Spec.Parallelism)
	}
	if j.Spec.Completions != nil {
		n = min(n, int(*j.Spec.Completions)-int(j.Status.Succeeded))
	}
	return max(n, 0)
}

// devicesPerPod is how many devices of which class each pod of g holds, from its claims'
// requests (a template's or, for a pod of its own, a claim's); of a firstAvailable request, the
// choice kube-scheduler allocated for one of its pods, else the first (which it tries first).
// why says what the trace format cannot express: devices of several classes, a request for all
// matching devices, a claim shared by the pods of a group, a template or claim that is not there.
func devicesPerPod(g *workload, templates map[string]*resourcev1.DeviceClaim, claims map[string]*resourcev1.ResourceClaim) (int, string, string) {
	devices, class := 0, ""
	for _, rc := range g.spec.ResourceClaims {
		var dc *resourcev1.DeviceClaim
		switch {
		case rc.ResourceClaimTemplateName != nil:
			if dc = templates[g.namespace+"/"+*rc.ResourceClaimTemplateName]; dc == nil {
				return 0, "", "ResourceClaimTemplate " + *rc.ResourceClaimTemplateName + " not found"
			}
		case rc.ResourceClaimName != nil:
			if g.job != nil || len(g.pods) > 1 {
				return 0, "", "its pods share ResourceClaim " + *rc.ResourceClaimName + " (a trace job's pods each have claims of their own)"
			}
			c := claims[g.namespace+"/"+*rc.ResourceClaimName]
			if c == nil {
				return 0, "", "ResourceClaim " + *rc.ResourceClaimName + " not found"
			}
			dc = &c.Spec.Devices
		default:
			continue
		}
		for _, req := range dc.Requests {
			exact := req.Exactly
			if exact == nil && len(req.FirstAvailable) > 0 {
				f := req.FirstAvailable[0]
				if sub := allocatedChoice(g, rc, req.Name, claims); sub != "" {
					for _, c := range req.FirstAvailable {
						if c.Name == sub {
							f = c
						}
					}
				}
				exact = &resourcev1.ExactDeviceRequest{DeviceClassName: f.DeviceClassName, AllocationMode: f.AllocationMode, Count: f.Count}
			}
			if exact == nil {
				continue
			}
			if exact.AllocationMode == resourcev1.DeviceAllocationModeAll {
				return 0, "", "request " + req.Name + " asks for all matching devices"
			}
			if class != "" && exact.DeviceClassName != class {
				return 0, "", "devices of several classes (" + class + ", " + exact.DeviceClassName + "; a trace job has one)"
			}
			class = exact.DeviceClassName
			devices += int(max(exact.Count, 1))
		}
	}
	return devices, class, ""
}

// allocatedChoice is the subrequest of request that kube-scheduler allocated for the claim rc
// of one of g's pods ("" when none is allocated): results name it "<request>/<subrequest>".
func allocatedChoice(g *workload, rc corev1.PodResourceClaim, request string, claims map[string]*resourcev1.ResourceClaim) string {
	for _, p := range g.pods {
		name, _, err := resourceclaim.Name(p, &rc)
		if err != nil || name == nil {
			continue
		}
		c := claims[p.Namespace+"/"+*name]
		if c == nil || c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if parent, sub, ok := strings.Cut(r.Request, "/"); ok && parent == request {
				return sub
			}
		}
	}
	return ""
}

// remaining is how long g still runs: the longest of its pods' run-for left (from their start;
// all of it for a pod not started), else the Job's activeDeadlineSeconds left, else def.
// Whole seconds, at least one.
func remaining(g *workload, now time.Time, def time.Duration) time.Duration {
	type runFor struct {
		annotations map[string]string
		start       *time.Time
	}
	var runFors []runFor
	for _, p := range g.pods {
		rf := runFor{annotations: p.Annotations}
		if p.Status.StartTime != nil {
			rf.start = &p.Status.StartTime.Time
		}
		runFors = append(runFors, rf)
	}
	if len(g.pods) == 0 && g.job != nil {
		runFors = append(runFors, runFor{annotations: g.job.Spec.Template.Annotations})
	}
	left, known := time.Duration(0), false
	for _, rf := range runFors {
		d, err := time.ParseDuration(rf.annotations[trace.AnnotationRunFor])
		if err != nil || d <= 0 {
			continue
		}
		if rf.start != nil {
			d -= now.Sub(*rf.start)
		}
		left, known = max(left, d), true
	}
	if !known && g.job != nil && g.job.Spec.ActiveDeadlineSeconds != nil {
		d := time.Duration(*g.job.Spec.ActiveDeadlineSeconds) * time.Second
		if g.job.Status.StartTime != nil {
			d -= now.Sub(g.job.Status.StartTime.Time)
		}
		left, known = d, true
	}
	if !known {
		left = def
	}
	return max(left.Round(time.Second), time.Second)
}

// traceJobName is name as a trace job's name (a DNS label of at most 40 characters): as it is
// when it is one, else its first characters as a label and a hash of the whole.
func traceJobName(name string) string {
	if len(name) <= 40 && len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	head := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	head = strings.Trim(head[:min(len(head), 31)], "-")
	if head == "" {
		head = "job"
	}
	return head + "-" + hex.EncodeToString(sum[:4])
}

// numbered is the anonymized name of key: prefix-<i> in the order keys are first seen.
func numbered(m map[string]string, prefix, key string) string {
	if v, ok := m[key]; ok {
		return v
	}
	v := fmt.Sprintf("%s-%d", prefix, len(m))
	m[key] = v
	return v
}
