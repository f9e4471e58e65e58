package simdevice

// dra-example-driver (drivers gpu.example.com, net.example.com and cpu.example.com), as published by
// kubernetes-sigs/dra-example-driver at commit 31914ceacda29bbc55208ef75e68c0991e1c9568 (after v0.4.0):
//   - internal/profiles/gpu/gpu.go: EnumerateDevices. With --gpu-partitions=0 (the chart's
//     default) one device "gpu-<i>" per GPU with attributes index, uuid, model, driverVersion and
//     capacities memory 80Gi and compute 100. With --gpu-partitions=4: per GPU i the counter set
//     "gpu-<i>-counters" (memory 80Gi, compute 100), devices "gpu-<i>-partition-<j>" (a quarter
//     of each) and "gpu-<i>-full" (all of it), plus the attributes partition, partitionable and
//     full; one slice with the counter sets, then one with the devices. allowMultipleAllocations
//     is always written: --gpu-allow-multiple-allocations (default false) also gives memory and
//     compute request policies (memoryCapacity, computeCapacity).
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

// exampleGPU is EnumerateDevices for one GPU with --gpu-partitions=partitions (0: the driver's
// default, one whole device "gpu-<i>") and --gpu-allow-multiple-allocations=multi (each device
// shareable, its memory requested in steps of 1Gi and its compute in steps of 1, default all of
// it: memoryCapacity and computeCapacity).
func exampleGPU(partitions int, multi bool) func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	return func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
		memory, compute := resource.MustParse("80Gi"), resource.MustParse("100")
		base := exampleAttributes(p, "gpu", "LATEST-GPU-MODEL")
		device := func(name string, a attrs, mem, cpu resource.Quantity) resourcev1.Device {
			return resourcev1.Device{
				Name:                     name,
				Attributes:               a,
				AllowMultipleAllocations: ptr.To(multi),
				Capacity: caps{
					"memory":  exampleCapacity(mem, "1Gi", multi),
					"compute": exampleCapacity(cpu, "1", multi),
				},
			}
		}
		if partitions == 0 {
			return []resourcev1.Device{device(fmt.Sprintf("gpu-%d", p.index), base, memory, compute)}, nil
		}
		partMemory := *resource.NewQuantity(memory.Value()/int64(partitions), resource.BinarySI)
		partCompute := *resource.NewQuantity(compute.Value()/int64(partitions), resource.DecimalSI)
		set := fmt.Sprintf("gpu-%d-counters", p.index)
		consuming := func(d resourcev1.Device, mem, cpu resource.Quantity) resourcev1.Device {
			d.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{
				CounterSet: set,
				Counters:   map[string]resourcev1.Counter{"memory": {Value: mem}, "compute": {Value: cpu}},
			}}
			return d
		}
		var devs []resourcev1.Device
		for j := range partitions {
			a := cloneAttrs(base)
			a["partition"], a["partitionable"] = integer(int64(j)), boolean(true)
			devs = append(devs, consuming(device(fmt.Sprintf("gpu-%d-partition-%d", p.index, j), a, partMemory, partCompute), partMemory, partCompute))
		}
		full := cloneAttrs(base)
		full["partitionable"], full["full"] = boolean(true), boolean(true)
		devs = append(devs, consuming(device(fmt.Sprintf("gpu-%d-full", p.index), full, memory, compute), memory, compute))
		return devs, []resourcev1.CounterSet{{
			Name:     set,
			Counters: map[string]resourcev1.Counter{"memory": {Value: memory}, "compute": {Value: compute}},
		}}
	}
}

// exampleCapacity is memoryCapacity/computeCapacity: with multiple allocations, a request
// policy from step to all of value in steps of step, default all of it.
func exampleCapacity(value resource.Quantity, step string, multi bool) resourcev1.DeviceCapacity {
	c := resourcev1.DeviceCapacity{Value: value}
	if multi {
		s := resource.MustParse(step)
		c.RequestPolicy = &resourcev1.CapacityRequestPolicy{
			Default: ptr.To(value.DeepCopy()),
			ValidRange: &resourcev1.CapacityRequestPolicyRange{
				Min: ptr.To(s.DeepCopy()), Max: ptr.To(value.DeepCopy()), Step: ptr.To(s.DeepCopy()),
			},
		}
	}
	return c
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
