package simdevice

// CPU DRA driver (driver dra.cpu), as published by kubernetes-sigs/dra-driver-cpu at commit
// de98098690f25e59d781c1659b5c3e0b0a210c2a (after v0.2.0), in its default mode
// (internal/driverconfig/defaults.go: cpuDeviceMode grouped, groupBy numanode):
//   - pkg/device/builder.go: groupedCPUDeviceInfos and createGroupedCPUDeviceSlices: one device
//     "cpudevnuma<NUMA node, 3 digits>" per NUMA node with allowMultipleAllocations and the
//     consumable capacity dra.cpu/cpu (the node's CPUs, minus reserved ones, in that NUMA node).
//   - pkg/device/attributes.go: resource.kubernetes.io/numaNode, dra.cpu/socketID,
//     dra.cpu/smtEnabled, dra.cpu/numCPUs, and the deprecated dra.cpu/numaNodeID and
//     dra.net/numaNode (addCompatibilityAttributes). The names are qualified with "dra.cpu"
//     whatever the driver is called, as the driver's constants are.
//   - docs/user/device-attributes.md: the sample slice (64 CPUs per NUMA node, SMT on).
//
// Not mirrored: resource.kubernetes.io/pcieRoot (a list of strings, only with --expose-pcie-roots
// and the DRAListTypeAttributes gate) and the node-allocatable mapping (only with
// publishNodeAllocatableResourceMapping, off by default); the individual and the socket- and
// machine-grouped modes.

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

const (
	draCPUDomain = "dra.cpu"
	// draCPUCapacity is the driver's CPUResourceQualifiedName.
	draCPUCapacity resourcev1.QualifiedName = draCPUDomain + "/cpu"
	// draCPUsPerNUMANode is the simulated host's CPUs per NUMA node (the driver's sample slice);
	// spec.capacities.cpu changes it, numCPUs following.
	draCPUsPerNUMANode = 64
)

// draCPU publishes NUMA node p.index of a host with one NUMA node per socket (a dual-socket
// 8-GPU host, as pciTopology lays out) and SMT on.
func draCPU(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	cpus := p.spec.specCapacity(draCPUCapacity, *resource.NewQuantity(draCPUsPerNUMANode, resource.DecimalSI))
	numa := int64(p.index)
	return []resourcev1.Device{{
		Name:                     fmt.Sprintf("cpudevnuma%03d", p.index),
		AllowMultipleAllocations: ptr.To(true),
		Attributes: attrs{
			AttrNUMANode:                 integer(numa),
			draCPUDomain + "/socketID":   integer(numa),
			draCPUDomain + "/smtEnabled": boolean(true),
			draCPUDomain + "/numCPUs":    integer(cpus.Value()),
			draCPUDomain + "/numaNodeID": integer(numa),
			"dra.net/numaNode":           integer(numa),
		},
		Capacity: caps{draCPUCapacity: {Value: cpus}},
	}}, nil
}
