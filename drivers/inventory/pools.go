package inventory

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/simdevice"
)

// Pool health values (PoolView.Health) derived from device taints.
const (
	HealthHealthy   = "Healthy"
	HealthDegraded  = "Degraded"  // some devices carry a NoSchedule/NoExecute taint
	HealthUnhealthy = "Unhealthy" // every device carries one
	HealthEmpty     = "Empty"     // the pool publishes no devices
)

// PoolID identifies a DRA resource pool.
type PoolID struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
}

func (p PoolID) String() string { return p.Driver + "/" + p.Pool }

// PoolView is one DRA resource pool (driver/pool) as seen in ResourceSlices. Only slices of the
// newest generation count for devices; older ones are reported as StaleSlices.
type PoolView struct {
	PoolID
	// Node is the node of node-local slices, "" otherwise.
	Node string `json:"node,omitempty"`
	// SDP is namespace/name of the SimulatedDevicePool that published the pool (from slice
	// labels), "" for pools of other drivers.
	SDP                string `json:"sdp,omitempty"`
	Generation         int64  `json:"generation"`
	ResourceSliceCount int64  `json:"resourceSliceCount"`
	Slices             int    `json:"slices"`
	StaleSlices        int    `json:"staleSlices,omitempty"`
	// Consistent is true when the newest-generation slices agree on resourceSliceCount and
	// there are exactly that many of them. Problems says what is wrong otherwise.
	Consistent bool         `json:"consistent"`
	Problems   []string     `json:"problems,omitempty"`
	Devices    int          `json:"deviceCount"`
	Tainted    int          `json:"taintedDevices"`
	Allocated  int          `json:"allocatedDevices"`
	Health     string       `json:"health"`
	DeviceList []DeviceView `json:"devices,omitempty"`
	SliceNames []string     `json:"sliceNames"`
}

