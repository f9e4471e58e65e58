// Package engine runs CUE-defined state machines (engine/machine) against Kubernetes objects:
// dynamic informers feed one typed workqueue per machine. Each pass is the pure step Decide
// (decide.go, predicates.go: derive the state, choose the state's first transition whose test
// holds and whose timer is due, render conditions) followed by the apply step (this file,
// actions.go, status.go): the transition fires through looplab/fsm, whose callback runs its
// actions, status is written only when it changed, and the step's outcome drives the queue
// (requeue after, pending, blocked, retry with the machine's backoff table, terminal).
package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/looplab/fsm"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/draforge/draforge/engine/machine"
)

// Options wires an engine.
type Options struct {
	Dynamic   dynamic.Interface
	Informers *Informers
	Registry  *Registry
	Machines  []*machine.Machine
	// Recorder receives a Kubernetes Event per state change and terminal error; nil disables them.
	Recorder record.EventRecorder
	Observer Observer
	Log      zerolog.Logger
	// Now is the clock for condition timestamps and history; nil means time.Now.
	Now func() time.Time
}

// Engine runs machines. Build it, let drivers add informer handlers, then Run.
type Engine struct {
	o       Options
	runners map[string]*runner
	order   []*runner
}

// New validates that every name a machine uses is registered and creates its queue and informers.
func New(o Options) (*Engine, error) {
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	e := &Engine{o: o, runners: map[string]*runner{}}
	for _, m := range o.Machines {
		r, err := newRunner(e, m)
		if err != nil {
			return nil, fmt.Errorf("machine %s: %w", m.Name, err)
		}
		e.runners[m.Name] = r
		e.order = append(e.order, r)
	}
	return e, nil
}

// Run starts every machine's workers and blocks until ctx ends, then drains the queues.
// It waits for the informers (started by their plugin or Informers.Start) to sync.
func (e *Engine) Run(ctx context.Context) {
	// Reading a cache before it is filled would take live objects for deleted ones.
	if !e.o.Informers.WaitSynced(ctx) {
		return
	}
	var wg sync.WaitGroup
	for _, r := range e.order {
		for range r.m.Workers {
			wg.Go(func() {
				// CPU profiles (controller --profiling) attribute each pass to its machine.
				pprof.Do(ctx, pprof.Labels("machine", r.m.Name), func(ctx context.Context) {
					for r.processNext(ctx) {
					}
				})
			})
		}
		r.enqueueAll()
	}
	<-ctx.Done()
	for _, r := range e.order {
		r.queue.ShutDownWithDrain()
	}
	wg.Wait()
}

// History returns the transition history of one object ("namespace/name" key) of a machine.
func (e *Engine) History(machineName, key string) []Record {
	if r, ok := e.runners[machineName]; ok {
		return r.hist.get(key)
	}
	return nil
}

// Errors of State, for callers that map them to responses.
var (
	ErrUnknownMachine = errors.New("no machine")
	ErrObjectNotFound = errors.New("not found in the cache")
)

// State derives the current state of the cached object with key, for read-only callers.
func (e *Engine) State(ctx context.Context, machineName, key string) (string, error) {
	r, ok := e.runners[machineName]
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnknownMachine, machineName)
	}
	obj, exists, err := r.own.get(key)
	if err != nil || !exists {
		return "", fmt.Errorf("%s %s: %w", machineName, key, ErrObjectNotFound)
	}
	return Derive(r.m, r.input(ctx, obj, nil))
}

// input is what Decide needs for obj (a private copy or a cached object it must not change);
// cached, if not nil, is obj as the informer caches it (see PassCached).
func (r *runner) input(ctx context.Context, obj *unstructured.Unstructured, cached any) Input {
	return Input{Object: obj, Facts: r.newFacts(withPass(ctx, cached), obj), Now: r.e.o.Now(),
		TerminalMarked: r.terminalMarked(obj), Retries: r.queue.NumRequeues(cacheKey(obj))}
}

// terminalMarked reports a terminal error remembered for obj's UID and generation.
func (r *runner) terminalMarked(obj *unstructured.Unstructured) bool {
	v, ok := r.terminal.Load(cacheKey(obj))
	if !ok {
		return false
	}
	if mark := v.(terminalMark); mark.uid == obj.GetUID() && mark.generation == obj.GetGeneration() {
		return true
	}
	r.terminal.Delete(cacheKey(obj))
	return false
}

