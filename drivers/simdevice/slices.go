package simdevice

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/devicehealth"
)

// maxNameLength is the DNS-1123 subdomain limit, which bounds both slice and DRA pool names.
const maxNameLength = 253

// PoolNameFor returns the DRA pool name for one (SDP, node): "<namespace>/<poolName>/<node>".
// Each segment is a DNS subdomain, which is what the API requires of pool names, and '/' cannot
// occur inside any segment, so the name is unique per (namespace, poolName, node). Names longer
// than 253 characters are replaced by "sdp-" plus 40 hex digits of their SHA-256.
//
// Two SDPs in one namespace with the same driverName and poolName would share pools; that is a
// cross-object conflict the publisher must detect (see PoolKey), not something one SDP can see.
func PoolNameFor(namespace, poolName, node string) string {
	n := namespace + "/" + poolName + "/" + node
	if len(n) <= maxNameLength {
		return n
	}
	return "sdp-" + hash(n, 40)
}

// PoolKey identifies the DRA pool family of an SDP: equal keys on two SDPs mean conflicting
// pools. The pool must be defaulted.
func PoolKey(p *Pool) string {
	return p.Spec.DriverName + "|" + p.Namespace + "/" + p.Spec.PoolName
}

// SliceNameFor returns the deterministic ResourceSlice name for slice index i of one
// (SDP, node): "sdp-<hash of namespace/name>-<node>-<i>", with the node replaced by a hash
// when the result would exceed 253 characters. It is always a valid DNS subdomain.
func SliceNameFor(namespace, name, node string, i int) string {
	prefix := "sdp-" + hash(namespace+"/"+name, 10) + "-"
	suffix := "-" + strconv.Itoa(i)
	if len(prefix)+len(node)+len(suffix) > maxNameLength {
		node = hash(node, 16)
	}
	return prefix + node + suffix
}

func hash(s string, n int) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:n]
}

// Targets reports whether the pool publishes devices on node: the node is listed in
// spec.targetNodes OR its labels match every entry of spec.nodeSelector (an empty or missing
// nodeSelector matches nothing, so it never selects all nodes by accident). A node out of its
// NVLink clique matches as if it still had the clique label (hardwareLabels).
func (p *Pool) Targets(node *corev1.Node) bool {
	if slices.Contains(p.Spec.TargetNodes, node.Name) {
		return true
	}
	return len(p.Spec.NodeSelector) > 0 && labels.SelectorFromSet(p.Spec.NodeSelector).Matches(labels.Set(hardwareLabels(node)))
}

// DesiredSlices returns the ResourceSlices the pool should have, sorted by node and index.
//
// The pool must be defaulted (FromUnstructured does it); it is validated here and an invalid
// pool yields an error and no slices. Only nodes in the nodes argument are used: a targetNodes
// entry naming a node that does not exist publishes nothing.
//
// Per targeted node there is exactly one DRA pool (PoolNameFor), so device names (the
// profile's, "<deviceType>-<i>" without one) are unique within each pool. A node's counter sets
// and devices are split into slices within the API limits (see nodeSlices), and every slice of
// the pool carries the same resourceSliceCount. A node whose devices all disappeared still gets
// one empty slice, so the pool stays visible.
//
// Pool generation: the returned slices have Pool.Generation 0. The caller (the publisher) owns
// the generation: when any slice of a node's pool differs from what is stored (SlicesEqual is
// false, a slice is missing, or there are extra slices), it writes all slices of that pool with
// generation max(stored)+1; when everything is equal and the stored slices agree on one
// generation, it writes nothing.
//
// Faults (spec.faults, applied to the named physical device on the given node or on all nodes;
// with a profile that publishes partitions, to every device made of it):
//   - unhealthy: the device gets the taint draforge.oaslananka/unhealthy=true:NoSchedule.
//   - capacity-exhausted: the device gets draforge.oaslananka/capacity-exhausted=true:NoSchedule.
//     A taint, not a zero capacity, because the allocator only accounts capacity consumption
//     for devices with allowMultipleAllocations; a NoSchedule taint makes the real allocator
//     (DRADeviceTaints, on by default) refuse the device unless a claim tolerates the taint.
//   - disappear: the device is left out of the slices, with its counter sets.
//   - healthy: no change (useful to document intent).
//   - xid, ecc (XID 48), nvlink (XID 74), gpu-lost, unmonitored: the NVIDIA driver's health taints
//     (health.go): gpu.nvidia.com/xid=<XID> with effect NoSchedule (None for an XID the driver
//     ignores) on the device, gpu.nvidia.com/gpu-lost:NoSchedule on every device of the node,
//     gpu.nvidia.com/unmonitored:None on the device. A later XID on a device replaces the
//     earlier one's value and effect. Removing the fault removes the taint.
//   - fabric-detached: nothing in the slices (see NVLinkFabric for what it changes).
//
// Fault campaigns apply before spec.faults; a timed one's faults are those caused by now
// (DesiredSlicesAt; DesiredSlices takes the current time).
func DesiredSlices(pool *Pool, nodes []*corev1.Node) ([]*resourcev1.ResourceSlice, error) {
	return DesiredSlicesAt(pool, nodes, time.Now())
}

