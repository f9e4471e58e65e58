// Package engine runs CUE-defined state machines (engine/machine) against Kubernetes objects:
// dynamic informers feed one typed workqueue per machine; each sync re-derives the object's
// state, fires the first permitted event through looplab/fsm, runs the transition's driver
// actions, writes status only when it changed, and applies the machine's backoff table to errors.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
				for r.processNext(ctx) {
				}
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
	obj, exists, err := r.inf.GetStore().GetByKey(key)
	if err != nil || !exists {
		return "", fmt.Errorf("%s %s: %w", machineName, key, ErrObjectNotFound)
	}
	return r.derive(ctx, obj.(*unstructured.Unstructured))
}

type runner struct {
	e       *Engine
	m       *machine.Machine
	inf     cache.SharedIndexInformer
	queue   workqueue.TypedRateLimitingInterface[string]
	limiter *backoffLimiter[string]
	hist    *history
	log     zerolog.Logger
	// terminal remembers objects that hit a terminal error, per UID and generation, so a
	// machine without status conditions (or whose terminal status write failed) stays terminal
	// until the object changes.
	terminal sync.Map // key -> terminalMark
	// written holds the resourceVersion of our last status write per key (see expect).
	written sync.Map
}

type terminalMark struct {
	uid        types.UID
	generation int64
}

func newRunner(e *Engine, m *machine.Machine) (*runner, error) {
	if e.o.Informers.IsTyped(m.Resource) {
		// Actions, observations and status writes work on unstructured objects.
		return nil, fmt.Errorf("machine %s: resource %s is cached typed", m.Name, m.Resource)
	}
	r := &runner{
		e: e, m: m,
		inf:     e.o.Informers.For(m.Resource),
		limiter: newBackoffLimiter[string](m.Backoff),
		hist:    newHistory(m.HistoryLimit),
		log:     e.o.Log.With().Str("machine", m.Name).Logger(),
	}
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig[string](r.limiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: m.Name})
	e.o.Informers.Notify(m.Resource, cache.ResourceEventHandlerFuncs{
		AddFunc: r.enqueueObj,
		UpdateFunc: func(old, cur any) {
			// Resyncs and no-op updates carry the same resourceVersion: nothing to do.
			if o, c := ObjectMeta(old), ObjectMeta(cur); o != nil && c != nil && o.GetResourceVersion() == c.GetResourceVersion() {
				return
			}
			r.enqueueObj(cur)
		},
		DeleteFunc: r.enqueueObj,
	})
	for _, t := range m.Triggers {
		mapFn, err := r.triggerMapper(t)
		if err != nil {
			return nil, err
		}
		handler := func(obj any) {
			if o := ObjectMeta(obj); o != nil {
				for _, k := range mapFn(o) {
					r.add(k)
				}
			}
		}
		h := cache.ResourceEventHandlerFuncs{
			AddFunc:    handler,
			UpdateFunc: func(_, cur any) { handler(cur) },
			DeleteFunc: handler,
		}
		if t.Name != "" {
			if _, err := e.o.Informers.ForName(t.Resource, t.Name).AddEventHandler(h); err != nil {
				return nil, err
			}
			continue
		}
		e.o.Informers.Notify(t.Resource, h)
	}
	return r, nil
}

