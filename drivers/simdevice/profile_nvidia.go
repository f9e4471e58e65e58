package simdevice

// NVIDIA GPU DRA driver (driver gpu.nvidia.com), as published by
// kubernetes-sigs/dra-driver-nvidia-gpu at commit 95932046683719c43b6a0dd9613c2e5aad5d6703 (after v0.4.1):
//   - cmd/gpu-kubelet-plugin/deviceinfo.go: GpuInfo.Attributes and GetDevice (full GPU "gpu-<minor>":
//     type, uuid, productName, brand, architecture, cudaComputeCapability, driverVersion,
//     cudaDriverVersion as versions, resource.kubernetes.io/pciBusID and pcieRoot,
//     resource.kubernetes.io/numaNode as an int; capacity memory in bytes). index and minor are no
//     longer published.
//   - cmd/gpu-kubelet-plugin/consumable_shares.go: applyConsumableShares, mode "memory".
//   - cmd/gpu-kubelet-plugin/mig.go and partitions.go: DynamicMIG (KEP 4815) MIG devices
//     "gpu-<minor>-mig-<profile without dots>-<GI profile ID>-<placement start>", the counter set
//     "gpu-<minor>-counter-set" (one counter per capacity, DNS-style, plus memory-slice-<n>),
//     consumesCounters of the full GPU (everything) and of each MIG device (its capacities and
//     memory slices).
//   - cmd/gpu-kubelet-plugin/driver.go: generateSplitResourceSlices (Kubernetes >= 1.35): one slice
//     with all counter sets first, then one slice of devices per GPU.
//   - cmd/gpu-kubelet-plugin/nvlib.go: isDynamicMIGCapable and GetPerGpuAllocatableDevices: on
//     Ampere with MIG mode on only the partitions are allocatable; Hopper publishes the full GPU too.
//
// MIG hardware figures are those `nvidia-smi mig -lgip` / `-lgipp` report (GI profile IDs 19, 20,
// 15, 14, 9, 5, 0; NVIDIA MIG User Guide, "Supported MIG Profiles"). The A100-SXM4-40GB figures
// equal NVIDIA go-nvml v0.13.4-1 pkg/nvml/mock/gpus/a100.go (a100_40gb_GpuInstanceProfiles and
// a100_GpuInstancePlacements, whose IDs are the NVML enum rather than the profile IDs). The H100
// figures are an H100 80GB HBM3's `nvidia-smi mig -lgip` output (go-nvml's h100.go mock differs
// from real hardware: 16 SMs for 1g.20gb, 7 memory slices); its 4g.40gb and 7g.80gb rows were
// not checked against a stored copy of that output.
//
// Today's parts (full GPUs: memory is NVML's total, what `nvidia-smi --query-gpu=memory.total`
// and `nvidia-smi -q` print):
//   - H200 (141GB, device 0x233510DE): "NVIDIA H200", Hopper, 143771 MiB. Its MIG table is the
//     `nvidia-smi mig -lgip` output in NVIDIA/mig-parted issue #120 (2024-09-04): the same SM
//     and engine counts as the H100 80GB, memory 16.00/32.25/69.50/139.75 GiB. No `-lgipp`
//     output for the H200 was found, so the placements are the H100's (same instance counts
//     7/1/4/3/2/1/1 on 8 memory slices): an assumption, not a copy.
//   - B200 (0x290110DE): "NVIDIA B200", Blackwell, compute capability 10.0, 183359 MiB; GB200
//     (0x294110DE, 4 per node): "NVIDIA GB200", 189471 MiB. Both from real `nvidia-smi -q -x`
//     captures in NVIDIA/k8s-test-infra@5f8956ad20dc5f5bf80f8a58c530c0039bf7727b
//     tests/e2e/go/assertions/nvidiasmi/testdata/hardware/qx-b200.xml and qx-gb200.xml. Their MIG
//     tables are not modelled: the published -lgip outputs (mig-parted #166, #187, #227) were
//     only readable up to the 2g rows, and the counter set's size comes from the 7g row.

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Driver-wide values of the simulated host (the reference page's example: driver 580.126.20, CUDA 13.0).
const (
	nvidiaDriverVersion     = "580.126.20"
	nvidiaCUDADriverVersion = "13.0.0"
)

// nvidiaGPUModel is one GPU model: what NVML reports for it.
type nvidiaGPUModel struct {
	productName, architecture, computeCapability string
	memory                                       resource.Quantity
	// partitionsOnly: MIG mode on an Ampere GPU, which cannot toggle it without a reset, so
	// the full GPU is not allocatable (isDynamicMIGCapable).
	partitionsOnly bool
	migProfiles    []migProfile
}

// migProfile is one GPU instance profile and its possible placements on 8 memory slices.
type migProfile struct {
	name                                                                      string // e.g. 1g.5gb, 1g.5gb+me
	id                                                                        int    // GI profile ID as nvidia-smi shows it
	multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines int64
	memoryMiB                                                                 int64
	placements                                                                []int // start slices
	size                                                                      int   // memory slices per placement
}

// Placements are the same on A100 and H100 (`nvidia-smi mig -lgipp`).
var (
	placements1 = []int{0, 1, 2, 3, 4, 5, 6}
	placements2 = []int{0, 2, 4, 6}
)

var a100SXM440GB = nvidiaGPUModel{
	productName: "NVIDIA A100-SXM4-40GB", architecture: "Ampere", computeCapability: "8.0.0",
	memory: resource.MustParse("40Gi"), partitionsOnly: true,
	migProfiles: []migProfile{
		{"1g.5gb", 19, 14, 1, 0, 0, 0, 0, 4864, placements1, 1},
		{"1g.5gb+me", 20, 14, 1, 1, 0, 1, 1, 4864, placements1, 1},
		{"1g.10gb", 15, 14, 1, 1, 0, 0, 0, 9856, placements2, 2},
		{"2g.10gb", 14, 28, 2, 1, 0, 0, 0, 9856, []int{0, 2, 4}, 2},
		{"3g.20gb", 9, 42, 3, 2, 0, 0, 0, 19968, []int{0, 4}, 4},
		{"4g.20gb", 5, 56, 4, 2, 0, 0, 0, 19968, []int{0}, 4},
		{"7g.40gb", 0, 98, 7, 5, 0, 1, 1, 40192, []int{0}, 8},
	},
}

var h100SXM580GB = nvidiaGPUModel{
	productName: "NVIDIA H100 80GB HBM3", architecture: "Hopper", computeCapability: "9.0.0",
	memory: resource.MustParse("80Gi"),
	migProfiles: []migProfile{
		{"1g.10gb", 19, 16, 1, 1, 0, 1, 0, 9984, placements1, 1},
		{"1g.10gb+me", 20, 16, 1, 1, 0, 1, 1, 9984, placements1, 1},
		{"1g.20gb", 15, 26, 1, 1, 0, 1, 0, 20096, placements2, 2},
		{"2g.20gb", 14, 32, 2, 2, 0, 2, 0, 20096, []int{0, 2, 4}, 2},
		{"3g.40gb", 9, 60, 3, 3, 0, 3, 0, 40448, []int{0, 4}, 4},
		{"4g.40gb", 5, 64, 4, 4, 0, 4, 0, 40448, []int{0}, 4},
		{"7g.80gb", 0, 132, 8, 7, 0, 7, 1, 81152, []int{0}, 8},
	},
}

var h200 = nvidiaGPUModel{
	productName: "NVIDIA H200", architecture: "Hopper", computeCapability: "9.0.0",
	memory: resource.MustParse("143771Mi"),
	migProfiles: []migProfile{
		{"1g.18gb", 19, 16, 1, 1, 0, 1, 0, 16384, placements1, 1},
		{"1g.18gb+me", 20, 16, 1, 1, 0, 1, 1, 16384, placements1, 1},
		{"1g.35gb", 15, 26, 1, 1, 0, 1, 0, 33024, placements2, 2},
		{"2g.35gb", 14, 32, 2, 2, 0, 2, 0, 33024, []int{0, 2, 4}, 2},
		{"3g.71gb", 9, 60, 3, 3, 0, 3, 0, 71168, []int{0, 4}, 4},
		{"4g.71gb", 5, 64, 4, 4, 0, 4, 0, 71168, []int{0}, 4},
		{"7g.141gb", 0, 132, 8, 7, 0, 7, 1, 143104, []int{0}, 8},
	},
}

// a100SXM480GB is the full-GPU model of the nvidia-gpu profiles.
var a100SXM480GB = nvidiaGPUModel{
	productName: "NVIDIA A100-SXM4-80GB", architecture: "Ampere", computeCapability: "8.0.0",
	memory: resource.MustParse("80Gi"),
}

var (
	b200  = nvidiaGPUModel{productName: "NVIDIA B200", architecture: "Blackwell", computeCapability: "10.0.0", memory: resource.MustParse("183359Mi")}
	gb200 = nvidiaGPUModel{productName: "NVIDIA GB200", architecture: "Blackwell", computeCapability: "10.0.0", memory: resource.MustParse("189471Mi")}
)

// nvidiaAttributes are GpuInfo.Attributes of GPU p (the parent's attributes for MIG devices,
// CommonAttributesMig, which adds type=mig, parentUUID and profile and drops uuid).
func nvidiaAttributes(m nvidiaGPUModel, p physical) attrs {
	bus, root, numa := pciTopology(p.index)
	return attrs{
		"type":                  str("gpu"),
		"uuid":                  str("GPU-" + p.uid),
		"productName":           str(m.productName),
		"brand":                 str("Nvidia"),
		"architecture":          str(m.architecture),
		"cudaComputeCapability": ver(m.computeCapability),
		"driverVersion":         ver(nvidiaDriverVersion),
		"cudaDriverVersion":     ver(nvidiaCUDADriverVersion),
		AttrPCIBusID:            str(bus),
		AttrPCIeRoot:            str(root),
		AttrNUMANode:            integer(numa),
	}
}

// nvidiaFullGPUs publishes "gpu-<i>" as GpuInfo.GetDevice does; with shares, as
// applyConsumableShares does for --consumable-shares=memory: allowMultipleAllocations and a
// memory request policy (default all memory, 1Mi to all memory in steps of 1Mi).
func nvidiaFullGPUs(m nvidiaGPUModel, shares bool) func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	return func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
		memory := resourcev1.DeviceCapacity{Value: m.memory.DeepCopy()}
		d := resourcev1.Device{Name: fmt.Sprintf("gpu-%d", p.index), Attributes: nvidiaAttributes(m, p)}
		if shares {
			step := resource.MustParse("1Mi")
			d.AllowMultipleAllocations = ptr.To(true)
			memory.RequestPolicy = &resourcev1.CapacityRequestPolicy{
				Default: ptr.To(m.memory.DeepCopy()),
				ValidRange: &resourcev1.CapacityRequestPolicyRange{
					Min: ptr.To(step.DeepCopy()), Max: ptr.To(m.memory.DeepCopy()), Step: ptr.To(step.DeepCopy()),
				},
			}
		}
		d.Capacity = caps{"memory": memory}
		return []resourcev1.Device{d}, nil
	}
}

