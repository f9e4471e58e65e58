package pools

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/simdevice"
)

// settledPlan is a pool's publication at rest: the pool's generation, the nodes it targets and
// the resourceVersion of each of its slices when its last plan was empty or its last
// publication wrote the whole plan. While all three are unchanged the desired slices are the
// stored ones (DesiredSlices depends on nothing else: the pool's spec, name, namespace and
// UID, and the targeted nodes' names), so a pass need not build and compare them again: at
// 5,000 nodes that is 5,000 slices of 8 devices on every pass after a publication and on every
// node label change.
type settledPlan struct {
	generation int64
	targets    []string          // names of the targeted nodes, sorted
	versions   map[string]string // slice name → resourceVersion
	nodes      []simdevice.NodeStatus
	// due is when a timed fault campaign causes the pool's next fault, which changes the desired
	// slices with nothing else changing (zero: never).
	due time.Time
}

// matches reports whether the inputs of a plan at now are those of s.
func (s *settledPlan) matches(generation int64, targets []string, versions map[string]string, now time.Time) bool {
	return s != nil && s.generation == generation && slices.Equal(s.targets, targets) && maps.Equal(s.versions, versions) &&
		(s.due.IsZero() || now.Before(s.due))
}

// next is how long from now until s is due (0: never).
func (s *settledPlan) next(now time.Time) time.Duration {
	if s.due.IsZero() {
		return 0
	}
	return s.due.Sub(now)
}

// targeted returns the sorted names of the nodes pool publishes on.
func targeted(pool *simdevice.Pool, nodes []*corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		if n != nil && pool.Targets(n) {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ownedVersions returns the resourceVersion of every slice carrying the pool's UID, read from
// the cache without expanding the slices, and whether that is all the pool owns: false when
// legacy slices of the earlier project may be there to adopt (those take the full plan).
func (d *Driver) ownedVersions(obj *unstructured.Unstructured) (map[string]string, bool) {
	for _, key := range []string{obj.GetNamespace() + "/" + obj.GetName(), "/" + obj.GetName()} {
		objs, _ := d.slices.GetIndexer().ByIndex(byOwner, key)
		for _, o := range objs {
			if m, err := meta.Accessor(o); err != nil || m.GetLabels()[simdevice.LabelSDPUID] == "" {
				return nil, false
			}
		}
	}
	objs, _ := d.slices.GetIndexer().ByIndex(byUID, string(obj.GetUID()))
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, false
		}
		out[m.GetName()] = m.GetResourceVersion()
	}
	return out, true
}

// settledFor returns the pool's settled plan, if any.
func (d *Driver) settledFor(pool types.UID) *settledPlan {
	d.settledMu.Lock()
	defer d.settledMu.Unlock()
	return d.settled[pool]
}

// settle records the pool's settled plan; nil forgets it.
func (d *Driver) settle(pool types.UID, s *settledPlan) {
	d.settledMu.Lock()
	defer d.settledMu.Unlock()
	if s == nil {
		delete(d.settled, pool)
		return
	}
	d.settled[pool] = s
}
