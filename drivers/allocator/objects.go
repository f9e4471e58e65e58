package allocator

import (
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/compactslice"
)

// Objects are the cluster objects the allocator reads besides claims, handed to it as
// structured.NewAllocator is handed its inputs: the controller's one view of the cluster
// (clusterview.Objects, the informers' own caches), or a Store that callers fill themselves
// (explain's snapshots, the oracle, tests). The allocator never keeps a copy of them; returned
// objects are shared and must not be changed.
type Objects interface {
	Slices() []*compactslice.Slice
	Classes() []*resourcev1.DeviceClass
	Nodes() []*corev1.Node
	TaintRules() []*resourcev1.DeviceTaintRule
}

// Store is Objects held in memory, filled by the caller. It is safe for concurrent use.
type Store struct {
	slices     byName[*compactslice.Slice]
	classes    byName[*resourcev1.DeviceClass]
	nodes      byName[*corev1.Node]
	taintRules byName[*resourcev1.DeviceTaintRule]
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{} }

// UpsertSlice records an added or updated ResourceSlice.
func (s *Store) UpsertSlice(sl *compactslice.Slice) { s.slices.set(sl.Name, sl) }

// DeleteSlice forgets a ResourceSlice.
func (s *Store) DeleteSlice(sl *compactslice.Slice) { s.slices.remove(sl.Name) }

// UpsertClass records an added or updated DeviceClass.
func (s *Store) UpsertClass(c *resourcev1.DeviceClass) { s.classes.set(c.Name, c) }

// DeleteClass forgets a DeviceClass.
func (s *Store) DeleteClass(c *resourcev1.DeviceClass) { s.classes.remove(c.Name) }

// UpsertNode records an added or updated Node. Only observed nodes are allocation targets.
func (s *Store) UpsertNode(n *corev1.Node) { s.nodes.set(n.Name, n) }

// DeleteNode forgets a Node.
func (s *Store) DeleteNode(n *corev1.Node) { s.nodes.remove(n.Name) }

// UpsertTaintRule records an added or updated DeviceTaintRule.
func (s *Store) UpsertTaintRule(r *resourcev1.DeviceTaintRule) { s.taintRules.set(r.Name, r) }

// DeleteTaintRule forgets a DeviceTaintRule.
func (s *Store) DeleteTaintRule(r *resourcev1.DeviceTaintRule) { s.taintRules.remove(r.Name) }

// Slices implements Objects.
func (s *Store) Slices() []*compactslice.Slice { return s.slices.list() }

// Classes implements Objects.
func (s *Store) Classes() []*resourcev1.DeviceClass { return s.classes.list() }

// Nodes implements Objects.
func (s *Store) Nodes() []*corev1.Node { return s.nodes.list() }

// TaintRules implements Objects.
func (s *Store) TaintRules() []*resourcev1.DeviceTaintRule { return s.taintRules.list() }

// byName is one kind of object by name.
type byName[T any] struct {
	mu sync.RWMutex
	m  map[string]T
}

func (b *byName[T]) set(name string, v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]T{}
	}
	b.m[name] = v
}

func (b *byName[T]) remove(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, name)
}

// list returns the objects sorted by name.
func (b *byName[T]) list() []T {
	b.mu.RLock()
	defer b.mu.RUnlock()
	names := make([]string, 0, len(b.m))
	for n := range b.m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]T, len(names))
	for i, n := range names {
		out[i] = b.m[n]
	}
	return out
}