func (mp migProfile) capacities() caps {
	n := func(v int64) resourcev1.DeviceCapacity {
		return resourcev1.DeviceCapacity{Value: *resource.NewQuantity(v, resource.BinarySI)}
	}
	return caps{
		"multiprocessors": n(mp.multiprocessors),
		"copyEngines":     n(mp.copyEngines),
		"decoders":        n(mp.decoders),
		"encoders":        n(mp.encoders),
		"jpegEngines":     n(mp.jpegEngines),
		"ofaEngines":      n(mp.ofaEngines),
		"memory":          n(mp.memoryMiB * 1024 * 1024),
	}
}

// memorySlices is the number of memory slices: the largest placement size (inspectMigProfilesAndPlacements).
func (m nvidiaGPUModel) memorySlices() int {
	n := 0
	for _, mp := range m.migProfiles {
		n = max(n, mp.size)
	}
	return n
}

// maxCapacities is, per capacity, the largest value over all MIG profiles: the full GPU's
// capacity and the counter set's size with DynamicMIG.
func (m nvidiaGPUModel) maxCapacities() caps {
	out := caps{}
	for _, mp := range m.migProfiles {
		for k, v := range mp.capacities() {
			if cur, ok := out[k]; !ok || v.Value.Cmp(cur.Value) > 0 {
				out[k] = v
			}
		}
	}
	return out
}