// DeviceView is one device of a pool's newest generation.
type DeviceView struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Node   string `json:"node,omitempty"`
	Name   string `json:"name"`
	Slice  string `json:"slice"`
	// Taints are "key=value:Effect".
	Taints     []string          `json:"taints,omitempty"`
	Healthy    bool              `json:"healthy"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Capacity   map[string]string `json:"capacity,omitempty"`
	// AllocatedTo lists namespace/name of the claims in the snapshot allocated this device.
	AllocatedTo []string `json:"allocatedTo,omitempty"`
}

// Taint renders a device taint as key=value:Effect.
func Taint(t resourcev1.DeviceTaint) string {
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// blocking reports whether a taint keeps the allocator from using a device.
func blocking(t resourcev1.DeviceTaint) bool {
	return t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute
}

// AttributeString renders a typed attribute value.
func AttributeString(a resourcev1.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return *a.StringValue
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue)
	case a.VersionValue != nil:
		return *a.VersionValue
	}
	return ""
}

// DeviceAllocations maps driver/pool/device to the sorted claims (namespace/name) allocated it.
func DeviceAllocations(s *Snapshot) map[string][]string {
	out := map[string][]string{}
	for _, c := range s.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			k := r.Driver + "/" + r.Pool + "/" + r.Device
			out[k] = append(out[k], c.Namespace+"/"+c.Name)
		}
	}
	for k := range out {
		slices.Sort(out[k])
		out[k] = slices.Compact(out[k])
	}
	return out
}

// Pools groups the snapshot's ResourceSlices into DRA pools, sorted by driver, pool name.
// With withDevices the device list of each pool is filled in.
func Pools(s *Snapshot, withDevices bool) []PoolView {
	byPool := map[PoolID][]*resourcev1.ResourceSlice{}
	for _, sl := range s.Slices {
		id := PoolID{sl.Spec.Driver, sl.Spec.Pool.Name}
		byPool[id] = append(byPool[id], sl)
	}
	allocs := DeviceAllocations(s)
	out := make([]PoolView, 0, len(byPool))
	for id, sls := range byPool {
		sort.Slice(sls, func(i, j int) bool { return sls[i].Name < sls[j].Name })
		pv := PoolView{PoolID: id}
		for _, sl := range sls {
			pv.Generation = max(pv.Generation, sl.Spec.Pool.Generation)
		}
		counts := map[int64]bool{}
		nodes := map[string]bool{}
		for _, sl := range sls {
			if sl.Spec.Pool.Generation != pv.Generation {
				pv.StaleSlices++
				continue
			}
			pv.Slices++
			pv.SliceNames = append(pv.SliceNames, sl.Name)
			counts[sl.Spec.Pool.ResourceSliceCount] = true
			pv.ResourceSliceCount = max(pv.ResourceSliceCount, sl.Spec.Pool.ResourceSliceCount)
			nodes[ptr.Deref(sl.Spec.NodeName, "")] = true
			if ns, name := sl.Labels[simdevice.LabelSDPNamespace], sl.Labels[simdevice.LabelSDPName]; name != "" {
				pv.SDP = ns + "/" + name
			}
			for _, d := range sl.Spec.Devices {
				dv := DeviceView{Driver: id.Driver, Pool: id.Pool, Node: ptr.Deref(sl.Spec.NodeName, ptr.Deref(d.NodeName, "")),
					Name: d.Name, Slice: sl.Name, Healthy: true,
					AllocatedTo: allocs[id.Driver+"/"+id.Pool+"/"+d.Name]}
				for _, t := range d.Taints {
					dv.Taints = append(dv.Taints, Taint(t))
					dv.Healthy = dv.Healthy && !blocking(t)
				}
				pv.Devices++
				if !dv.Healthy {
					pv.Tainted++
				}
				if len(dv.AllocatedTo) > 0 {
					pv.Allocated++
				}
				if withDevices {
					if len(d.Attributes) > 0 {
						dv.Attributes = map[string]string{}
						for k, a := range d.Attributes {
							dv.Attributes[string(k)] = AttributeString(a)
						}
					}
					if len(d.Capacity) > 0 {
						dv.Capacity = map[string]string{}
						for k, c := range d.Capacity {
							dv.Capacity[string(k)] = c.Value.String()
						}
					}
					pv.DeviceList = append(pv.DeviceList, dv)
				}
			}
		}
		if len(nodes) == 1 {
			for n := range nodes {
				pv.Node = n
			}
		}
		if len(counts) > 1 {
			pv.Problems = append(pv.Problems, fmt.Sprintf("slices of generation %d disagree on resourceSliceCount", pv.Generation))
		}
		if int64(pv.Slices) != pv.ResourceSliceCount {
			pv.Problems = append(pv.Problems, fmt.Sprintf("%d slices of generation %d seen, resourceSliceCount is %d", pv.Slices, pv.Generation, pv.ResourceSliceCount))
		}
		pv.Consistent = len(pv.Problems) == 0
		switch {
		case pv.Devices == 0:
			pv.Health = HealthEmpty
		case pv.Tainted == 0:
			pv.Health = HealthHealthy
		case pv.Tainted == pv.Devices:
			pv.Health = HealthUnhealthy
		default:
			pv.Health = HealthDegraded
		}
		slices.SortFunc(pv.DeviceList, func(a, b DeviceView) int {
			return cmp.Or(cmp.Compare(a.Node, b.Node), compareNatural(a.Name, b.Name))
		})
		out = append(out, pv)
	}
	slices.SortFunc(out, func(a, b PoolView) int {
		return cmp.Or(cmp.Compare(a.Driver, b.Driver), cmp.Compare(a.Pool, b.Pool))
	})
	return out
}

// compareNatural orders "gpu-2" before "gpu-10".
func compareNatural(a, b string) int {
	pa, na, oka := splitNum(a)
	pb, nb, okb := splitNum(b)
	if oka && okb && pa == pb {
		return cmp.Compare(na, nb)
	}
	return cmp.Compare(a, b)
}

func splitNum(s string) (string, int, bool) {
	i := strings.LastIndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i == len(s)-1 || len(s)-i-1 > 9 {
		return s, 0, false
	}
	n := 0
	for _, r := range s[i+1:] {
		n = n*10 + int(r-'0')
	}
	return s[:i+1], n, true
}
