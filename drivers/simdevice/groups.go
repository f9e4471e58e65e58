package simdevice

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Limits of spec.deviceGroups and spec.topology (the CRD and the CUE schema repeat them).
const (
	MaxDeviceGroups      = 8
	MinPartitions        = 2
	MaxPartitions        = 8
	MaxBindingDelay      = 600
	MaxNUMANodes         = 8
	MaxPCIeRootsPerNUMA  = 8
	PartitionsCounter    = "partitions"
	AttrPartition        = "partition"
	AttrParent           = "parent"
	groupReservedPerItem = 2 // deviceType, index
)

// groupDevices returns the devices and counter sets of device i of group g on node, with
// spec-level attribute domain qualification, built-ins, topology, sharing, partitions and
// binding conditions applied.
func (p *Pool) groupDevices(node string, g *DeviceGroup, i int) ([]resourcev1.Device, []resourcev1.CounterSet) {
	s := &p.Spec
	name := fmt.Sprintf("%s-%d", g.DeviceType, i)
	base := resourcev1.Device{Name: name, Attributes: attrs{}}
	base.Attributes[s.qualify(AttrDeviceType)] = str(g.DeviceType)
	base.Attributes[s.qualify(AttrIndex)] = integer(int64(i))
	if t := s.Topology; t != nil {
		roots := t.NUMANodes * t.PCIeRootsPerNUMANode
		r := i * roots / g.Count
		base.Attributes[AttrPCIeRoot] = str(fmt.Sprintf("pci0000:%02x", r*0x10))
		base.Attributes[AttrNUMANode] = integer(int64(r / t.PCIeRootsPerNUMANode))
	}
	// The group's attributes win over the built-ins of the same name (as spec.attributes do).
	for k, v := range g.Attributes {
		base.Attributes[s.qualify(k)] = resourcev1.DeviceAttribute{StringValue: v.String, IntValue: v.Int, BoolValue: v.Bool, VersionValue: v.Version}
	}
	if len(g.Capacities) > 0 {
		base.Capacity = caps{}
		for k, v := range g.Capacities {
			c := resourcev1.DeviceCapacity{Value: v.DeepCopy()}
			if pol, ok := g.RequestPolicies[k]; ok {
				c.RequestPolicy = pol.api()
			}
			base.Capacity[s.qualify(k)] = c
		}
	}
	if g.AllowMultipleAllocations {
		base.AllowMultipleAllocations = ptr.To(true)
	}
	if len(g.BindingConditions) > 0 {
		base.BindingConditions = slices.Clone(g.BindingConditions)
	}
	if len(g.BindingFailureConditions) > 0 {
		base.BindingFailureConditions = slices.Clone(g.BindingFailureConditions)
	}
	if g.BindsToNode {
		base.BindsToNode = ptr.To(true)
	}
	if g.PerDeviceNodeSelection {
		base.NodeName = ptr.To(node)
	}
	if g.Partitions == 0 {
		return []resourcev1.Device{base}, nil
	}

	// Partitionable: the whole device and its partitions consume one counter set, so the
	// allocator never hands out both (KEP-4815, as dra-example-driver's gpu partitions).
	set := resourcev1.CounterSet{Name: name + "-counters", Counters: map[string]resourcev1.Counter{
		PartitionsCounter: {Value: *resource.NewQuantity(int64(g.Partitions), resource.DecimalSI)},
	}}
	part := map[string]resourcev1.Counter{PartitionsCounter: {Value: *resource.NewQuantity(1, resource.DecimalSI)}}
	for k, v := range g.Capacities {
		set.Counters[k] = resourcev1.Counter{Value: v.DeepCopy()}
		part[k] = resourcev1.Counter{Value: fraction(v, g.Partitions)}
	}
	whole := base
	whole.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: set.Name, Counters: set.Counters}}
	devs := []resourcev1.Device{whole}
	for j := range g.Partitions {
		d := base
		d.Name = name + "-part-" + strconv.Itoa(j)
		d.Attributes = cloneAttrs(base.Attributes)
		if _, ok := g.Attributes[AttrPartition]; !ok {
			d.Attributes[s.qualify(AttrPartition)] = integer(int64(j))
		}
		if _, ok := g.Attributes[AttrParent]; !ok {
			d.Attributes[s.qualify(AttrParent)] = str(name)
		}
		if len(g.Capacities) > 0 { // no request policies: partitions exclude allowMultipleAllocations
			d.Capacity = caps{}
			for k, v := range g.Capacities {
				d.Capacity[s.qualify(k)] = resourcev1.DeviceCapacity{Value: fraction(v, g.Partitions)}
			}
		}
		d.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: set.Name, Counters: part}}
		devs = append(devs, d)
	}
	return devs, []resourcev1.CounterSet{set}
}

// fraction is q/n, rounded down to a milli-unit.
func fraction(q resource.Quantity, n int) resource.Quantity {
	return *resource.NewMilliQuantity(q.MilliValue()/int64(n), q.Format)
}

func (r RequestPolicy) api() *resourcev1.CapacityRequestPolicy {
	out := &resourcev1.CapacityRequestPolicy{Default: copyQ(r.Default)}
	for _, v := range r.ValidValues {
		out.ValidValues = append(out.ValidValues, v.DeepCopy())
	}
	if r.ValidRange != nil {
		out.ValidRange = &resourcev1.CapacityRequestPolicyRange{Min: copyQ(r.ValidRange.Min), Max: copyQ(r.ValidRange.Max), Step: copyQ(r.ValidRange.Step)}
	}
	return out
}

func copyQ(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	c := q.DeepCopy()
	return &c
}

// groupAttributeAndCapacityCount bounds the attributes plus capacities of one device of g: the
// built-ins, the group's names, topology's two and a partition's two, each counted even when a
// group name repeats a built-in (an upper bound the CRD's CEL computes the same way).
func (s *PoolSpec) groupAttributeAndCapacityCount(g *DeviceGroup) int {
	n := groupReservedPerItem + len(g.Attributes) + len(g.Capacities)
	if s.Topology != nil {
		n += 2
	}
	if g.Partitions > 0 {
		n += 2
	}
	return n
}

// DeviceTypes lists the pool's device types: deviceType, or every group's, comma-separated.
func (s *PoolSpec) DeviceTypes() string {
	if len(s.DeviceGroups) == 0 {
		return s.DeviceType
	}
	types := make([]string, len(s.DeviceGroups))
	for i, g := range s.DeviceGroups {
		types[i] = g.DeviceType
	}
	return strings.Join(types, ",")
}

// DevicesPerNode is how many devices the pool publishes on each node it targets (before faults
// make any disappear): deviceCount times the devices its profile makes of one physical device,
// or the sum over the groups of count × (1 + partitions), the whole device and its partitions.
// Validate caps it at MaxDevicesPerNode, as the CRD's CEL and the CUE schema do.
func (s *PoolSpec) DevicesPerNode() int {
	if len(s.DeviceGroups) == 0 {
		return s.DeviceCount * DevicesPerPhysical(s.Profile)
	}
	n := 0
	for _, g := range s.DeviceGroups {
		n += g.Count * (1 + g.Partitions)
	}
	return n
}

// PhysicalDevicesPerNode is deviceCount, or the sum of the groups' counts.
func (s *PoolSpec) PhysicalDevicesPerNode() int {
	n := s.DeviceCount
	for _, g := range s.DeviceGroups {
		n += g.Count
	}
	return n
}
