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
// Its other modes (internal/driverconfig: cpuDeviceMode, groupBy), each a profile of its own:
//   - dra-cpu-socket (grouped, groupBy socket): one device "cpudevsocket<socket, 3 digits>" per
//     socket with dra.cpu/socketID, dra.cpu/numCPUs and dra.cpu/smtEnabled and the same
//     consumable capacity (createGroupedCPUDeviceSlices, case GROUP_BY_SOCKET);
//   - dra-cpu-machine (grouped, groupBy machine): one device "cpudevmachine" for every CPU of
//     the node (both sockets: 128) with dra.cpu/numCPUs and dra.cpu/smtEnabled and the same
//     consumable capacity (createGroupedCPUDeviceSlices, case GROUP_BY_MACHINE); deviceCount is
//     1, the one device;
//   - dra-cpu-individual (cpuDeviceMode individual): one device "cpudev<n, 3 digits>" per logical
//     CPU, SMT siblings numbered one after the other (cpuDeviceInfos: core groups ordered by their
//     first CPU), with resource.kubernetes.io/numaNode, dra.cpu/socketID, dra.cpu/smtEnabled,
//     dra.cpu/cacheL3ID, dra.cpu/coreType, dra.cpu/coreID, dra.cpu/cpuID and the deprecated two
//     (createCPUDeviceSlices), no capacity, not shareable. docs/user/device-attributes.md,
//     "Individual mode", shows the sample.
// The simulated host: two sockets of one NUMA node each, two threads per core, numbered as Linux
// numbers them (CPUs 0..cores-1 are the cores' first threads, cores..2*cores-1 their siblings in
// the same order; the first half of the cores are on socket 0). In the individual mode
// deviceCount is the host's logical CPUs: an odd count has no SMT, a count with an odd number of
// cores one socket; a core's ID is its lowest sibling's CPU ID, as the kubelet's CPU topology
// names it (docs/user/device-attributes.md: CPU 33 is on core 1), and the L3 cache the socket's.
//
// Not mirrored: resource.kubernetes.io/pcieRoot (a list of strings, only with --expose-pcie-roots
// and the DRAListTypeAttributes gate) and the node-allocatable mapping (only with
// publishNodeAllocatableResourceMapping, off by default), reserved CPUs.

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

// draCPUSocket publishes socket p.index of the same host (groupBy socket).
func draCPUSocket(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	cpus := p.spec.specCapacity(draCPUCapacity, *resource.NewQuantity(draCPUsPerNUMANode, resource.DecimalSI))
	return []resourcev1.Device{{
		Name:                     fmt.Sprintf("cpudevsocket%03d", p.index),
		AllowMultipleAllocations: ptr.To(true),
		Attributes: attrs{
			draCPUDomain + "/socketID":   integer(int64(p.index)),
			draCPUDomain + "/numCPUs":    integer(cpus.Value()),
			draCPUDomain + "/smtEnabled": boolean(true),
		},
		Capacity: caps{draCPUCapacity: {Value: cpus}},
	}}, nil
}

// draCPUMachineCPUs is the simulated host's CPUs: two sockets of draCPUsPerNUMANode.
const draCPUMachineCPUs = 2 * draCPUsPerNUMANode

// draCPUMachine publishes the whole host as one device (groupBy machine); the pool's deviceCount
// is 1 (Validate).
func draCPUMachine(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	cpus := p.spec.specCapacity(draCPUCapacity, *resource.NewQuantity(draCPUMachineCPUs, resource.DecimalSI))
	return []resourcev1.Device{{
		Name:                     "cpudevmachine",
		AllowMultipleAllocations: ptr.To(true),
		Attributes: attrs{
			draCPUDomain + "/smtEnabled": boolean(true),
			draCPUDomain + "/numCPUs":    integer(cpus.Value()),
		},
		Capacity: caps{draCPUCapacity: {Value: cpus}},
	}}, nil
}

// cpuTopology is the simulated host of the individual mode: cpus logical CPUs.
type cpuTopology struct{ cpus int }

// smt: two threads per core unless the count is odd.
func (t cpuTopology) smt() bool { return t.cpus%2 == 0 }

func (t cpuTopology) cores() int {
	if t.smt() {
		return t.cpus / 2
	}
	return t.cpus
}

// sockets: two, unless the cores do not split evenly.
func (t cpuTopology) sockets() int {
	if t.cores()%2 == 0 {
		return 2
	}
	return 1
}

// cpu is the logical CPU of device n: the upstream numbering puts each core's siblings one
// after the other, cores in the order of their first CPU.
func (t cpuTopology) cpu(n int) int {
	if !t.smt() {
		return n
	}
	return n/2 + (n%2)*t.cores()
}

// core is the unique core ID of logical CPU c (its lowest sibling) and socket its socket.
func (t cpuTopology) core(c int) int   { return c % t.cores() }
func (t cpuTopology) socket(c int) int { return t.core(c) / (t.cores() / t.sockets()) }

// draCPUIndividual publishes logical CPU device p.index of a host of deviceCount CPUs.
func draCPUIndividual(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	t := cpuTopology{cpus: p.spec.DeviceCount}
	c := t.cpu(p.index)
	socket := int64(t.socket(c))
	return []resourcev1.Device{{
		Name: fmt.Sprintf("cpudev%03d", p.index),
		Attributes: attrs{
			AttrNUMANode:                 integer(socket),
			draCPUDomain + "/socketID":   integer(socket),
			draCPUDomain + "/smtEnabled": boolean(t.smt()),
			draCPUDomain + "/cacheL3ID":  integer(socket),
			draCPUDomain + "/coreType":   str("standard"),
			draCPUDomain + "/coreID":     integer(int64(t.core(c))),
			draCPUDomain + "/cpuID":      integer(int64(c)),
			draCPUDomain + "/numaNodeID": integer(socket),
			"dra.net/numaNode":           integer(socket),
		},
	}}, nil
}
