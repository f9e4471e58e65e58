package engine

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
)

// Informers is the one set of shared informers the engine and the drivers read from: dynamic,
// except for the resources listed through a typed client (see ListTyped).
// Every informer strips managedFields before caching, which is most of an object's size.
// Objects are *unstructured.Unstructured, except for resources registered with CacheTyped;
// code that reads objects of any resource uses meta.Accessor.
type Informers struct {
	client  dynamic.Interface
	factory dynamicinformer.DynamicSharedInformerFactory
	mu      sync.Mutex
	byGVR   map[schema.GroupVersionResource]cache.SharedIndexInformer
	// scoped are informers over one namespace or one object (metadata.name field selector),
	// keyed by scopeKey; each has its own factory because namespace and selector apply
	// factory-wide.
	scoped map[string]scopedInformer
	// labelled are unstructured informers over the objects matching a label selector (see
	// ForLabels), keyed by "gvr?selector".
	labelled  map[string]cache.SharedIndexInformer
	factories []dynamicinformer.DynamicSharedInformerFactory
	// dispatch runs every handler of one informer in one goroutine, feeders first, so a
	// machine triggered by an event reads driver stores that already contain it.
	dispatch map[schema.GroupVersionResource]*dispatcher
	// handlers are the event handlers registered through the Informers; WaitSynced also waits
	// until each has been handed its informer's initial list.
	handlers []cache.ResourceEventHandlerRegistration
	// typed are the resources cached as typed objects instead of unstructured (see CacheTyped).
	typed map[schema.GroupVersionResource]cache.TransformFunc
	// optional are the resources the API server may not serve (see Optional).
	optional *optionalSet
	// apiTypes make an empty object of each resource cached typed (see CacheTyped).
	apiTypes map[schema.GroupVersionResource]func() runtime.Object
	// listers are the resources For lists and watches through a typed client (see ListTyped);
	// own are the informers built over them, which no factory starts.
	listers map[schema.GroupVersionResource]cache.ListerWatcher
	own     []cache.SharedIndexInformer
	// scopedListers are the resources ForName and ForNamespace list and watch through a typed
	// client (see ListTypedScoped).
	scopedListers map[schema.GroupVersionResource]ScopedLister
	// selectable are the typed resources whose shared informer serves machines with a
	// selector, and selections those machines' selections (see Selectable).
	selectable map[schema.GroupVersionResource]Selectable
	selections map[schema.GroupVersionResource][]func(obj any) bool
	// writes are this process's writes the caches have not shown yet.
	writes Writes
}

// Writes is the memory of this process's own writes that these informers' caches lag (see
// Writes): one for the machines and the drivers.
func (i *Informers) Writes() *Writes { return &i.writes }

// NewInformers returns informers over client with no periodic resync: the engine is event-driven.
// Their lists and watches wait out an unreachable API server instead of backing off (see
// reconnecting).
func NewInformers(client dynamic.Interface) *Informers {
	optional := &optionalSet{onMissing: map[schema.GroupVersionResource]func(error){}, missing: map[schema.GroupVersionResource]error{}}
	if client != nil {
		client = optionalClient{Interface: reconnecting{client}, set: optional}
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(client, 0)
	return &Informers{
		client:    client,
		factory:   f,
		byGVR:     map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		scoped:    map[string]scopedInformer{},
		labelled:  map[string]cache.SharedIndexInformer{},
		factories: []dynamicinformer.DynamicSharedInformerFactory{f},
		dispatch:  map[schema.GroupVersionResource]*dispatcher{},
		typed:     map[schema.GroupVersionResource]cache.TransformFunc{},
		optional:  optional,
		apiTypes:  map[schema.GroupVersionResource]func() runtime.Object{},
		listers:   map[schema.GroupVersionResource]cache.ListerWatcher{},

		scopedListers: map[schema.GroupVersionResource]ScopedLister{},

		selectable: map[schema.GroupVersionResource]Selectable{},
		selections: map[schema.GroupVersionResource][]func(obj any) bool{},
	}
}

// CacheTyped makes the informers of gvr cache typed objects (newObj's type) instead of
// *unstructured.Unstructured: each object is converted once, when it enters the cache, so the
// drivers' typed stores can hold the informer's own pointers instead of a second copy. shrink,
// if not nil, returns what is cached instead of the typed object: the object itself with the
// fields nobody reads cleared, or a Compact form of it. Cached objects are shared and must
// never be mutated. Call it before Start, and for resources whose informer was already created
// before any handler sees an object.
func (i *Informers) CacheTyped(gvr schema.GroupVersionResource, newObj func() runtime.Object, shrink func(runtime.Object) runtime.Object) {
	apiType := reflect.TypeOf(newObj())
	// A typed client's decoder leaves apiVersion and kind empty; objects converted from
	// unstructured keep them, and so do these (serve's views show them).
	var gvk schema.GroupVersionKind
	if kinds, _, err := kubescheme.Scheme.ObjectKinds(newObj()); err == nil && len(kinds) > 0 {
		gvk = kinds[0]
	}
	transform := func(obj any) (any, error) {
		var out runtime.Object
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			out = newObj()
			// Interned first: the typed object takes its strings from the map.
			internObject(o.Object)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				return nil, fmt.Errorf("%s %s: %w", gvr, o.GetName(), err)
			}
		case runtime.Object:
			if reflect.TypeOf(o) != apiType {
				return stripManagedFields(obj) // already in cache form
			}
			out = o // decoded by a typed client (ListTyped)
			if out.GetObjectKind().GroupVersionKind().Empty() {
				out.GetObjectKind().SetGroupVersionKind(gvk)
			}
		default:
			return stripManagedFields(obj)
		}
		// Cleared first, so a compact form never copies them.
		if _, err := stripManagedFields(out); err != nil {
			return nil, err
		}
		if full, ok := i.full(gvr, out); ok {
			out = full
		} else if shrink != nil {
			out = shrink(out)
		}
		return out, nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.typed[gvr], i.apiTypes[gvr] = transform, newObj
	if inf, ok := i.byGVR[gvr]; ok {
		_ = inf.SetTransform(transform)
	}
	for _, s := range i.scoped {
		if s.gvr == gvr {
			_ = s.inf.SetTransform(transform)
		}
	}
}