type runner struct {
	e       *Engine
	m       *machine.Machine
	own     *own
	queue   workqueue.TypedRateLimitingInterface[string]
	limiter *backoffLimiter[string]
	hist    *history
	log     zerolog.Logger
	// terminal remembers objects that hit a terminal error, per UID and generation, so a
	// machine without status conditions (or whose terminal status write failed) stays terminal
	// until the object changes.
	terminal sync.Map // key -> terminalMark
	// events describe the machine to looplab/fsm (built once).
	events fsm.Events
	// related are the machine's related objects with their informers; relIndex maps them
	// back to owners.
	related  map[string]relatedRef
	relIndex relIndex
	// names are the action names of each transition (*machine.Transition -> []string), made
	// once and shared by every history record of it.
	names sync.Map
}

// actionNames returns t's action names, the same slice for every record (read-only).
func (r *runner) actionNames(t *machine.Transition) []string {
	if n, ok := r.names.Load(t); ok {
		return n.([]string)
	}
	n, _ := r.names.LoadOrStore(t, t.ActionNames())
	return n.([]string)
}

type terminalMark struct {
	uid        types.UID
	generation int64
}

func newRunner(e *Engine, m *machine.Machine) (*runner, error) {
	o, err := ownObjects(e.o.Informers, m)
	if err != nil {
		return nil, err
	}
	r := &runner{
		e: e, m: m, own: o,
		limiter: newBackoffLimiter[string](m.Backoff),
		hist:    newHistory(m.HistoryLimit),
		log:     e.o.Log.With().Str("machine", m.Name).Logger(),
		events:  m.FSMEvents(),
		related: map[string]relatedRef{},
	}
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig[string](r.limiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: m.Name})
	own := cache.ResourceEventHandlerFuncs{
		AddFunc:    r.enqueueObj,
		UpdateFunc: r.updated,
		// A delete is passed on even when its labels no longer match (the pass forgets the
		// key), but not for an object the selector's test never let through.
		DeleteFunc: func(obj any) {
			if u := ObjectMeta(obj); u != nil && r.whenHolds(obj) {
				r.add(cache.ObjectName{Namespace: u.GetNamespace(), Name: u.GetName()}.String())
			}
		},
	}
	if m.HasSelector() && o.match == nil {
		if err := e.o.Informers.AddHandler(o.inf, own); err != nil {
			return nil, err
		}
	} else {
		e.o.Informers.Notify(m.Resource, o.handler(own))
	}
	for _, n := range m.RelatedOrder {
		r.watchRelated(m.Related[n])
	}
	for _, t := range m.Triggers {
		mapFn, err := r.triggerMapper(t)
		if err != nil {
			return nil, err
		}
		keys := func(obj any) []string {
			if o := ObjectMeta(obj); o != nil {
				return mapFn(o)
			}
			return nil
		}
		h := triggerHandler(t, keys, r.add)
		if t.Name != "" {
			if err := e.o.Informers.AddHandler(e.o.Informers.ForName(t.Resource, "", t.Name), h); err != nil {
				return nil, err
			}
			continue
		}
		e.o.Informers.Notify(t.Resource, h)
	}
	return r, nil
}

// triggerHandler adds the keys an object maps to (keys) for the changes t fires on (its on
// list and fields). An update is mapped before its fields are compared: comparing a typed
// object's fields converts it, and most pod updates map to no claim at all.
func triggerHandler(t machine.Trigger, keys func(obj any) []string, add func(key string)) cache.ResourceEventHandlerFuncs {
	fire := func(obj any) {
		for _, k := range keys(obj) {
			add(k)
		}
	}
	var h cache.ResourceEventHandlerFuncs
	if t.FiresOn(machine.TriggerAdd) {
		h.AddFunc = fire
	}
	if t.FiresOn(machine.TriggerUpdate) {
		h.UpdateFunc = func(old, cur any) {
			ks := keys(cur)
			if len(ks) == 0 || (len(t.Fields) > 0 && !t.Changed(asMap(old), asMap(cur))) {
				return
			}
			for _, k := range ks {
				add(k)
			}
		}
	}
	if t.FiresOn(machine.TriggerDelete) {
		h.DeleteFunc = fire
	}
	return h
}

