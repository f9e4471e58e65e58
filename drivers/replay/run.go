package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/trace"
)

// Options of one replay.
type Options struct {
	Speed float64
	// Deadline bounds the replay in wall time (0: none); jobs not finished by then are
	// reported as such.
	Deadline time.Duration
	// GroupBy is a node label: devices are counted per value (nodes without it: "other").
	GroupBy string
	// Tick is how often (wall) the cluster is sampled; default 100ms.
	Tick time.Duration
	// Keep leaves the replay's Jobs, templates and PodGroups in the cluster.
	Keep bool
	// Log, when set, gets a line per job submitted, started and finished, and per fault set
	// and cleared.
	Log func(format string, args ...any)
	// Dynamic writes SimulatedDevicePools: needed when the trace sets faults.
	Dynamic dynamic.Interface
}

// Run replays t on the cluster and returns its record. The run id (LabelRun) is derived from
// the start time. Jobs are submitted at their arrival divided by speed; their pods run for
// their duration divided by speed (the pod machine's run-for). It stops when every job has
// finished or at the deadline, then deletes what it created unless Keep.
func Run(ctx context.Context, kube kubernetes.Interface, t *trace.Trace, o Options) (*Record, error) {
	if o.Speed <= 0 {
		return nil, fmt.Errorf("speed %v: must be positive", o.Speed)
	}
	if o.Tick <= 0 {
		o.Tick = 100 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	run := fmt.Sprintf("%s-%d", t.Name, time.Now().Unix())
	groups, devices, nodeDevices, err := deviceGroups(ctx, kube, o.GroupBy)
	if err != nil {
		return nil, err
	}
	faults, faultRecs, err := prepareFaults(ctx, kube, o.Dynamic, t)
	if err != nil {
		return nil, err
	}
	for _, ns := range t.Namespaces() {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	durations := map[string]time.Duration{} // namespace/job → its pods' compressed run time
	perPod := map[string]int{}              // namespace/job → the devices each of its pods asks for
	for _, j := range t.Jobs {
		durations[j.Key()] = trace.Compress(j.Duration, o.Speed)
		perPod[j.Key()] = j.Devices
	}
	w := newWatcher(kube, run, durations)
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	defer w.stop()

	rec := &Record{Trace: t.Name, Run: run, Speed: o.Speed, GroupBy: o.GroupBy, Devices: devices, Faults: faultRecs}
	rec.Jobs = make([]JobRecord, len(t.Jobs))
	for i, j := range t.Jobs {
		rec.Jobs[i].Job = j
	}
	start := time.Now()
	sim := func(at time.Time) time.Duration { return time.Duration(float64(at.Sub(start)) * o.Speed) }
	var deadline <-chan time.Time
	if o.Deadline > 0 {
		deadline = time.After(o.Deadline)
	}
	wake := time.NewTimer(0)
	defer wake.Stop()
	next := 0 // the next job to submit
	var stuckSince time.Time
	var created []trace.Objects
	defer func() {
		if !o.Keep {
			cleanup(context.WithoutCancel(ctx), kube, created)
			faults.restore(context.WithoutCancel(ctx), rec, o.Log)
		}
	}()
	elapsed := func(at time.Duration) bool { return trace.Compress(at, o.Speed) <= time.Since(start) }
	simNow := func() time.Duration { return sim(time.Now()) }
	for {
		faults.apply(ctx, rec, elapsed, simNow, w.claims.GetStore(), o.Log)
		now := time.Now()
		first := next
		for next < len(t.Jobs) && trace.Compress(t.Jobs[next].Arrival, o.Speed) <= now.Sub(start) {
			next++
		}
		objs, err := submitJobs(ctx, kube, t.Jobs[first:next], run, o.Speed, func(i int) { rec.Jobs[first+i].Submitted = new(sim(time.Now())) })
		created = append(created, objs...)
		if err != nil {
			return rec, err
		}
		for i := first; i < next; i++ {
			j := t.Jobs[i]
			o.Log("%s submit %s (%d×%d %s)", fmtSim(*rec.Jobs[i].Submitted), j.Key(), j.Pods, j.Devices, j.DeviceClass)
		}
		done := w.update(rec, sim, o.Log)
		sample := w.sample(sim(now), groups, nodeDevices, perPod)
		sample.Faults = active(rec)
		rec.Samples = append(rec.Samples, sample)
		if next == len(t.Jobs) {
			if done {
				rec.Ended = "complete"
				break
			}
			// Not stuck while a fault in effect will be cleared: that gives devices back.
			if n := stuck(rec, sample); n == 0 || faults.pendingClear(rec) {
				stuckSince = time.Time{}
			} else if stuckSince.IsZero() {
				stuckSince = now
			} else if now.Sub(stuckSince) >= stuckAfter {
				rec.Ended = fmt.Sprintf("stuck: for %s nothing ran and %d jobs waited", stuckAfter, n)
				break
			}
		}
		// The next sample, or the next arrival if it comes first: a tick would delay a
		// submission by up to the tick × speed in simulated time.
		wait := o.Tick
		if next < len(t.Jobs) {
			wait = min(wait, trace.Compress(t.Jobs[next].Arrival, o.Speed)-time.Since(start))
		}
		if at, ok := faults.nextAt(); ok {
			wait = min(wait, trace.Compress(at, o.Speed)-time.Since(start))
		}
		wake.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return rec, ctx.Err()
		case <-deadline:
			rec.Ended = "deadline"
			w.update(rec, sim, o.Log)
		case <-wake.C:
			continue
		}
		break
	}
	rec.Wall = time.Since(start)
	rec.Simulated = sim(time.Now())
	w.mu.Lock()
	defer w.mu.Unlock()
	return rec, errors.Join(w.errs...)
}

// stuckAfter is how long (wall) nothing may run while jobs wait before the replay ends: longer
// than kube-scheduler takes to retry a pod once devices are freed.
const stuckAfter = 10 * time.Second

// stuck returns how many jobs wait while no pod of the replay runs or is about to (0 when
// some pod runs or a job has started): if that lasts, nothing the replay does will free
// devices for them.
func stuck(rec *Record, s Sample) int {
	if s.Running > 0 {
		return 0
	}
	n := 0
	for _, j := range rec.Jobs {
		if j.Finished != nil {
			continue
		}
		if j.Started != nil {
			return 0
		}
		n++
	}
	return n
}

func fmtSim(d time.Duration) string { return "t+" + d.Round(time.Second).String() }

// deviceGroups maps each node to its group (the value of label key, "all" without a key) and
// counts the devices published per group and per node.
func deviceGroups(ctx context.Context, kube kubernetes.Interface, key string) (map[string]string, map[string]int, map[string]int, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list nodes: %w", err)
	}
	groups := map[string]string{}
	for _, n := range nodes.Items {
		groups[n.Name] = groupOf(n.Labels, key)
	}
	sl, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	devices, perNode := map[string]int{}, map[string]int{}
	for _, s := range sl.Items {
		for _, d := range s.Spec.Devices {
			node := s.Spec.NodeName
			if d.NodeName != nil {
				node = d.NodeName
			}
			g := "other"
			if node != nil {
				g = groups[*node]
				perNode[*node]++
			}
			devices[g]++
		}
	}
	return groups, devices, perNode, nil
}

