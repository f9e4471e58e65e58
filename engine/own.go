package engine

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/engine/machine"
)

// Selectable says how the shared typed cache of a resource serves the machines that select
// some of its objects (see Informers.Selectable), so those objects are watched and cached once.
type Selectable struct {
	// Fields returns the fields a machine's field selector may test on a cached object (any
	// form the cache holds), as the API server's field selectors name them.
	Fields func(obj any) fields.Set
	// Full prunes a typed object some machine selects to what machines read: it is cached in
	// this form instead of the shrunk one (see CacheTyped).
	Full func(runtime.Object) runtime.Object
}

// Selectable makes machines with a selector on gvr read its shared typed informer (see
// ListTyped) instead of a JSON informer of their own: the objects they select are cached in
// s.Full's form, the rest as CacheTyped shrinks them, and each pass converts its object to
// unstructured. Without it, such a machine lists and watches its objects a second time. Call
// it before the machines' runners are created.
func (i *Informers) Selectable(gvr schema.GroupVersionResource, s Selectable) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.selectable[gvr] = s
}

// selects registers match, a machine's selection of gvr's objects, with the cache transform
// that keeps the selected objects in full form.
func (i *Informers) selects(gvr schema.GroupVersionResource, match func(obj any) bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.selections[gvr] = append(i.selections[gvr], match)
}

// full reports whether some machine selects obj (a typed object being cached), and its full form.
func (i *Informers) full(gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, bool) {
	i.mu.Lock()
	s, ok := i.selectable[gvr]
	matches := i.selections[gvr]
	i.mu.Unlock()
	if !ok {
		return nil, false
	}
	for _, m := range matches {
		if m(obj) {
			return s.Full(obj), true
		}
	}
	return nil, false
}

// own is a machine's view of its own objects, as unstructured objects.
type own struct {
	inf cache.SharedIndexInformer
	// match, when not nil, picks the machine's objects out of inf, the resource's shared typed
	// informer, whose objects are converted on each read.
	match func(obj any) bool
}

// ownObjects returns the informer of m's own objects: the resource's shared typed informer
// when it is Selectable (the machine's selector then runs here, client-side), else an
// unstructured informer of the selected objects (label and field selectors on the server),
// else the resource's shared informer, which must then be cached unstructured.
func ownObjects(inf *Informers, m *machine.Machine) (*own, error) {
	if m.Optional {
		inf.Optional(m.Resource, nil)
	}
	if !m.HasSelector() {
		if inf.IsTyped(m.Resource) {
			// Actions, observations and status writes work on unstructured objects.
			return nil, fmt.Errorf("machine %s: resource %s is cached typed (give the machine a selector)", m.Name, m.Resource)
		}
		return &own{inf: inf.For(m.Resource)}, nil
	}
	inf.mu.Lock()
	s, shared := inf.selectable[m.Resource]
	_, listed := inf.listers[m.Resource]
	apiType := inf.apiTypes[m.Resource]
	inf.mu.Unlock()
	if !shared || !listed || apiType == nil {
		return &own{inf: inf.ForSelector(m.Resource, m.LabelSelector(), m.FieldSelector)}, nil
	}
	fieldSel, err := fields.ParseSelector(m.FieldSelector)
	if err != nil {
		return nil, fmt.Errorf("machine %s: field selector %q: %w", m.Name, m.FieldSelector, err)
	}
	// A field the cache cannot tell would select nothing, silently: refuse it.
	known := s.Fields(apiType())
	for _, r := range fieldSel.Requirements() {
		if _, ok := known[r.Field]; !ok {
			names := make([]string, 0, len(known))
			for k := range known {
				names = append(names, k)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("machine %s: field selector %q: %s is not a selectable field of %s (selectable: %s)",
				m.Name, m.FieldSelector, r.Field, m.Resource.Resource, strings.Join(names, ", "))
		}
	}
	labelSel := m.LabelSelector()
	fullType := reflect.TypeOf(apiType())
	o := &own{inf: inf.For(m.Resource)}
	selects := func(obj any) bool {
		meta := ObjectMeta(obj)
		return meta != nil && labelSel.Matches(labels.Set(meta.GetLabels())) && fieldSel.Matches(s.Fields(unwrap(obj)))
	}
	inf.selects(m.Resource, selects)
	o.match = func(obj any) bool {
		obj = unwrap(obj)
		// Only objects in full form: any other was cached before a machine selected it.
		return reflect.TypeOf(obj) == fullType && selects(obj)
	}
	return o, nil
}

// get returns the machine's object with key, unstructured; exists is false for an object
// in the shared cache that the machine does not select.
func (o *own) get(key string) (u *unstructured.Unstructured, exists bool, err error) {
	_, u, exists, err = o.load(key)
	return u, exists, err
}

// load is get that also returns the object as the cache holds it.
func (o *own) load(key string) (cached any, u *unstructured.Unstructured, exists bool, err error) {
	cached, exists, err = o.inf.GetStore().GetByKey(key)
	if err != nil || !exists {
		return nil, nil, false, err
	}
	u, exists, err = o.unstructured(cached)
	return cached, u, exists, err
}

// unstructured returns obj, an object of o's informer, as the machine sees it.
func (o *own) unstructured(obj any) (*unstructured.Unstructured, bool, error) {
	if o.match == nil {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, false, fmt.Errorf("cached as %T", obj)
		}
		return u, true, nil
	}
	if !o.match(obj) {
		return nil, false, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(unwrap(obj))
	if err != nil {
		return nil, false, err
	}
	return &unstructured.Unstructured{Object: m}, true, nil
}

// keys returns the keys of the machine's objects.
func (o *own) keys() []string {
	if o.match == nil {
		return o.inf.GetStore().ListKeys()
	}
	var out []string
	for _, obj := range o.inf.GetStore().List() {
		if o.match(obj) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				out = append(out, key)
			}
		}
	}
	return out
}

// handler filters h to the machine's objects: an update of an object that stops being
// selected is passed on (its pass forgets it), as a selector informer sees it deleted.
func (o *own) handler(h cache.ResourceEventHandlerFuncs) cache.ResourceEventHandler {
	if o.match == nil {
		return h
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o.match(obj) {
				h.AddFunc(obj)
			}
		},
		UpdateFunc: func(old, cur any) {
			if o.match(cur) {
				h.UpdateFunc(old, cur)
			} else if o.match(old) {
				h.DeleteFunc(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if o.match(obj) {
				h.DeleteFunc(obj)
			}
		},
	}
}

func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
