package pools

import (
	"maps"
	"slices"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/simdevice"
)

// Plan is what publishing a pool takes: the writes that make the stored slices equal to the
// desired ones, and the status that describes the result. An empty plan means zero writes.
type Plan struct {
	Create []*resourcev1.ResourceSlice
	Update []*resourcev1.ResourceSlice
	Delete []string
	// Blocked are desired slice names held by another live pool incarnation; publishing waits.
	Blocked []string
	Nodes   []simdevice.NodeStatus
	// Next is how long until a timed fault campaign of the pool changes its slices (0: never).
	Next time.Duration
	// inputs are what the plan was made from, with its Nodes (nil when legacy slices took part).
	inputs *settledPlan
}

// Empty reports whether the plan writes nothing.
func (p Plan) Empty() bool {
	return len(p.Create)+len(p.Update)+len(p.Delete)+len(p.Blocked) == 0
}

// MakePlan compares desired slices (generation 0, from simdevice.DesiredSlices) with the pool's
// stored slices. owned are slices carrying this pool's UID label (or adopted legacy slices);
// byName finds any stored slice by name, so a name held by someone else is never overwritten;
// ownerAlive tells whether the pool incarnation with a given UID still exists.
//
// Per DRA pool, the generation stays when every slice is equal and all share one generation;
// otherwise every slice of that pool is written with max(stored generation)+1, so consumers
// never mix slices of two generations.
func MakePlan(desired, owned []*resourcev1.ResourceSlice, byName func(string) *resourcev1.ResourceSlice, ownerAlive func(uid string) bool) Plan {
	var plan Plan
	ownedByName := map[string]*resourcev1.ResourceSlice{}
	storedByPool := map[string][]*resourcev1.ResourceSlice{}
	for _, s := range owned {
		ownedByName[s.Name] = s
		storedByPool[s.Spec.Pool.Name] = append(storedByPool[s.Spec.Pool.Name], s)
	}
	desiredByPool := map[string][]*resourcev1.ResourceSlice{}
	wanted := map[string]bool{}
	for _, d := range desired {
		desiredByPool[d.Spec.Pool.Name] = append(desiredByPool[d.Spec.Pool.Name], d)
		wanted[d.Name] = true
	}
	for _, pool := range slices.Sorted(maps.Keys(desiredByPool)) {
		want, stored := desiredByPool[pool], storedByPool[pool]
		gen, inSync := poolGeneration(want, stored, ownedByName)
		if !inSync {
			gen++
		}
		var names []string
		devices := 0
		for _, d := range want {
			names = append(names, d.Name)
			devices += len(d.Spec.Devices)
			if inSync {
				continue
			}
			// A shallow copy: the write shares the desired slice's devices and labels, which
			// nothing changes; a deep copy of thousands of slices would be most of a large plan.
			c := *d
			w := &c
			w.Spec.Pool.Generation = gen
			if cur, ok := ownedByName[d.Name]; ok {
				w.ResourceVersion = cur.ResourceVersion
				plan.Update = append(plan.Update, w)
				continue
			}
			if other := byName(d.Name); other != nil {
				// A slice of another incarnation (same namespace/name, other UID) or of
				// something else holds the name: remove it only when its owner is gone.
				if uid := other.Labels[simdevice.LabelSDPUID]; uid != "" && !ownerAlive(uid) {
					plan.Delete = append(plan.Delete, other.Name)
				} else {
					plan.Blocked = append(plan.Blocked, d.Name)
					continue
				}
			}
			plan.Create = append(plan.Create, w)
		}
		plan.Nodes = append(plan.Nodes, simdevice.NodeStatus{
			Node: sliceNode(want), PoolName: pool, SliceNames: names, DeviceCount: devices, Generation: gen,
		})
	}
	for _, s := range owned {
		if !wanted[s.Name] {
			plan.Delete = append(plan.Delete, s.Name)
		}
	}
	slices.Sort(plan.Delete)
	plan.Delete = slices.Compact(plan.Delete)
	return plan
}

// poolGeneration returns the highest stored generation of a pool and whether the stored slices
// already equal the desired ones at one shared generation with nothing extra.
func poolGeneration(want, stored []*resourcev1.ResourceSlice, ownedByName map[string]*resourcev1.ResourceSlice) (int64, bool) {
	var maxGen int64
	gens := map[int64]bool{}
	for _, s := range stored {
		maxGen = max(maxGen, s.Spec.Pool.Generation)
		gens[s.Spec.Pool.Generation] = true
	}
	if len(stored) != len(want) || len(gens) != 1 {
		return maxGen, false
	}
	for _, d := range want {
		cur, ok := ownedByName[d.Name]
		if !ok || !simdevice.SlicesEqual(d, cur) {
			return maxGen, false
		}
	}
	return maxGen, true
}

// sliceNode is the node of a pool's slices: a slice's nodeName, or with perDeviceNodeSelection
// a device's.
func sliceNode(want []*resourcev1.ResourceSlice) string {
	for _, s := range want {
		if s.Spec.NodeName != nil {
			return *s.Spec.NodeName
		}
		for _, d := range s.Spec.Devices {
			if d.NodeName != nil {
				return *d.NodeName
			}
		}
	}
	return ""
}

// legacyName is the slice name the earlier project used: sim-slice-<sdp>-<node>-<namespace>
// with dots replaced by dashes.
func legacyName(name, node, namespace string) string {
	return strings.ReplaceAll("sim-slice-"+name+"-"+node+"-"+namespace, ".", "-")
}