func groupOf(labels map[string]string, key string) string {
	if key == "" {
		return "all"
	}
	if v, ok := labels[key]; ok {
		return v
	}
	return "other"
}

// submitInFlight bounds the jobs submitted at once: one after the other, a busy control plane's
// create latency made a 10,000-job replay fall behind the trace's clock at 60x.
const submitInFlight = 16

// submitJobs submits jobs that are due together, up to submitInFlight at once, calling
// submitted(i) as jobs[i] is; it returns every job's objects (for the cleanup) and the first error.
func submitJobs(ctx context.Context, kube kubernetes.Interface, jobs []trace.Job, run string, speed float64, submitted func(i int)) ([]trace.Objects, error) {
	objs := make([]trace.Objects, len(jobs))
	var g errgroup.Group
	g.SetLimit(submitInFlight)
	for i, j := range jobs {
		objs[i] = trace.ObjectsFor(j, run, speed)
		g.Go(func() error {
			if err := submit(ctx, kube, objs[i]); err != nil {
				return fmt.Errorf("job %s: %w", j.Key(), err)
			}
			submitted(i)
			return nil
		})
	}
	return objs, g.Wait()
}

func submit(ctx context.Context, kube kubernetes.Interface, o trace.Objects) error {
	if o.Template != nil {
		if _, err := kube.ResourceV1().ResourceClaimTemplates(o.Template.Namespace).Create(ctx, o.Template, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ResourceClaimTemplate: %w", err)
		}
	}
	if o.PodGroup != nil {
		if _, err := kube.SchedulingV1beta1().PodGroups(o.PodGroup.Namespace).Create(ctx, o.PodGroup, metav1.CreateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				err = errors.New("the cluster serves no scheduling.k8s.io/v1beta1 PodGroups: a gang needs the GenericWorkload gate (the dra-all control plane profile)")
			}
			return fmt.Errorf("PodGroup: %w", err)
		}
	}
	if _, err := kube.BatchV1().Jobs(o.Job.Namespace).Create(ctx, o.Job, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("Job: %w", err)
	}
	return nil
}

