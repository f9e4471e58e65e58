package simdevice

// dra-example-driver (drivers gpu.example.com, net.example.com and cpu.example.com), as published by
// kubernetes-sigs/dra-example-driver at commit 31914ceacda29bbc55208ef75e68c0991e1c9568 (after v0.4.0):
//   - internal/profiles/gpu/gpu.go: EnumerateDevices with --gpu-partitions=4: per GPU i the counter
//     set "gpu-<i>-counters" (memory 80Gi, compute 100), devices "gpu-<i>-partition-<j>" (a quarter
//     of each) and "gpu-<i>-full" (all of it); attributes index, uuid, model, driverVersion plus
//     partition, partitionable and full; allowMultipleAllocations written as false. One slice
//     with the counter sets, then one with the devices.
//   - internal/profiles/net/net.go: EnumerateDevices: "nic-<i>" with allowMultipleAllocations,
//     capacity vfs (100, always 1 per allocation) and ingressBandwidth/egressBandwidth (100G,
//     default 1G, 100M to 100G in steps of 1M).
//   - internal/profiles/cpu/cpu.go: EnumerateDevices: "numa-<i>" per fake NUMA node with
//     allowMultipleAllocations, attribute numaNodeID and the capacity "<driver name>/cpu"
//     (cpusPerNUMANode; cmd/dra-example-kubeletplugin/main.go defaults to 8 NUMA nodes of 4
//     CPUs), and a node-allocatable mapping of cpu onto that capacity. The driver, built against
//     k8s.io/api v0.36, writes the 1.36 field nodeAllocatableResourceMappings ({capacityKey}),
//     which Kubernetes 1.37 tombstoned; this mirrors it in the 1.37 shape,
//     nodeAllocatableResources {cpu: {mapping: {capacityKey, capacityMultiplier: "1"}}} (1.37
//     requires the multiplier with the key). The field is gated (DRANodeAllocatableResources,
//     alpha): see SlicesEqual for an API server that drops it.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// examplePartitions is --gpu-partitions of the simulated example driver.
const examplePartitions = 4

func exampleAttributes(p physical, prefix, model string) attrs {
	return attrs{
		"index":         integer(int64(p.index)),
		"uuid":          str(prefix + "-" + p.uid),
		"model":         str(model),
		"driverVersion": ver("1.0.0"),
	}
}

func exampleGPU(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	memory, compute := resource.MustParse("80Gi"), resource.MustParse("100")
	partMemory := *resource.NewQuantity(memory.Value()/examplePartitions, resource.BinarySI)
	partCompute := *resource.NewQuantity(compute.Value()/examplePartitions, resource.DecimalSI)
	set := fmt.Sprintf("gpu-%d-counters", p.index)
	base := exampleAttributes(p, "gpu", "LATEST-GPU-MODEL")
	device := func(name string, a attrs, mem, cpu resource.Quantity) resourcev1.Device {
		return resourcev1.Device{
			Name:                     name,
			Attributes:               a,
			AllowMultipleAllocations: ptr.To(false),
			Capacity:                 caps{"memory": {Value: mem}, "compute": {Value: cpu}},
			ConsumesCounters: []resourcev1.DeviceCounterConsumption{{
				CounterSet: set,
				Counters:   map[string]resourcev1.Counter{"memory": {Value: mem}, "compute": {Value: cpu}},
			}},
		}
	}
	var devs []resourcev1.Device
	for j := range examplePartitions {
		a := cloneAttrs(base)
		a["partition"], a["partitionable"] = integer(int64(j)), boolean(true)
		devs = append(devs, device(fmt.Sprintf("gpu-%d-partition-%d", p.index, j), a, partMemory, partCompute))
	}
	full := cloneAttrs(base)
	full["partitionable"], full["full"] = boolean(true), boolean(true)
	devs = append(devs, device(fmt.Sprintf("gpu-%d-full", p.index), full, memory, compute))
	return devs, []resourcev1.CounterSet{{
		Name:     set,
		Counters: map[string]resourcev1.Counter{"memory": {Value: memory}, "compute": {Value: compute}},
	}}
}

func exampleNet(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	q := resource.MustParse
	bandwidth := resourcev1.DeviceCapacity{
		Value: q("100G"),
		RequestPolicy: &resourcev1.CapacityRequestPolicy{
			Default: ptr.To(q("1G")),
			ValidRange: &resourcev1.CapacityRequestPolicyRange{
				Min: ptr.To(q("100M")), Max: ptr.To(q("100G")), Step: ptr.To(q("1M")),
			},
		},
	}
	return []resourcev1.Device{{
		Name:                     fmt.Sprintf("nic-%d", p.index),
		AllowMultipleAllocations: ptr.To(true),
		Attributes:               exampleAttributes(p, "net", "LATEST-NET-MODEL"),
		Capacity: caps{
			"vfs": {
				Value: q("100"),
				RequestPolicy: &resourcev1.CapacityRequestPolicy{
					Default: ptr.To(q("1")), ValidValues: []resource.Quantity{q("1")},
				},
			},
			"ingressBandwidth": bandwidth,
			"egressBandwidth":  *bandwidth.DeepCopy(),
		},
	}}, nil
}

// exampleCPUsPerNUMANode is --cpus-per-numa-node's default; spec.capacities.cpu changes it.
const exampleCPUsPerNUMANode = 4

func exampleCPU(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	// The driver names the capacity after itself (CapacityKey); here after the attribute
	// domain, which is the driver name unless the pool says otherwise.
	key := resourcev1.QualifiedName("cpu")
	if p.spec.AttributeDomain != "" {
		key = resourcev1.QualifiedName(p.spec.AttributeDomain + "/cpu")
	}
	return []resourcev1.Device{{
		Name:                     fmt.Sprintf("numa-%d", p.index),
		AllowMultipleAllocations: ptr.To(true),
		Attributes:               attrs{"numaNodeID": integer(int64(p.index))},
		Capacity:                 caps{key: {Value: *resource.NewQuantity(exampleCPUsPerNUMANode, resource.DecimalSI)}},
		NodeAllocatableResources: map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
			corev1.ResourceCPU: {Mapping: &resourcev1.NodeAllocatableMapping{
				CapacityKey: ptr.To(key), CapacityMultiplier: ptr.To(resource.MustParse("1")),
			}},
		},
	}}, nil
}
