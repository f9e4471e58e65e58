package clusterview

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/engine"
)

// Objects are the allocator's inputs besides claims (allocator.Objects) read straight from the
// informers' caches, in the forms Forms gives them: compact slices, typed classes,
// pruned nodes, typed DeviceTaintRules. Nothing is mirrored, and a pass started by an event
// sees the object of that event (an informer updates its store before it notifies).
type Objects struct {
	slices, classes, nodes, taintRules cache.Store
}

// NewObjects returns the view over inf's informers (created when missing).
func NewObjects(inf *engine.Informers) *Objects {
	return &Objects{
		slices:     inf.For(gvr.ResourceSlices).GetStore(),
		classes:    inf.For(gvr.DeviceClasses).GetStore(),
		nodes:      inf.For(gvr.Nodes).GetStore(),
		taintRules: inf.For(gvr.DeviceTaintRules).GetStore(),
	}
}

// Slices returns every cached ResourceSlice.
func (o *Objects) Slices() []*compactslice.Slice { return list[compactslice.Slice](o.slices) }

// Classes returns every cached DeviceClass.
func (o *Objects) Classes() []*resourcev1.DeviceClass { return list[resourcev1.DeviceClass](o.classes) }

// Nodes returns every cached Node.
func (o *Objects) Nodes() []*corev1.Node { return list[corev1.Node](o.nodes) }

// TaintRules returns every cached DeviceTaintRule.
func (o *Objects) TaintRules() []*resourcev1.DeviceTaintRule {
	return list[resourcev1.DeviceTaintRule](o.taintRules)
}

// list returns the store's objects as *T (the cached objects themselves when the informer
// caches that type; converted otherwise), leaving out what is not a T.
func list[T any](s cache.Store) []*T {
	items := s.List()
	out := make([]*T, 0, len(items))
	for _, obj := range items {
		if t, ok := engine.Typed[T](obj); ok {
			out = append(out, t)
		}
	}
	return out
}