// cleanup deletes what the replay created and waits (up to a minute) until its Jobs are
// gone, so that a replay right after, of the same trace, can create Jobs of the same names.
func cleanup(ctx context.Context, kube kubernetes.Interface, created []trace.Objects) {
	bg := metav1.DeletePropagationBackground
	defer func() {
		deadline := time.Now().Add(time.Minute)
		for _, o := range created {
			for time.Now().Before(deadline) {
				if _, err := kube.BatchV1().Jobs(o.Job.Namespace).Get(ctx, o.Job.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	for _, o := range created {
		_ = kube.BatchV1().Jobs(o.Job.Namespace).Delete(ctx, o.Job.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if o.PodGroup != nil {
			_ = kube.SchedulingV1beta1().PodGroups(o.PodGroup.Namespace).Delete(ctx, o.PodGroup.Name, metav1.DeleteOptions{})
		}
		if o.Template != nil {
			_ = kube.ResourceV1().ResourceClaimTemplates(o.Template.Namespace).Delete(ctx, o.Template.Name, metav1.DeleteOptions{})
		}
	}
}

// watcher follows the replay's pods, Jobs and claims (label LabelRun) and notes when each pod
// was bound, as its event arrives: a sample tick would round that to the tick × speed.
type watcher struct {
	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer
	jobs    cache.SharedIndexInformer
	claims  cache.SharedIndexInformer
	// slices are every ResourceSlice (another factory: they are not the replay's).
	sliceFactory informers.SharedInformerFactory
	slices       cache.SharedIndexInformer
	cancel       context.CancelFunc

	mu      sync.Mutex
	bound   map[string]time.Time // pod namespace/name → when it was first seen on a node
	ended   map[string]time.Time // pod namespace/name → when it was first seen Succeeded or Failed
	started map[string]bool      // pods whose run-for was set
	errs    []error              // patches that failed
}

func newWatcher(kube kubernetes.Interface, run string, durations map[string]time.Duration) *watcher {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = trace.LabelRun + "=" + run
	}))
	w := &watcher{factory: f, pods: f.Core().V1().Pods().Informer(), jobs: f.Batch().V1().Jobs().Informer(),
		claims: f.Resource().V1().ResourceClaims().Informer(), bound: map[string]time.Time{}, ended: map[string]time.Time{}, started: map[string]bool{}}
	w.sliceFactory = informers.NewSharedInformerFactory(kube, 0)
	w.slices = w.sliceFactory.Resource().V1().ResourceSlices().Informer()
	first := func(m map[string]time.Time, key string, now time.Time) {
		if _, seen := m[key]; !seen {
			m[key] = now
		}
	}
	note := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now, key := time.Now(), p.Namespace+"/"+p.Name
		w.mu.Lock()
		defer w.mu.Unlock()
		if p.Spec.NodeName != "" {
			first(w.bound, key, now)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			first(w.ended, key, now)
		}
		// Started: run for the job's duration from now (trace.RunFor), one patch per pod.
		if p.Status.StartTime != nil && !w.started[key] {
			w.started[key] = true
			d, ok := durations[p.Namespace+"/"+p.Labels[trace.LabelJob]]
			if !ok {
				return
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
				trace.AnnotationRunFor: trace.RunFor(p.Status.StartTime.Time, now, d).String()}}})
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if _, err := kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
					w.mu.Lock()
					w.errs = append(w.errs, fmt.Errorf("pod %s: set run-for: %w", key, err))
					w.mu.Unlock()
				}
			}()
		}
	}
	_, _ = w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }})
	return w
}