// DesiredSlicesAt is DesiredSlices with the pool's timed fault campaigns evaluated at now.
func DesiredSlicesAt(pool *Pool, nodes []*corev1.Node, now time.Time) ([]*resourcev1.ResourceSlice, error) {
	if pool == nil {
		return nil, errors.New("simdevice: nil pool")
	}
	if errs := pool.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("simdevice: invalid SimulatedDevicePool %s/%s: %w", pool.Namespace, pool.Name, errors.Join(errs...))
	}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b *corev1.Node) int { return compareStrings(a.Name, b.Name) })

	var out []*resourcev1.ResourceSlice
	for i, node := range sorted {
		if node == nil || (i > 0 && sorted[i-1] != nil && sorted[i-1].Name == node.Name) || !pool.Targets(node) {
			continue
		}
		out = append(out, pool.nodeSlices(node.Name, pool.Elapsed(now))...)
	}
	return out, nil
}

// Elapsed is the time from the pool's creation to now, which timed fault campaigns count from
// (0 for a pool not created yet, or created "after" now).
func (p *Pool) Elapsed(now time.Time) time.Duration {
	if p.CreationTimestamp.IsZero() {
		return 0
	}
	// A controller clock behind the API server's must not read as "before creation": fraction
	// campaigns would publish nothing until it caught up.
	return max(0, now.Sub(p.CreationTimestamp.Time))
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// nodeSlices builds the slices of one node's pool: first the slices of shared counter sets (at
// most ResourceSliceMaxCounterSets each; the API allows a slice to carry either counters or
// devices), then the devices, packed into slices of at most ResourceSliceMaxDevices, or
// ResourceSliceMaxDevicesWithAdvancedFeatures once a device of the slice has taints or consumes
// counters. A profile with slicePerDevice gives each physical device's devices their own slice(s).
// Every slice carries the pool's resourceSliceCount.
func (p *Pool) nodeSlices(node string, elapsed time.Duration) []*resourcev1.ResourceSlice {
	s := &p.Spec
	taints := map[physicalRef][]resourcev1.DeviceTaint{}
	gone := map[physicalRef]bool{}
	// The Intel driver's unhealthy health categories per device: one taint for all of them.
	intelIssues := map[physicalRef][]string{}
	// Campaign faults first: a fault listed in spec.faults is a later event on the device.
	for _, f := range slices.Concat(s.CampaignFaults(node, elapsed), s.Faults) {
		if f.Node != "" && f.Node != node {
			continue
		}
		ref, _ := s.faultTarget(f.Device) // validated
		switch f.Mode {
		case FaultDisappear:
			gone[ref] = true
		case FaultUnhealthy:
			taints[ref] = addTaint(taints[ref], TaintUnhealthy)
		case FaultCapacityExhausted:
			taints[ref] = addTaint(taints[ref], TaintCapacityExhausted)
		case FaultGPULost:
			// The driver cannot tell which GPU NVML lost (nvmlEventSetWait returns
			// ERROR_GPU_IS_LOST for the node's event set): it taints every device it publishes
			// (device_health.go run, sendHealthEventForAllDevices). Driver-shaped faults need
			// a profile, hence no deviceGroups: the devices are the implicit group's.
			for i := range s.DeviceCount {
				r := physicalRef{group: -1, index: i}
				taints[r] = setTaint(taints[r], nvidiaHealthTaint(f))
			}
		case FaultXID, FaultECC, FaultNVLink, FaultUnmonitored:
			// One device per event (the XID's GPU; unmonitored: every device of the GPU whose
			// events could not be registered), one taint per key (AddOrUpdateTaint).
			taints[ref] = setTaint(taints[ref], nvidiaHealthTaint(f))
		case FaultFabricDetached:
			// Nothing published: the driver does not read the NVLink fabric's state (v0.4.1).
			// GPU Feature Discovery's node label does (NVLinkFabric, drivers/gpufabric).
		case FaultDeviceAbsent, FaultMemoryCritical, FaultOverheat:
			// An absent GPU stays published, tainted: the driver keeps it in its slice.
			intelIssues[ref] = addCategory(intelIssues[ref], intelHealthCategory(f.Mode))
		}
	}
	for ref, cats := range intelIssues {
		taints[ref] = setTaint(taints[ref], intelHealthTaint(cats))
	}

	// Device groups of the node: the implicit one (deviceType, deviceCount, profile) or
	// spec.deviceGroups. slicePerDevice and perDevice groups get slices of their own.
	var shared, own [][]resourcev1.Device
	var perDevice [][]resourcev1.Device
	var counters []resourcev1.CounterSet
	add := func(ref physicalRef, devs []resourcev1.Device, cs []resourcev1.CounterSet, ownSlice, perDev bool) {
		for j := range devs {
			// A fault hits the physical device: all devices made of it (its partitions too).
			devs[j].Taints = slices.Clone(taints[ref])
			if len(intelIssues[ref]) > 0 {
				// The driver publishes the device's overall health as an attribute too.
				devs[j].Attributes[s.qualify(AttrIntelHealth)] = str(devicehealth.IntelUnhealthy)
			}
		}
		switch {
		case perDev:
			perDevice = append(perDevice, devs)
		case ownSlice:
			own = append(own, devs)
		default:
			shared = append(shared, devs)
		}
		counters = append(counters, cs...)
	}
	if len(s.DeviceGroups) == 0 {
		for i := range s.DeviceCount {
			if ref := (physicalRef{group: -1, index: i}); !gone[ref] {
				devs, cs := p.physicalDevices(node, i)
				add(ref, devs, cs, profiles[s.Profile].slicePerDevice, false)
			}
		}
	}
	for gi := range s.DeviceGroups {
		g := &s.DeviceGroups[gi]
		for i := range g.Count {
			if ref := (physicalRef{group: gi, index: i}); !gone[ref] {
				devs, cs := p.groupDevices(node, g, i)
				add(ref, devs, cs, false, g.PerDeviceNodeSelection)
			}
		}
	}

	type sliceSpec struct {
		spec      resourcev1.ResourceSliceSpec
		perDevice bool
	}
	var specs []sliceSpec
	for cs := range slices.Chunk(counters, resourcev1.ResourceSliceMaxCounterSets) {
		specs = append(specs, sliceSpec{spec: resourcev1.ResourceSliceSpec{SharedCounters: cs}})
	}
	for _, g := range own {
		for _, chunk := range packDevices(g) {
			specs = append(specs, sliceSpec{spec: resourcev1.ResourceSliceSpec{Devices: chunk}})
		}
	}
	for _, chunk := range packDevices(slices.Concat(shared...)) {
		specs = append(specs, sliceSpec{spec: resourcev1.ResourceSliceSpec{Devices: chunk}})
	}
	// Per-device node selection: such slices name no node, each device names its own.
	for _, chunk := range packDevices(slices.Concat(perDevice...)) {
		specs = append(specs, sliceSpec{spec: resourcev1.ResourceSliceSpec{Devices: chunk}, perDevice: true})
	}
	if len(specs) == 0 {
		specs = []sliceSpec{{}} // the pool stays visible
	}

	out := make([]*resourcev1.ResourceSlice, 0, len(specs))
	for i, ss := range specs {
		spec := ss.spec
		spec.Driver = s.DriverName
		if ss.perDevice {
			spec.PerDeviceNodeSelection = ptr.To(true)
		} else {
			spec.NodeName = ptr.To(node)
		}
		spec.Pool = resourcev1.ResourcePool{
			Name:               PoolNameFor(p.Namespace, s.PoolName, node),
			ResourceSliceCount: int64(len(specs)),
		}
		out = append(out, &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: SliceNameFor(p.Namespace, p.Name, node, i),
				Labels: map[string]string{
					LabelSDPName:      p.Name,
					LabelSDPNamespace: p.Namespace,
					LabelSDPUID:       string(p.UID),
				},
			},
			Spec: spec,
		})
	}
	return out
}