// watchRelated reads a related resource from an informer as narrow as the machine allows
// (see RelatedInformer) and enqueues the owners whose passes looked the changed object up.
func (r *runner) watchRelated(rel machine.Related) {
	ref := relatedRef{spec: rel, inf: RelatedInformer(r.e.o.Informers, rel)}
	r.related[rel.Name] = ref
	_ = r.e.o.Informers.AddHandler(ref.inf, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.relatedChanged(rel.Resource, obj, false) },
		UpdateFunc: func(_, cur any) { r.relatedChanged(rel.Resource, cur, false) },
		DeleteFunc: func(obj any) { r.relatedChanged(rel.Resource, obj, true) },
	})
}

// relatedChanged enqueues the owners of a related object that changed, unless the change is
// the echo of the owner pass's own write, which that pass decided on (decideAgain).
func (r *runner) relatedChanged(gvr schema.GroupVersionResource, obj any, deleted bool) {
	o := ObjectMeta(obj)
	if o == nil {
		return
	}
	key := cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}.String()
	cur := obj
	if deleted {
		cur = nil
	}
	if r.e.o.Informers.Writes().Echo(gvr, key, r.m.Name, cur) {
		return
	}
	for _, owner := range r.relIndex.ownersOf(gvr, key) {
		r.add(owner)
	}
}

// RelatedInformer returns the informer a related object is read from: restricted to the one
// object when its name is a literal (RBAC may limit it to resourceNames), else to its namespace
// when that is a literal (a Role there is enough, e.g. Leases in kube-node-lease), else every
// object of the resource.
func RelatedInformer(inf *Informers, rel machine.Related) cache.SharedIndexInformer {
	ns, nsLiteral := literal(rel.NamespaceT)
	name, nameLiteral := literal(rel.NameT)
	switch {
	case nameLiteral:
		if !nsLiteral {
			ns = "" // the name in every namespace
		}
		return inf.ForName(rel.Resource, ns, name)
	case nsLiteral && ns != "":
		return inf.ForNamespace(rel.Resource, ns)
	}
	return inf.For(rel.Resource)
}

// literal returns the value of t when it is the same for every object (no template action);
// an absent template is the literal "" (a cluster-scoped related resource has no namespace).
func literal(t *machine.Template) (string, bool) {
	if t == nil {
		return "", true
	}
	if !t.IsLiteral() {
		return "", false
	}
	v, err := t.RenderString(nil)
	return v, err == nil && v != ""
}

func (r *runner) triggerMapper(t machine.Trigger) (func(metav1.Object) []string, error) {
	switch t.Map {
	case "name":
		return func(u metav1.Object) []string {
			if r.m.Namespaced {
				return []string{cache.ObjectName{Namespace: u.GetNamespace(), Name: u.GetName()}.String()}
			}
			return []string{u.GetName()}
		}, nil
	case "all":
		return func(metav1.Object) []string { return r.own.keys() }, nil
	case "labels":
		return func(u metav1.Object) []string {
			l := u.GetLabels()
			name, ns := l[t.NameLabel], l[t.NamespaceLabel]
			if name == "" || (r.m.Namespaced && ns == "") {
				return nil
			}
			return []string{cache.ObjectName{Namespace: ns, Name: name}.String()}
		}, nil
	}
	name, ok := mapperName(t.Map)
	fn := r.e.o.Registry.mappers[name]
	if !ok || fn == nil {
		return nil, fmt.Errorf("trigger %s: unknown map %q", t.Resource, t.Map)
	}
	return func(u metav1.Object) []string {
		var keys []string
		for _, n := range fn(u) {
			keys = append(keys, n.String())
		}
		return keys
	}, nil
}

// ObjectMeta returns the metadata of an informer object (possibly a delete tombstone), which is
// *unstructured.Unstructured or, for resources cached typed (see CacheTyped), a typed or
// Compact object; nil for anything else.
func ObjectMeta(obj any) metav1.Object {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return o
}

// updated enqueues an object that changed, unless the change is none (a resync) or the echo
// of this machine's own status write, which the writing pass decided on (decideAgain).
func (r *runner) updated(old, cur any) {
	o, c := ObjectMeta(old), ObjectMeta(cur)
	if o == nil || c == nil || o.GetResourceVersion() == c.GetResourceVersion() {
		return
	}
	key := cache.ObjectName{Namespace: c.GetNamespace(), Name: c.GetName()}.String()
	if r.e.o.Informers.Writes().Echo(r.m.Resource, key, r.m.Name, cur) {
		return
	}
	r.enqueueObj(cur)
}

func (r *runner) enqueueObj(obj any) {
	if u := ObjectMeta(obj); u != nil && r.selected(u.GetLabels()) && r.whenHolds(obj) {
		r.add(cache.ObjectName{Namespace: u.GetNamespace(), Name: u.GetName()}.String())
	}
}