// countersOf is capacitiesToCounters plus addCountersForMemSlices(start, size).
func countersOf(c caps, start, size int) map[string]resourcev1.Counter {
	out := make(map[string]resourcev1.Counter, len(c)+size)
	for k, v := range c {
		out[counterName(k)] = resourcev1.Counter{Value: v.Value.DeepCopy()}
	}
	for i := start; i < start+size; i++ {
		out[fmt.Sprintf("memory-slice-%d", i)] = resourcev1.Counter{Value: *resource.NewQuantity(1, resource.BinarySI)}
	}
	return out
}

var (
	camelRE1 = regexp.MustCompile("([a-z0-9])([A-Z])")
	camelRE2 = regexp.MustCompile("([A-Z]+)([A-Z][a-z])")
	rfc1123  = regexp.MustCompile(`[^a-z0-9-.]`)
)

// counterNames memoizes camelToDNSName for capacity names: slices are rebuilt on every sync.
var counterNames sync.Map

func counterName(capacity resourcev1.QualifiedName) string {
	if n, ok := counterNames.Load(capacity); ok {
		return n.(string)
	}
	n := camelToDNSName(string(capacity))
	counterNames.Store(capacity, n)
	return n
}

// camelToDNSName and toRFC1123Compliant are the driver's (partitions.go, mig.go).
func camelToDNSName(s string) string {
	return toRFC1123Compliant(camelRE2.ReplaceAllString(camelRE1.ReplaceAllString(s, "$1-$2"), "$1-$2"))
}