// ListTyped makes For(gvr) list and watch gvr through lw, a typed client's, instead of the
// dynamic client: a typed client can ask for protobuf, cheaper than JSON for the API server to
// encode and for the informer to decode, and its objects need no conversion from unstructured.
// gvr must be cached typed (CacheTyped) with lw's type. Like the dynamic client's, lw's lists
// and watches wait out an unreachable API server. The informers of ForName, ForNamespace and
// ForSelector stay dynamic. Call it before For(gvr).
func (i *Informers) ListTyped(gvr schema.GroupVersionResource, lw cache.ListerWatcher) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.listers[gvr] = reconnectingLW{lw}
}

// ScopedLister returns a typed client's lister and watcher of a resource in namespace ("" for
// all), with tweak applied to its list options.
type ScopedLister func(namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher

// ListTypedScoped is ListTyped for the informers of ForName and ForNamespace over gvr (the node
// machine's Leases in kube-node-lease): protobuf instead of JSON on both ends of their watches.
// gvr must be cached typed (CacheTyped) with the lister's type. Call it before those informers
// are created.
func (i *Informers) ListTypedScoped(gvr schema.GroupVersionResource, lw ScopedLister) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.scopedListers[gvr] = lw
}

// IsTyped reports whether gvr is cached typed (see CacheTyped).
func (i *Informers) IsTyped(gvr schema.GroupVersionResource) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	_, ok := i.typed[gvr]
	return ok
}

// transform is the transform of gvr's informers; the caller holds mu.
func (i *Informers) transform(gvr schema.GroupVersionResource) cache.TransformFunc {
	if t, ok := i.typed[gvr]; ok {
		return t
	}
	return stripManagedFields
}

// scopedInformer is an informer over one namespace or one object of gvr.
type scopedInformer struct {
	gvr schema.GroupVersionResource
	inf cache.SharedIndexInformer
}

// ForName returns an informer over the single object of gvr called name in namespace (""
// means a cluster-scoped object, or that name in every namespace), creating it on first use.
// It lists and watches with a metadata.name field selector, which RBAC authorizes against
// resourceNames, in that namespace only, so a Role there is enough. Call it before Start.
func (i *Informers) ForName(gvr schema.GroupVersionResource, namespace, name string) cache.SharedIndexInformer {
	return i.scopedFor(gvr, namespace, name)
}

// ForNamespace returns an informer over the objects of gvr in namespace, creating it on first
// use. It lists and watches only there, so RBAC may grant it with a Role in that namespace
// (the node machine's Leases in kube-node-lease). Call it before Start.
func (i *Informers) ForNamespace(gvr schema.GroupVersionResource, namespace string) cache.SharedIndexInformer {
	return i.scopedFor(gvr, namespace, "")
}