// physicalRef names one physical device: group -1 is the implicit group of a pool without
// deviceGroups.
type physicalRef struct{ group, index int }

// packDevices splits devices, in order, into as few slices as the per-slice device limits allow.
func packDevices(devices []resourcev1.Device) [][]resourcev1.Device {
	var out [][]resourcev1.Device
	var cur []resourcev1.Device
	advanced := false
	for _, d := range devices {
		adv := len(d.Taints) > 0 || len(d.ConsumesCounters) > 0
		limit := resourcev1.ResourceSliceMaxDevices
		if advanced || adv {
			limit = resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures
		}
		if len(cur)+1 > limit {
			out, cur, advanced = append(out, cur), nil, false
		}
		cur = append(cur, d)
		advanced = advanced || adv
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// sortDevices orders devices by name.
func sortDevices(devs []resourcev1.Device) {
	slices.SortFunc(devs, func(a, b resourcev1.Device) int { return compareStrings(a.Name, b.Name) })
}

func addTaint(ts []resourcev1.DeviceTaint, key string) []resourcev1.DeviceTaint {
	for _, t := range ts {
		if t.Key == key {
			return ts
		}
	}
	return append(ts, resourcev1.DeviceTaint{Key: key, Value: "true", Effect: resourcev1.DeviceTaintEffectNoSchedule})
}