// whenHolds reports whether the machine's selector.when lets obj through (true without one,
// and for an object whose content is unknown, such as a deletion's last state the informer
// missed).
func (r *runner) whenHolds(obj any) bool {
	if r.m.SelectorWhen == nil {
		return true
	}
	if _, tombstone := obj.(cache.DeletedFinalStateUnknown); tombstone {
		return true // the delete of an object whose last state the informer missed
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return Selects(r.m, u.Object)
	}
	u, ok, err := r.own.unstructured(obj)
	return err != nil || !ok || Selects(r.m, u.Object)
}

// selected reports whether labels match the machine's selector.
func (r *runner) selected(labels map[string]string) bool {
	return r.m.LabelSelector().Matches(k8slabels.Set(labels))
}

func (r *runner) add(key string) {
	r.queue.Add(key)
	r.e.o.Observer.QueueDepth(r.m.Name, r.queue.Len())
}

func (r *runner) enqueueAll() {
	for _, k := range r.own.keys() {
		r.add(k)
	}
}

func (r *runner) processNext(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	r.e.o.Observer.QueueDepth(r.m.Name, r.queue.Len())
	if ctx.Err() != nil {
		// Shutting down: draining keys must not be synced with a cancelled context, which
		// would count as errors and could even turn objects terminal.
		return true
	}
	if r.m.SelectorWhen != nil {
		// Keys come from triggers and timers too: the object as cached decides. One that
		// stopped matching is not passed over again until an event lets it through.
		if cached, ok, _ := r.own.get(key); ok && !r.whenHolds(cached) {
			r.queue.Forget(key)
			return true
		}
	}
	r.e.o.Observer.SyncStarted(r.m.Name)
	start := time.Now()
	st, obj := r.sync(ctx, key)
	var err error
	if st.Outcome == Retry || st.Outcome == Terminal {
		err = st.Err // waiting (pending, unmapped blocked) is not an error
	}
	r.e.o.Observer.SyncFinished(r.m.Name, time.Since(start), err)
	r.handle(ctx, key, st, obj)
	return true
}

// handle applies the step's outcome to the queue: done forgets the key (requeueing after the
// state's requeueAfter or the nearest timer), pending waits without counting a retry, retry
// backs off (base..cap), terminal marks the object and shows the terminal state.
func (r *runner) handle(ctx context.Context, key string, st Step, obj *unstructured.Unstructured) {
	if (st.Outcome == Retry || st.Outcome == Terminal) && ctx.Err() != nil {
		return // cut off by shutdown: the next leader picks the key up; nothing to count
	}
	switch st.Outcome {
	case Done, Wait, "":
		r.queue.Forget(key)
		if st.Outcome == Wait {
			r.record(key, st, "pending")
		}
		if st.RequeueAfter > 0 {
			r.queue.AddAfter(key, st.RequeueAfter)
		}
	case Retry:
		r.e.o.Observer.Retry(r.m.Name, st.Class)
		r.record(key, st, "retry")
		r.log.Debug().Str("key", key).Str("class", string(st.Class)).Err(st.Err).Msg("retrying")
		r.queue.AddRateLimited(key)
	case Terminal:
		r.queue.Forget(key)
		if st.Class == machine.NotFound && obj != nil && r.gone(ctx, obj) {
			// Deleted while the pass ran (its cache copy was behind): there is nothing left to
			// act on, and the informer's delete ends its key.
			r.log.Debug().Str("key", key).Err(st.Err).Msg("object gone during the pass")
			return
		}
		r.e.o.Observer.Terminal(r.m.Name, st.Class)
		r.record(key, st, "terminal")
		r.log.Error().Str("key", key).Str("class", string(st.Class)).Err(st.Err).Msg("terminal error")
		if obj != nil {
			r.enterTerminal(ctx, key, st, obj)
		}
	}
}

func (r *runner) record(key string, st Step, outcome string) {
	rec := Record{Time: r.e.o.Now(), Outcome: outcome, ErrorClass: string(st.Class),
		From: st.From, To: st.To, Event: st.Event}
	if st.Transition != nil {
		rec.Actions = r.actionNames(st.Transition)
	}
	if outcome == "terminal" || outcome == "retry" || outcome == "pending" {
		rec.To = st.From
		if outcome == "terminal" {
			rec.To = r.m.TerminalState
		}
	}
	if st.Err != nil {
		rec.Error = st.Err.Error()
	}
	r.hist.add(key, rec)
}