func (i *Informers) scopedFor(gvr schema.GroupVersionResource, namespace, name string) cache.SharedIndexInformer {
	i.mu.Lock()
	defer i.mu.Unlock()
	key := gvr.String() + " namespace=" + namespace + " name=" + name
	if s, ok := i.scoped[key]; ok {
		return s.inf
	}
	var tweak dynamicinformer.TweakListOptionsFunc
	if name != "" {
		tweak = func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}
	}
	var inf cache.SharedIndexInformer
	if lw, ok := i.scopedListers[gvr]; ok {
		if tweak == nil {
			tweak = func(*metav1.ListOptions) {}
		}
		inf = i.typedInformer(gvr, reconnectingLW{lw(namespace, tweak)})
	} else {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(i.client, 0, namespace, tweak)
		inf = f.ForResource(gvr).Informer()
		i.factories = append(i.factories, f)
	}
	_ = inf.SetTransform(i.transform(gvr))
	i.scoped[key] = scopedInformer{gvr: gvr, inf: inf}
	return inf
}

// ForLabels returns an informer over the objects of gvr carrying all the labels, creating it on
// first use. It lists and watches with that label selector, so a machine with a selector (the
// node machine: only simulated Nodes) caches only its own objects, and it always caches
// unstructured objects (with every field), even for a resource drivers cache typed and pruned.
// Call it before Start.
func (i *Informers) ForLabels(gvr schema.GroupVersionResource, selector map[string]string) cache.SharedIndexInformer {
	return i.ForSelector(gvr, labels.SelectorFromSet(selector), "")
}

// ForSelector is ForLabels with a field selector as well (e.g. "spec.nodeName!=": only bound
// pods); an empty fieldSelector selects by labels only.
func (i *Informers) ForSelector(gvr schema.GroupVersionResource, selector labels.Selector, fieldSelector string) cache.SharedIndexInformer {
	i.mu.Lock()
	defer i.mu.Unlock()
	sel := selector.String()
	key := gvr.String() + "?" + sel + "&" + fieldSelector
	if inf, ok := i.labelled[key]; ok {
		return inf
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(i.client, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = sel, fieldSelector
	})
	inf := f.ForResource(gvr).Informer()
	_ = inf.SetTransform(stripManagedFields)
	i.labelled[key] = inf
	i.factories = append(i.factories, f)
	return inf
}

// typedInformer is an informer of gvr over lw, a typed client's, which no factory starts (Start
// does); the caller holds mu.
func (i *Informers) typedInformer(gvr schema.GroupVersionResource, lw cache.ListerWatcher) cache.SharedIndexInformer {
	var example runtime.Object // the reflector's expected type: nil checks none
	if newObj := i.apiTypes[gvr]; newObj != nil {
		example = newObj()
	}
	// The dynamic factory's informers index by namespace; so does this one.
	inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	i.own = append(i.own, inf)
	return inf
}

// For returns the informer of gvr, creating it on first use. Call it before Start.
func (i *Informers) For(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	i.mu.Lock()
	defer i.mu.Unlock()
	if inf, ok := i.byGVR[gvr]; ok {
		return inf
	}
	var inf cache.SharedIndexInformer
	if lw, ok := i.listers[gvr]; ok {
		inf = i.typedInformer(gvr, lw)
	} else {
		inf = i.factory.ForResource(gvr).Informer()
	}
	_ = inf.SetTransform(i.transform(gvr))
	d := &dispatcher{}
	if reg, err := inf.AddEventHandler(d); err == nil {
		i.handlers = append(i.handlers, reg)
	}
	i.byGVR[gvr], i.dispatch[gvr] = inf, d
	return inf
}

// AddHandler registers h on inf (one of these informers) and makes WaitSynced wait until h has
// been handed the initial list. Call it before Start.
func (i *Informers) AddHandler(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return err
	}
	i.mu.Lock()
	i.handlers = append(i.handlers, reg)
	i.mu.Unlock()
	return nil
}

// Feed registers a handler that keeps a driver's own store up to date; feeders of an informer
// run before its Notify handlers. Call it before Start.
func (i *Informers) Feed(gvr schema.GroupVersionResource, h cache.ResourceEventHandler) {
	i.For(gvr)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.dispatch[gvr].add(h, true)
}

// Notify registers a handler that reacts to changes (enqueues work). Call it before Start.
func (i *Informers) Notify(gvr schema.GroupVersionResource, h cache.ResourceEventHandler) {
	i.For(gvr)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.dispatch[gvr].add(h, false)
}

type dispatcher struct {
	mu       sync.RWMutex
	handlers []cache.ResourceEventHandler
	feeders  int // handlers[:feeders] are feeders
}