func (w *watcher) start(ctx context.Context) error {
	ctx, w.cancel = context.WithCancel(ctx)
	for _, f := range []informers.SharedInformerFactory{w.factory, w.sliceFactory} {
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("watch %v: cache did not sync", typ)
			}
		}
	}
	return nil
}

func (w *watcher) stop() {
	w.cancel()
	w.factory.Shutdown()
	w.sliceFactory.Shutdown()
}

// update records what happened to each job since the last call and reports whether every
// submitted job has finished.
func (w *watcher) update(rec *Record, sim func(time.Time) time.Duration, log func(string, ...any)) bool {
	podsByJob := map[string][]*corev1.Pod{}
	for _, o := range w.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		podsByJob[p.Namespace+"/"+p.Labels[trace.LabelJob]] = append(podsByJob[p.Namespace+"/"+p.Labels[trace.LabelJob]], p)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	all := true
	for i := range rec.Jobs {
		j := &rec.Jobs[i]
		if j.Submitted == nil {
			all = false
			continue
		}
		if j.Finished != nil {
			continue
		}
		pods := podsByJob[j.Key()]
		if j.Admitted == nil && len(pods) > 0 {
			first := pods[0].CreationTimestamp.Time
			for _, p := range pods {
				if p.CreationTimestamp.Time.Before(first) {
					first = p.CreationTimestamp.Time
				}
			}
			j.Admitted = new(max(sim(first), *j.Submitted))
		}
		if j.Started == nil {
			if last, all := latest(w.bound, pods, j.Pods); all {
				j.Started = new(sim(last))
				log("%s start %s (waited %s)", fmtSim(*j.Started), j.Key(), (*j.Started - j.Arrival).Round(time.Second))
			} else if j.Reason == "" {
				j.Reason = unschedulable(pods)
			}
		}
		if obj, ok, _ := w.jobs.GetStore().GetByKey(j.Key()); ok {
			job := obj.(*batchv1.Job)
			for _, c := range job.Status.Conditions {
				if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
					// The job ended when its last pod did (as that event arrived): the Job
					// controller batches pod updates for a second before it says so.
					end := time.Now()
					if last, all := latest(w.ended, pods, j.Pods); all {
						end = last
					}
					j.Finished = new(sim(end))
					j.Failed = c.Type == batchv1.JobFailed
					log("%s end %s (%s)", fmtSim(*j.Finished), j.Key(), c.Type)
				}
			}
			if j.Admitted == nil && j.Reason == "" && job.Spec.Suspend != nil && *job.Spec.Suspend {
				j.Reason = "suspended: waiting for its queue's admission"
			}
		}
		if j.Finished == nil {
			all = false
		}
	}
	return all
}