func (r *runner) triggerMapper(t machine.Trigger) (func(metav1.Object) []string, error) {
	switch t.Map {
	case "all":
		return func(metav1.Object) []string { return r.inf.GetStore().ListKeys() }, nil
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

func (r *runner) enqueueObj(obj any) {
	if u := ObjectMeta(obj); u != nil {
		r.add(cache.ObjectName{Namespace: u.GetNamespace(), Name: u.GetName()}.String())
	}
}

func (r *runner) add(key string) {
	r.queue.Add(key)
	r.e.o.Observer.QueueDepth(r.m.Name, r.queue.Len())
}

func (r *runner) enqueueAll() {
	for _, k := range r.inf.GetStore().ListKeys() {
		r.add(k)
	}
}

// attempt describes what one sync tried, for history, metrics and error handling.
type attempt struct {
	from, to, event string
	actions         []string
	uid             types.UID
	generation      int64
	obj             *unstructured.Unstructured
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
	r.e.o.Observer.SyncStarted(r.m.Name)
	start := time.Now()
	at, err := r.sync(ctx, key)
	var pending *PendingError
	if errors.As(err, &pending) {
		r.e.o.Observer.SyncFinished(r.m.Name, time.Since(start), nil) // waiting is not an error
	} else {
		r.e.o.Observer.SyncFinished(r.m.Name, time.Since(start), err)
	}
	r.handle(ctx, key, at, err)
	return true
}

// handle applies the queue policy: success forgets the key (and requeues after the state's
// requeueAfter), Pending waits without counting a retry, retryable classes back off until
// maxRetries, everything else becomes terminal.
func (r *runner) handle(ctx context.Context, key string, at *attempt, err error) {
	var pending *PendingError
	switch {
	case err == nil:
		r.queue.Forget(key)
		if at != nil {
			r.requeueAfter(key, at.to)
		}
	case errors.As(err, &pending):
		r.queue.Forget(key)
		r.record(key, at, "pending", err, "")
		r.requeueAfter(key, at.from)
	case ctx.Err() != nil:
		// Cut off by shutdown: the next leader picks the key up; nothing to count.
	default:
		class := Classify(err)
		if !r.m.Backoff.IsTerminal(class) && r.queue.NumRequeues(key) < r.m.Backoff.MaxRetries {
			r.e.o.Observer.Retry(r.m.Name, class)
			r.record(key, at, "retry", err, class)
			r.log.Debug().Str("key", key).Str("class", string(class)).Err(err).Msg("retrying")
			r.queue.AddRateLimited(key)
			return
		}
		r.queue.Forget(key)
		r.e.o.Observer.Terminal(r.m.Name, class)
		r.record(key, at, "terminal", err, class)
		r.log.Error().Str("key", key).Str("class", string(class)).Err(err).Msg("terminal error")
		if at != nil && at.obj != nil {
			r.enterTerminal(ctx, key, at, err, class)
		}
	}
}

func (r *runner) requeueAfter(key, state string) {
	if d := r.m.States[state].RequeueAfter; d > 0 {
		r.queue.AddAfter(key, d)
	}
}

func (r *runner) record(key string, at *attempt, outcome string, err error, class machine.ErrorClass) {
	rec := Record{Time: r.e.o.Now(), Outcome: outcome, ErrorClass: string(class)}
	if at != nil {
		rec.From, rec.To, rec.Event, rec.Actions = at.from, at.to, at.event, at.actions
	}
	if err != nil {
		rec.Error = err.Error()
	}
	r.hist.add(key, rec)
}

// enterTerminal moves the object into the machine's terminal state: memory mark, conditions
// (when the machine owns status), a Warning event.
func (r *runner) enterTerminal(ctx context.Context, key string, at *attempt, cause error, class machine.ErrorClass) {
	r.terminal.Store(key, terminalMark{uid: at.uid, generation: at.generation})
	to := r.m.TerminalState
	r.e.o.Observer.Transition(r.m.Name, at.from, to, "error")
	r.event(at.obj, corev1.EventTypeWarning, "TerminalError", fmt.Sprintf("%s: %s (%s)", class, truncate(cause.Error(), 200), to))
	if !r.m.Status.Conditions {
		return
	}
	obj := at.obj.DeepCopy()
	before := statusOf(obj)
	r.setConditions(obj, to, fmt.Sprintf("%s: %s", class, truncate(cause.Error(), 256)))
	if err := r.writeStatus(ctx, obj, before); err != nil {
		r.log.Error().Str("key", key).Err(err).Msg("could not record terminal state in status")
	}
}

// sync runs one level-based pass over the object with key.
func (r *runner) sync(ctx context.Context, key string) (*attempt, error) {
	cached, exists, err := r.inf.GetStore().GetByKey(key)
	if err != nil {
		return nil, err
	}
	if !exists {
		r.hist.forget(key)
		r.terminal.Delete(key)
		r.written.Delete(key)
		r.limiter.Forget(key)
		return nil, nil
	}
	if r.stale(cached.(*unstructured.Unstructured)) {
		return nil, nil
	}
	// Never modify the cache: actions get a private copy.
	obj := cached.(*unstructured.Unstructured).DeepCopy()
	ctx = withPass(ctx)
	at := &attempt{uid: obj.GetUID(), generation: obj.GetGeneration(), obj: obj}
	if at.from, err = r.derive(ctx, obj); err != nil {
		return at, err
	}
	at.to = at.from
	if r.m.States[at.from].Terminal {
		return at, nil
	}
	f := r.m.NewFSM(at.from)
	ev, err := r.pickEvent(ctx, obj, func(name string) bool { return f.Can(name) })
	if err != nil {
		return at, err
	}
	before := statusOf(obj)
	var note string
	ctx = context.WithValue(ctx, noteKey{}, &note)
	if ev != "" {
		at.event = ev
		at.actions = r.transition(ev, at.from).Actions
		for _, name := range at.actions {
			if err := r.e.o.Registry.actions[name](ctx, obj); err != nil {
				return at, fmt.Errorf("action %s: %w", name, err)
			}
		}
		if err := f.Event(ctx, ev); err != nil && !isNoTransition(err) {
			return at, err
		}
		at.to = f.Current()
		// Actions that wrote the object itself (finalizers) hand back its new resourceVersion:
		// wait for the cache to show it before deciding anything else about this object.
		if rv := obj.GetResourceVersion(); rv != cached.(*unstructured.Unstructured).GetResourceVersion() {
			r.expect(obj, rv)
		}
	}
	if r.m.Status.Conditions && (ev != "" || !r.showsState(obj, at.to)) {
		r.setConditions(obj, at.to, note)
		if err := r.writeStatus(ctx, obj, before); err != nil {
			// An action that removed the last finalizer of a deleting object made it go away.
			if !(apierrors.IsNotFound(err) && obj.GetDeletionTimestamp() != nil) {
				return at, fmt.Errorf("write status: %w", err)
			}
		}
	}
	if ev != "" {
		r.record(key, at, "ok", nil, "")
		r.e.o.Observer.Transition(r.m.Name, at.from, at.to, ev)
		if at.from != at.to {
			r.event(obj, corev1.EventTypeNormal, "Transition", fmt.Sprintf("%s -> %s on %s", at.from, at.to, ev))
			r.log.Info().Str("key", key).Str("from", at.from).Str("to", at.to).Str("event", ev).Msg("transition")
		}
	}
	return at, nil
}

// derive returns the object's current state: a terminal mark for this generation, else the
// first matching derive rule, else the initial state.
func (r *runner) derive(ctx context.Context, obj *unstructured.Unstructured) (string, error) {
	key := cacheKey(obj)
	if v, ok := r.terminal.Load(key); ok {
		if mark := v.(terminalMark); mark.uid == obj.GetUID() && mark.generation == obj.GetGeneration() {
			return r.m.TerminalState, nil
		}
		r.terminal.Delete(key)
	}
	for _, d := range r.m.Derive {
		ok, err := r.test(ctx, obj, d.When)
		if err != nil {
			return "", err
		}
		if ok {
			return d.State, nil
		}
	}
	return r.m.Initial, nil
}

// pickEvent returns the first event, in declaration order, that is permitted from the current
// state and whose test holds ("" when none).
func (r *runner) pickEvent(ctx context.Context, obj *unstructured.Unstructured, can func(string) bool) (string, error) {
	for _, ev := range r.m.Events {
		if !can(ev.Name) {
			continue
		}
		ok, err := r.test(ctx, obj, ev.When)
		if err != nil {
			return "", fmt.Errorf("event %s: %w", ev.Name, err)
		}
		if ok {
			return ev.Name, nil
		}
	}
	return "", nil
}

func (r *runner) transition(event, from string) machine.Transition {
	for _, t := range r.m.Transitions {
		if t.Event != event {
			continue
		}
		for _, f := range t.From {
			if f == from {
				return t
			}
		}
	}
	return machine.Transition{}
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