// gone reports whether obj no longer exists on the API server (or its name now holds another
// object). A failed read is not proof: the object then counts as present.
func (r *runner) gone(ctx context.Context, obj *unstructured.Unstructured) bool {
	cur, err := r.e.o.Dynamic.Resource(r.m.Resource).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && cur.GetUID() != obj.GetUID()
}

// enterTerminal moves the object into the machine's terminal state: memory mark, conditions
// (when the machine owns status), a Warning event.
func (r *runner) enterTerminal(ctx context.Context, key string, st Step, obj *unstructured.Unstructured) {
	r.terminal.Store(key, terminalMark{uid: obj.GetUID(), generation: obj.GetGeneration()})
	to := r.m.TerminalState
	r.e.o.Observer.Transition(r.m.Name, st.From, to, "error")
	cause := ""
	if st.Err != nil {
		cause = st.Err.Error()
	}
	r.event(obj, corev1.EventTypeWarning, "TerminalError", fmt.Sprintf("%s: %s (%s)", st.Class, truncate(cause, 200), to))
	if !r.m.Status.Conditions {
		return
	}
	obj = obj.DeepCopy()
	before := statusOf(obj)
	var conds []Condition
	for _, c := range r.m.States[to].Conditions {
		conds = append(conds, Condition{Type: c.Type, Status: c.Status, Reason: c.Reason,
			Message: fmt.Sprintf("%s: %s", st.Class, truncate(cause, 256))})
	}
	r.setConditions(obj, conds)
	if _, err := r.writeStatus(ctx, obj, before, false); err != nil {
		r.log.Error().Str("key", key).Err(err).Msg("could not record terminal state in status")
	}
}

// sync runs one level-based pass over the object with key: Decide (pure), then apply — fire
// the transition through looplab/fsm (its callbacks run the actions), set the conditions and
// write status when it changed. It returns the step and the object it worked on.
func (r *runner) sync(ctx context.Context, key string) (Step, *unstructured.Unstructured) {
	cached, u, exists, err := r.own.load(key)
	if err != nil {
		return ErrorStep(r.m, Step{}, err, r.queue.NumRequeues(key)), nil
	}
	if !exists {
		r.hist.forget(key)
		r.terminal.Delete(key)
		if _, cached, _ := r.own.inf.GetStore().GetByKey(key); !cached {
			// Gone, not merely unselected by this machine: another may still await its write.
			r.e.o.Informers.Writes().Forget(r.m.Resource, key)
		}
		r.limiter.Forget(key)
		r.relIndex.forget(key)
		return Step{Outcome: Done}, nil
	}
	if r.stale(u) {
		// The pass that wrote decided on its write, and its echo would be no news
		// (decideAgain): now this pass's cause is news the echo must bring.
		r.e.o.Informers.Writes().PassOnEcho(r.m.Resource, key)
		return Step{Outcome: Done}, nil
	}
	if !r.selected(u.GetLabels()) {
		return Step{Outcome: Done}, nil
	}
	// Deciding only reads the cached object; step gives the actions and conditions a private
	// copy. Most passes fire nothing (an echo of our own write, a claim already allocated)
	// and so neither copy the object nor compare its status.
	in := r.input(ctx, u, cached)
	st := r.step(ctx, &in)
	obj := in.Object
	if obj == u && st.Transition == nil {
		return st, obj
	}
	// Actions that wrote the object itself (finalizers, metadata) hand back its new
	// resourceVersion: wait for the cache to show it before deciding anything else.
	if rv := obj.GetResourceVersion(); rv != u.GetResourceVersion() {
		r.expect(obj, rv)
	}
	// A transition that cannot change status (a Lease renewal) skips comparing the two
	// statuses, a tenth of the node machine's CPU. Pending, blocked without a mapping, retry,
	// terminal: what the actions left in memory is not written.
	wrote := false
	if st.Outcome == Done && (st.Transition == nil || st.Transition.MayChangeStatus() || r.m.Status.Conditions) {
		// An action that removed the last finalizer of a deleting object made it go away.
		if wrote, err = r.writeStatus(ctx, obj, statusView(u), true); err != nil && !(apierrors.IsNotFound(err) && obj.GetDeletionTimestamp() != nil) {
			st = ErrorStep(r.m, st, fmt.Errorf("write status: %w", err), in.Retries)
		}
	}
	if st.Outcome != Done {
		r.passOnEchoes(in.Facts)
		return st, obj
	}
	r.decideAgain(ctx, key, &st, obj, in.Facts, wrote)
	if st.Transition != nil && st.Outcome == Done {
		r.record(key, st, "ok")
		r.e.o.Observer.Transition(r.m.Name, st.From, st.To, st.Event)
		if st.From != st.To {
			if !r.m.NoTransitionEvents {
				r.event(obj, corev1.EventTypeNormal, "Transition", fmt.Sprintf("%s -> %s on %s", st.From, st.To, st.Event))
			}
			r.log.Info().Str("key", key).Str("from", st.From).Str("to", st.To).Str("event", st.Event).Msg("transition")
		}
	}
	return st, obj
}