// latest is the latest time recorded in seen (when a pod was bound, or ended) for pods, and
// whether times were recorded for at least want of them.
func latest(seen map[string]time.Time, pods []*corev1.Pod, want int) (time.Time, bool) {
	var last time.Time
	n := 0
	for _, p := range pods {
		if at, ok := seen[p.Namespace+"/"+p.Name]; ok {
			n++
			if at.After(last) {
				last = at
			}
		}
	}
	return last, n >= want
}

func unschedulable(pods []*corev1.Pod) string {
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				return c.Message
			}
		}
	}
	return ""
}

// sample counts the replay's pods and the devices its claims hold, and the free devices
// split across nodes while pods pend (Sample.fragmentation). perPod are the devices each pod
// of a job asks for.
func (w *watcher) sample(t time.Duration, groups map[string]string, nodeDevices, perPod map[string]int) Sample {
	s := Sample{T: t, AllocatedByGroup: map[string]int{}, AllocatedByClass: map[string]int{}}
	heldDevices := map[string]bool{}     // deviceKey of the devices the replay's claims hold
	allocatedFor := map[types.UID]bool{} // pods whose claim is allocated: being bound, not blocked
	for _, o := range w.claims.GetStore().List() {
		c := o.(*resourcev1.ResourceClaim)
		a := c.Status.Allocation
		if a == nil {
			continue
		}
		if owner := metav1.GetControllerOf(c); owner != nil {
			allocatedFor[owner.UID] = true
		}
		class := map[string]string{}
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly != nil {
				class[r.Name] = r.Exactly.DeviceClassName
			}
		}
		g, node := "other", ""
		if ns := a.NodeSelector; ns != nil && len(ns.NodeSelectorTerms) > 0 {
			for _, f := range ns.NodeSelectorTerms[0].MatchFields {
				if f.Key == "metadata.name" && len(f.Values) == 1 {
					node = f.Values[0]
					g = groups[node]
				}
			}
		}
		for _, r := range a.Devices.Results {
			s.AllocatedByGroup[g]++
			s.AllocatedByClass[class[r.Request]]++
			if node != "" {
				heldDevices[deviceKey(r.Driver, r.Pool, r.Device)] = true
			}
		}
	}
	usable, held := w.usable(&s, nodeDevices, heldDevices)
	var pending []pendingPod
	for _, o := range w.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		switch {
		case p.Spec.NodeName == "":
			s.Pending++
			// Blocked: kube-scheduler said it could not place the pod, and no claim of it is
			// allocated yet.
			if reason := unschedulable([]*corev1.Pod{p}); reason != "" && !allocatedFor[p.UID] {
				job := p.Namespace + "/" + p.Labels[trace.LabelJob]
				pending = append(pending, pendingPod{job: job, devices: perPod[job], reason: reason})
			}
		case p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
			s.Running++
		}
	}
	s.fragmentation(usable, held, pending)
	return s
}

// usable counts per node the published devices new claims can get (no NoSchedule or NoExecute
// taint) and those of them the replay's claims hold (heldDevices), and sets s.Unavailable: the
// tainted devices and those gone since the start (nodeDevices, the devices per node then).
func (w *watcher) usable(s *Sample, nodeDevices map[string]int, heldDevices map[string]bool) (usable, held map[string]int) {
	usable, held = map[string]int{}, map[string]int{}
	now := map[string]int{}
	for _, o := range w.slices.GetStore().List() {
		sl := o.(*resourcev1.ResourceSlice)
		for _, d := range sl.Spec.Devices {
			node := sl.Spec.NodeName
			if d.NodeName != nil {
				node = d.NodeName
			}
			if node == nil {
				continue
			}
			now[*node]++
			if slices.ContainsFunc(d.Taints, blockingTaint) {
				s.Unavailable++
				continue
			}
			usable[*node]++
			if heldDevices[deviceKey(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name)] {
				held[*node]++
			}
		}
	}
	for n, d := range nodeDevices {
		s.Unavailable += max(d-now[n], 0)
		if _, ok := usable[n]; !ok {
			usable[n] = 0
		}
	}
	return usable, held
}
