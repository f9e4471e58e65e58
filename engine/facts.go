package engine

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/engine/machine"
)

// passFacts are the Facts of one pass over one object: observations are called at most once,
// related objects are read from the informer caches once.
type passFacts struct {
	r        *runner
	ctx      context.Context
	obj      *unstructured.Unstructured
	observed map[string]observed
	related  map[string]map[string]any
	// wrote are the related objects the pass's actions wrote (their echoes are not passed on).
	wrote []writeKey
}

type observed struct {
	fact Fact
	err  error
}

func (r *runner) newFacts(ctx context.Context, obj *unstructured.Unstructured) *passFacts {
	return &passFacts{r: r, ctx: ctx, obj: obj, observed: map[string]observed{}, related: map[string]map[string]any{}}
}

func (f *passFacts) Observe(name string) (Fact, error) {
	if o, ok := f.observed[name]; ok {
		return o.fact, o.err
	}
	fn := f.r.e.o.Registry.observations[name]
	var o observed
	o.fact, o.err = fn(f.ctx, f.obj)
	f.observed[name] = o
	return o.fact, o.err
}

func (f *passFacts) Related(name string) map[string]any {
	if o, ok := f.related[name]; ok {
		return o
	}
	var out map[string]any
	if rel, ok := f.r.related[name]; ok {
		if key, ok := rel.key(f.obj); ok {
			f.r.relIndex.link(rel.spec.Resource, key, cacheKey(f.obj))
			o, exists, _ := rel.inf.GetStore().GetByKey(key)
			if !exists {
				o = nil
			}
			// Our own write the cache does not show yet (a pass's apply action): a pass
			// deciding on the older object would write again.
			if w, lags := f.r.e.o.Informers.Writes().Object(rel.spec.Resource, key, o); lags {
				out = w
			} else if exists {
				out = asMap(o)
			}
		}
	}
	f.related[name] = out
	return out
}

// wroteRelated remembers that the pass's action wrote the related object name, leaving it as
// obj with resourceVersion rv; news as Writes.WroteObject.
func (f *passFacts) wroteRelated(name string, key string, rv string, obj map[string]any) (news bool) {
	gvr := f.r.related[name].spec.Resource
	news = f.r.e.o.Informers.Writes().WroteObject(gvr, key, rv, f.r.m.Name, obj)
	f.related[name] = obj
	f.wrote = append(f.wrote, writeKey{gvr, key})
	return news
}

// asMap returns an informer object as JSON-like map (typed and compact objects are converted).
func asMap(o any) map[string]any {
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u.Object
	}
	if c, ok := o.(Compact); ok {
		o = c.ExpandObject()
	}
	if ro, ok := o.(runtime.Object); ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
		if err == nil {
			return m
		}
	}
	return nil
}

// relatedRef is a machine's related object with its informer.
type relatedRef struct {
	spec machine.Related
	inf  cache.SharedIndexInformer
}

// key renders the related object's cache key for obj.
func (rel relatedRef) key(obj *unstructured.Unstructured) (string, bool) {
	data := map[string]any{"object": obj.Object}
	name, err := rel.spec.NameT.RenderString(data)
	if err != nil || name == "" {
		return "", false
	}
	ns := ""
	if rel.spec.NamespaceT != nil {
		if ns, err = rel.spec.NamespaceT.RenderString(data); err != nil {
			return "", false
		}
	}
	return cache.ObjectName{Namespace: ns, Name: name}.String(), true
}

// relIndex maps related objects back to the owners whose passes looked them up, so a change
// of a Lease enqueues its Node. Every owner is passed over at start, which fills it.
type relIndex struct {
	mu     sync.Mutex
	owners map[schema.GroupVersionResource]map[string]map[string]bool
}

func (x *relIndex) link(gvr schema.GroupVersionResource, key, owner string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.owners == nil {
		x.owners = map[schema.GroupVersionResource]map[string]map[string]bool{}
	}
	byKey := x.owners[gvr]
	if byKey == nil {
		byKey = map[string]map[string]bool{}
		x.owners[gvr] = byKey
	}
	if byKey[key] == nil {
		byKey[key] = map[string]bool{}
	}
	byKey[key][owner] = true
}

func (x *relIndex) ownersOf(gvr schema.GroupVersionResource, key string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for o := range x.owners[gvr][key] {
		out = append(out, o)
	}
	return out
}

// forget drops owner from the index (the owner is gone).
func (x *relIndex) forget(owner string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, byKey := range x.owners {
		for k, owners := range byKey {
			delete(owners, owner)
			if len(owners) == 0 {
				delete(byKey, k)
			}
		}
	}
}