// decideAgain stands in for the echoes of the pass's own writes, which the informers'
// handlers do not pass on (Writes.Echo): its status write (wroteStatus) and the related
// objects it wrote. Each echo would otherwise cost a second pass over the object only to learn
// when its next timer is due (a Lease renewal; a pod gone Running, whose run-for timer starts).
// The object is decided on again as the pass left it, and requeued for its next timer, or at
// once when a transition is due.
func (r *runner) decideAgain(ctx context.Context, key string, st *Step, obj *unstructured.Unstructured, facts Facts, wroteStatus bool) {
	if f, _ := facts.(*passFacts); !wroteStatus && (f == nil || len(f.wrote) == 0) {
		return
	}
	next := Decide(r.m, r.input(ctx, obj, nil))
	switch {
	case next.Transition != nil || next.Outcome != Done:
		r.add(key)
	case next.RequeueAfter > 0 && (st.RequeueAfter == 0 || next.RequeueAfter < st.RequeueAfter):
		st.RequeueAfter = next.RequeueAfter
	}
}

// passOnEchoes lets the echoes of the related objects a pass wrote through to its watchers:
// the pass did not finish, so it did not decide on what it wrote.
func (r *runner) passOnEchoes(facts Facts) {
	if f, _ := facts.(*passFacts); f != nil {
		for _, k := range f.wrote {
			r.e.o.Informers.Writes().PassOnEcho(k.gvr, k.key)
		}
	}
}

// step is the pass without the status write: Decide, fire the transition (running its
// actions), map a blocked outcome, and set the target state's conditions on in.Object. Before
// anything changes in.Object it is replaced by a copy, so the caller's object (the cache's) is
// never modified; in.Object is still the caller's when no transition that changes objects
// fired (see machine.Transition.ChangesObject) and no condition is set.
// BenchmarkTransition measures it.
func (r *runner) step(ctx context.Context, in *Input) Step {
	st := Decide(r.m, *in)
	if st.Err != nil {
		if b, ok := asBlocked(st.Err); ok {
			st = BlockedStep(r.m, st, b, *in)
		}
		if st.Outcome != Done {
			return st
		}
	}
	copied := false
	if st.Transition != nil {
		if st.Transition.ChangesObject() {
			in.Object, copied = in.Object.DeepCopy(), true
		}
		var data map[string]any
		lazy := func() map[string]any {
			if data == nil {
				data = TemplateData(r.m, *in, nil)
			}
			return data
		}
		f, _ := in.Facts.(*passFacts)
		to, err := r.fire(ctx, in.Object, st, lazy, f)
		if b, ok := asBlocked(err); ok {
			st = BlockedStep(r.m, st, b, *in)
			if st.Outcome != Done {
				return st
			}
		} else if err != nil {
			return ErrorStep(r.m, st, err, in.Retries)
		} else {
			st.To = to
			// Actions may have changed the object: render the conditions it now shows.
			if st.Conditions, err = RenderConditions(r.m, st.To, *in, nil); err != nil {
				return ErrorStep(r.m, st, err, in.Retries)
			}
		}
	}
	// An object resting in a terminal state is left alone; one entering it shows its conditions
	// (they are how the next pass derives it).
	if r.m.Status.Conditions && !r.m.States[st.From].Terminal {
		if !copied {
			in.Object = in.Object.DeepCopy()
		}
		r.setConditions(in.Object, st.Conditions)
	}
	return st
}

func (r *runner) event(obj *unstructured.Unstructured, kind, reason, msg string) {
	if r.e.o.Recorder != nil && obj.GetAPIVersion() != "" && obj.GetKind() != "" {
		r.e.o.Recorder.Event(obj, kind, reason, msg)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