func (d *dispatcher) add(h cache.ResourceEventHandler, feeder bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if feeder {
		d.handlers = append(d.handlers[:d.feeders], append([]cache.ResourceEventHandler{h}, d.handlers[d.feeders:]...)...)
		d.feeders++
		return
	}
	d.handlers = append(d.handlers, h)
}

func (d *dispatcher) each(fn func(cache.ResourceEventHandler)) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, h := range d.handlers {
		fn(h)
	}
}

func (d *dispatcher) OnAdd(obj any, initial bool) {
	d.each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, initial) })
}
func (d *dispatcher) OnUpdate(old, cur any) {
	d.each(func(h cache.ResourceEventHandler) { h.OnUpdate(old, cur) })
}
func (d *dispatcher) OnDelete(obj any) {
	d.each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}

// Start runs every informer created so far and waits for their caches to fill.
func (i *Informers) Start(ctx context.Context) error {
	i.mu.Lock()
	factories := slices.Clone(i.factories)
	own := slices.Clone(i.own)
	i.own = nil // started once
	i.mu.Unlock()
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	synced := make([]cache.InformerSynced, len(own))
	for k, inf := range own {
		go inf.RunWithContext(ctx)
		synced[k] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("typed caches did not sync")
	}
	for _, f := range factories {
		for gvr, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("cache of %s did not sync", gvr)
			}
		}
	}
	return nil
}

// all returns every informer; the caller holds mu.
func (i *Informers) all() []cache.SharedIndexInformer {
	out := make([]cache.SharedIndexInformer, 0, len(i.byGVR)+len(i.scoped)+len(i.labelled))
	for _, inf := range i.byGVR {
		out = append(out, inf)
	}
	for _, s := range i.scoped {
		out = append(out, s.inf)
	}
	for _, inf := range i.labelled {
		out = append(out, inf)
	}
	return out
}

// WaitSynced blocks until every informer has synced and its handlers have been handed the
// initial list; false when ctx ended first. Workers started after it see one enqueue per key
// for the whole initial list, not a pass per event still in flight to a trigger (a pool of
// 1,000 nodes was planned again for every slice delivered after its first pass).
func (i *Informers) WaitSynced(ctx context.Context) bool {
	i.mu.Lock()
	var synced []cache.InformerSynced
	for _, inf := range i.all() {
		synced = append(synced, inf.HasSynced)
	}
	for _, reg := range i.handlers {
		synced = append(synced, reg.HasSynced)
	}
	i.mu.Unlock()
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Synced reports whether every informer has synced (for readiness).
func (i *Informers) Synced() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, inf := range i.all() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// Count is the number of cached objects across informers (for memory measurements).
func (i *Informers) Count() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	n := 0
	for _, inf := range i.all() {
		n += len(inf.GetStore().ListKeys())
	}
	return n
}

// stripManagedFields is every informer's transform: it drops managedFields and interns an
// unstructured object's keys and shared strings (see internObject).
func stripManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		internObject(u.Object)
		return u, nil
	}
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// Compact is a cache form that is smaller than the API type it stands for (see CacheTyped).
type Compact interface {
	runtime.Object
	// ExpandObject returns the API object, a new one on each call.
	ExpandObject() runtime.Object
}

// UnstructuredDecoder is implemented by a Compact type, so Typed can build it from an object
// that was cached unstructured.
type UnstructuredDecoder interface {
	DecodeUnstructured(*unstructured.Unstructured) error
}

// Typed converts an informer object (possibly a delete tombstone) to the typed form T. An object
// already cached as *T (see CacheTyped) is returned as is, not copied: callers must not mutate
// it. A Compact object is expanded when T is its API type.
func Typed[T any](obj any) (*T, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if t, ok := obj.(*T); ok {
		return t, t != nil
	}
	if c, ok := obj.(Compact); ok {
		t, ok := any(c.ExpandObject()).(*T)
		return t, ok && t != nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	out := new(T)
	if d, ok := any(out).(UnstructuredDecoder); ok {
		return out, d.DecodeUnstructured(u) == nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, false
	}
	return out, true
}

// Feed keeps a typed store up to date from the informer of gvr (see Informers.Feed).
func Feed[T any](i *Informers, gvr schema.GroupVersionResource, upsert, remove func(*T)) {
	i.Feed(gvr, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if t, ok := Typed[T](obj); ok {
				upsert(t)
			}
		},
		UpdateFunc: func(_, obj any) {
			if t, ok := Typed[T](obj); ok {
				upsert(t)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := Typed[T](obj); ok {
				remove(t)
			}
		},
	})
}