func toRFC1123Compliant(name string) string {
	name = rfc1123.ReplaceAllString(strings.ToLower(name), "-")
	return strings.TrimSuffix(strings.Trim(name, "-"), ".")
}

// nvidiaDynamicMIG publishes GPU p with the DynamicMIG feature gate: its counter set, the full
// GPU (unless partitionsOnly) consuming all of it, and one device per MIG profile and placement.
func nvidiaDynamicMIG(m nvidiaGPUModel) func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	return func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
		set := fmt.Sprintf("gpu-%d-counter-set", p.index)
		maxCaps, slices := m.maxCapacities(), m.memorySlices()
		parent := nvidiaAttributes(m, p)
		var devs []resourcev1.Device
		if !m.partitionsOnly {
			devs = append(devs, resourcev1.Device{
				Name:             fmt.Sprintf("gpu-%d", p.index),
				Attributes:       parent,
				Capacity:         maxCaps,
				ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: set, Counters: countersOf(maxCaps, 0, slices)}},
			})
		}
		for _, mp := range m.migProfiles {
			for _, start := range mp.placements {
				a := cloneAttrs(parent)
				delete(a, "uuid")
				a["type"], a["parentUUID"], a["profile"] = str("mig"), parent["uuid"], str(mp.name)
				pname := toRFC1123Compliant(strings.ReplaceAll(mp.name, ".", ""))
				devs = append(devs, resourcev1.Device{
					Name:             fmt.Sprintf("gpu-%d-mig-%s-%d-%d", p.index, pname, mp.id, start),
					Attributes:       a,
					Capacity:         mp.capacities(),
					ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: set, Counters: countersOf(mp.capacities(), start, mp.size)}},
				})
			}
		}
		// The driver sorts a GPU's devices by name (generateSplitResourceSlices).
		sortDevices(devs)
		return devs, []resourcev1.CounterSet{{Name: set, Counters: countersOf(maxCaps, 0, slices)}}
	}
}
