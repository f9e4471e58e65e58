package simdevice

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Built-in attributes of pools without a real-driver profile, in the driver's own domain.
const (
	AttrDeviceType = "deviceType"
	AttrIndex      = "index"
)

// Standard attributes of the Kubernetes domain (k8s.io/dynamic-resource-allocation
// deviceattribute/attribute.go; numaNode is KEP-6072).
const (
	AttrPCIBusID = "resource.kubernetes.io/pciBusID"
	AttrPCIeRoot = "resource.kubernetes.io/pcieRoot"
	AttrNUMANode = "resource.kubernetes.io/numaNode"
)

// physical is one simulated physical device (GPU, NIC, TPU chip) of one node. A profile turns it
// into the devices its driver would publish (the GPU and its partitions) and the counter sets
// they consume.
type physical struct {
	index int
	// uid is stable per (pool, node, index) and UUID-shaped.
	uid string
	// nodeUID is stable per (pool, node): drivers that derive a UUID from the node name only.
	nodeUID string
	spec    *PoolSpec
}

// profileDef describes how one profile publishes a physical device.
type profileDef struct {
	// builtins adds AttrDeviceType and AttrIndex to every device. Real-driver profiles leave
	// them out: the real drivers do not publish them.
	builtins bool
	// slicePerDevice puts the devices of each physical device in a slice of their own, after the
	// counter slices (the NVIDIA driver's layout with partitionable devices); otherwise devices
	// are packed into as few slices as the API limits allow.
	slicePerDevice bool
	// build returns the devices of p, with attribute and capacity names as the driver writes
	// them: unqualified for its own domain, qualified for other domains; and its counter sets.
	build func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet)
	// deviceStatus: the driver's kubelet plugin writes status.devices of the claims it prepares
	// by default. Only the network drivers do, to report the interface they configured
	// (dra-driver-sriov pkg/driver/dra_hook.go, an UpdateStatus with networkData). The others
	// write none: k8s-dra-driver-gpu, the Intel, AMD and TPU drivers have no such write;
	// dra-example-driver only with --gpu-device-status (default off, its
	// cmd/dra-example-kubeletplugin/state.go); nor does the upstream DRA test driver that
	// scheduler_perf and the e2e tests run (kubernetes test/e2e/dra/test-driver/app/
	// kubeletplugin.go), which the pools without a real-driver profile stand for.
	deviceStatus bool
	// driver is the name of the real DRA driver the profile mirrors ("" for DRAForge-made
	// shapes): its family, which decides the driver-shaped faults it accepts (health.go).
	driver string
	// wholeNode: the profile publishes one device for the whole node (dra.cpu's groupBy
	// machine), so deviceCount is 1.
	wholeNode bool
	// dynamicMIG: the profile mirrors the NVIDIA driver's DynamicMIG feature gate, which the
	// driver does not run together with its NVML health monitor (health.go).
	dynamicMIG bool
}

// profiles maps every known profile to its definition. The real-driver profiles are in
// profile_*.go, each citing the upstream file it mirrors.
var profiles = map[Profile]profileDef{
	"":                         {builtins: true, build: plainDevice(nil, nil)},
	ProfileGeneric:             {builtins: true, build: plainDevice(genericAttributes, nil)},
	ProfileMellanoxNIC:         {builtins: true, build: plainDevice(mellanoxAttributes, mellanoxCapacities), deviceStatus: true},
	ProfileNvidiaGPU:           {build: nvidiaFullGPUs(a100SXM480GB, false), driver: NvidiaDriverName},
	ProfileNvidiaGPUShares:     {build: nvidiaFullGPUs(a100SXM480GB, true), driver: NvidiaDriverName},
	ProfileNvidiaGPUH200:       {build: nvidiaFullGPUs(h200, false), driver: NvidiaDriverName},
	ProfileNvidiaGPUB200:       {build: nvidiaFullGPUs(b200, false), driver: NvidiaDriverName},
	ProfileNvidiaGPUGB200:      {build: nvidiaFullGPUs(gb200, false), driver: NvidiaDriverName},
	ProfileNvidiaMIGA100:       {slicePerDevice: true, build: nvidiaDynamicMIG(a100SXM440GB), driver: NvidiaDriverName, dynamicMIG: true},
	ProfileNvidiaMIGH100:       {slicePerDevice: true, build: nvidiaDynamicMIG(h100SXM580GB), driver: NvidiaDriverName, dynamicMIG: true},
	ProfileNvidiaMIGH200:       {slicePerDevice: true, build: nvidiaDynamicMIG(h200), driver: NvidiaDriverName, dynamicMIG: true},
	ProfileNvidiaComputeDomain: {build: computeDomainDevices, driver: "compute-domain.nvidia.com"},
	ProfileExampleGPU:          {build: exampleGPU(examplePartitions, false)},
	ProfileExampleGPUPlain:     {build: exampleGPU(0, false)},
	ProfileExampleGPUShared:    {build: exampleGPU(0, true)},
	ProfileExampleNet:          {build: exampleNet},
	ProfileIntelGPU:            {build: intelGPU, driver: IntelDriverName},
	ProfileAMDGPU:              {build: amdGPU},
	ProfileAMDGPUCPX:           {build: amdGPUCPX},
	ProfileGoogleTPU:           {build: googleTPU},
	ProfileSRIOVVF:             {build: sriovVF, deviceStatus: true},
	ProfileDRACPU:              {build: draCPU},
	ProfileDRACPUSocket:        {build: draCPUSocket},
	ProfileDRACPUMachine:       {build: draCPUMachine, wholeNode: true},
	ProfileDRACPUIndividual:    {build: draCPUIndividual},
	ProfileExampleCPU:          {build: exampleCPU},
}

// WholeNodeProfiles lists, sorted, the profiles that publish one device for the whole node,
// whose deviceCount must be 1.
func WholeNodeProfiles() []Profile {
	var out []Profile
	for p, def := range profiles {
		if def.wholeNode {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Profiles lists the known profiles (without the empty one), sorted.
func Profiles() []Profile {
	out := make([]Profile, 0, len(profiles))
	for p := range profiles {
		if p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func str(s string) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{StringValue: ptr.To(s)}
}
func ver(s string) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{VersionValue: ptr.To(s)}
}
func integer(i int64) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{IntValue: ptr.To(i)}
}
func boolean(b bool) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{BoolValue: ptr.To(b)}
}
func capacity(q string) resourcev1.DeviceCapacity {
	return resourcev1.DeviceCapacity{Value: resource.MustParse(q)}
}

type attrs = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
type caps = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity

// plainDevice publishes one device "<deviceType>-<i>" per physical device with the given
// attributes and capacities (either may be nil).
func plainDevice(a func(p physical) attrs, c func() caps) func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	return func(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
		d := resourcev1.Device{Name: fmt.Sprintf("%s-%d", p.spec.DeviceType, p.index), Attributes: attrs{}}
		if a != nil {
			d.Attributes = a(p)
		}
		if c != nil {
			d.Capacity = c()
		}
		return []resourcev1.Device{d}, nil
	}
}

func genericAttributes(p physical) attrs {
	return attrs{"vendor": str("DRAForge"), "model": str("simulated")}
}

// mellanoxAttributes is a DRAForge-made NIC shape (no upstream driver is mirrored).
func mellanoxAttributes(p physical) attrs {
	return attrs{
		"type":            str("nic"),
		"vendor":          str("Mellanox"),
		"productName":     str("ConnectX-7"),
		"firmwareVersion": ver("28.39.1002"),
		"linkSpeedGbps":   integer(400),
		"rdma":            boolean(true),
		"pciAddress":      str(fmt.Sprintf("0000:%02x:00.0", 0x10+p.index%0xf0)),
	}
}

func mellanoxCapacities() caps { return caps{"bandwidth": capacity("400G")} }

// pciTopology is a simulated host's PCI placement of physical device i: eight devices per PCI
// domain, two per PCIe root complex, four per NUMA node (the layout of an 8-GPU HGX board).
// It returns the PCI bus ID (BDF), the pcieRoot attribute value and the NUMA node.
func pciTopology(i int) (busID, root string, numa int64) {
	domain, j := i/8, i%8
	rootBus := (j / 2) * 0x40
	return fmt.Sprintf("%04x:%02x:00.0", domain, rootBus+0x08+(j%2)*0x10),
		fmt.Sprintf("pci%04x:%02x", domain, rootBus), int64(j / 4)
}

// deviceUID is a stable UUID-shaped identifier for one device of one SDP on one node; i < 0
// gives one per node.
//
// Written without fmt: a pool of 5,000 nodes × 8 devices computes 80,000 of them per plan, and
// with fmt they would be most of building the pool's desired slices.
func deviceUID(namespace, name, node string, i int) string {
	key := make([]byte, 0, len(namespace)+len(name)+len(node)+8)
	key = append(append(append(append(append(append(key, namespace...), '/'), name...), '/'), node...), '/')
	h := sha256.Sum256(strconv.AppendInt(key, int64(i), 10))
	var b [36]byte
	hex.Encode(b[0:8], h[0:4])
	hex.Encode(b[9:13], h[4:6])
	hex.Encode(b[14:18], h[6:8])
	hex.Encode(b[19:23], h[8:10])
	hex.Encode(b[24:36], h[10:16])
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return string(b[:])
}

// qualify returns the name under which a profile or spec attribute (or capacity) is published.
// Names already qualified (another domain, e.g. resource.kubernetes.io/pcieRoot) stay as they
// are. Unqualified names belong to the attribute domain: they are published unqualified when
// that is the driver's own domain, exactly as real drivers do (the allocator compares capacity
// request keys as written, so a claim asking for `memory` only matches a device publishing
// `memory`), and qualified otherwise.
func (s *PoolSpec) qualify(name string) resourcev1.QualifiedName {
	if strings.Contains(name, "/") || s.AttributeDomain == s.DriverName {
		return resourcev1.QualifiedName(name)
	}
	return resourcev1.QualifiedName(s.AttributeDomain + "/" + name)
}

func (s *PoolSpec) qualifyAll(in map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, c map[resourcev1.QualifiedName]resourcev1.DeviceCapacity) (attrs, caps) {
	if s.AttributeDomain == s.DriverName { // every name stays as it is: no copies
		return in, c
	}
	a := make(attrs, len(in))
	for k, v := range in {
		a[s.qualify(string(k))] = v
	}
	var out caps
	if len(c) > 0 {
		out = make(caps, len(c))
		for k, v := range c {
			out[s.qualify(string(k))] = v
		}
	}
	return a, out
}

// specName returns the name spec attribute or capacity k is published under on a device that
// has the names has reports: s.qualify(k), or the profile's own spelling of the same ID when it
// writes it qualified with the driver's domain (dra-driver-cpu writes "dra.cpu/cpu"). The spec
// value then replaces the profile's instead of adding a second name for one ID, which
// SlicesEqual could never find equal.
func (s *PoolSpec) specName(k string, has func(resourcev1.QualifiedName) bool) resourcev1.QualifiedName {
	q := s.qualify(k)
	if long := resourcev1.QualifiedName(s.DriverName + "/" + k); !strings.Contains(string(q), "/") && has(long) {
		return long
	}
	return q
}

func hasKey[V any](m map[resourcev1.QualifiedName]V) func(resourcev1.QualifiedName) bool {
	return func(n resourcev1.QualifiedName) bool { _, ok := m[n]; return ok }
}

// specCapacity returns the value spec.capacities gives the profile's capacity name, or def: a
// profile whose attributes follow a capacity (dra-driver-cpu's numCPUs) reads it here.
func (s *PoolSpec) specCapacity(name resourcev1.QualifiedName, def resource.Quantity) resource.Quantity {
	for k, v := range s.Capacities {
		if s.specName(k, func(n resourcev1.QualifiedName) bool { return n == name }) == name {
			return v.DeepCopy()
		}
	}
	return def
}

// physicalDevices returns the devices (qualified, with spec.attributes and spec.capacities
// applied; later wins: built-ins, profile, spec) and counter sets of physical device i on node.
func (p *Pool) physicalDevices(node string, i int) ([]resourcev1.Device, []resourcev1.CounterSet) {
	s := &p.Spec
	def := profiles[s.Profile]
	devs, counters := def.build(physical{
		index:   i,
		uid:     deviceUID(p.Namespace, p.Name, node, i),
		nodeUID: deviceUID(p.Namespace, p.Name, node, -1),
		spec:    s,
	})
	for j := range devs {
		d := &devs[j]
		d.Attributes, d.Capacity = s.qualifyAll(d.Attributes, d.Capacity)
		if def.builtins { // in the driver's own domain: unqualified
			d.Attributes[AttrDeviceType] = str(s.DeviceType)
			d.Attributes[AttrIndex] = integer(int64(i))
		}
		for k, v := range s.Attributes {
			d.Attributes[s.specName(k, hasKey(d.Attributes))] = resourcev1.DeviceAttribute{
				StringValue: v.String, IntValue: v.Int, BoolValue: v.Bool, VersionValue: v.Version,
			}
		}
		if len(s.Capacities) > 0 && d.Capacity == nil {
			d.Capacity = caps{}
		}
		for k, v := range s.Capacities {
			d.Capacity[s.specName(k, hasKey(d.Capacity))] = resourcev1.DeviceCapacity{Value: v.DeepCopy()}
		}
	}
	return devs, counters
}

// DevicesPerPhysical is how many devices profile p publishes for one physical device: 1, or a
// GPU with its partitions (MIG placements, CPX partitions, dra-example-driver's four), or a NIC
// port's virtual functions. An unknown profile counts 1 (Validate rejects it on its own).
func DevicesPerPhysical(p Profile) int {
	def, ok := profiles[p]
	if !ok {
		return 1
	}
	devs, _ := def.build(physical{spec: &PoolSpec{DeviceType: "device", DeviceCount: 1, Profile: p, DriverName: DefaultDriverName}})
	return len(devs)
}

// MapsNodeAllocatable reports whether profile p publishes nodeAllocatableResources, a field the
// API server keeps only with the DRANodeAllocatableResources gate on (see SlicesEqual).
func MapsNodeAllocatable(p Profile) bool {
	def, ok := profiles[p]
	if !ok {
		return false
	}
	devs, _ := def.build(physical{spec: &PoolSpec{DeviceType: "x", DeviceCount: 1}})
	for _, d := range devs {
		if len(d.NodeAllocatableResources) > 0 {
			return true
		}
	}
	return false
}

// ProfileShape returns the attribute and capacity names a profile publishes, as written before
// qualifying (own domain unqualified, other domains qualified), over all the devices it makes
// (a GPU and its partitions), and whether the built-in deviceType and index are added. The
// schema generator writes the CRD's and CUE's per-device limit from it.
func ProfileShape(p Profile) (attributes, capacities []string, builtins bool) {
	def, ok := profiles[p]
	if !ok {
		return nil, nil, false
	}
	a, c := map[string]bool{}, map[string]bool{}
	devs, _ := def.build(physical{spec: &PoolSpec{DeviceType: "x", DeviceCount: 1}})
	for _, d := range devs {
		for k := range d.Attributes {
			a[string(k)] = true
		}
		for k := range d.Capacity {
			c[string(k)] = true
		}
	}
	return slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(c)), def.builtins
}

// profileAttributes and profileCapacities give ProfileShape's names as maps.
func profileAttributes(p Profile, _ string, _ int) map[string]resourcev1.DeviceAttribute {
	a, _, _ := ProfileShape(p)
	out := map[string]resourcev1.DeviceAttribute{}
	for _, n := range a {
		out[n] = resourcev1.DeviceAttribute{}
	}
	return out
}

func profileCapacities(p Profile) map[string]resource.Quantity {
	_, c, _ := ProfileShape(p)
	out := map[string]resource.Quantity{}
	for _, n := range c {
		out[n] = resource.Quantity{}
	}
	return out
}

// attributeAndCapacityCount bounds the attributes plus capacities of one device: the built-ins
// not replaced by a spec attribute of the driver's domain, the union of the profile's and the
// spec's attribute names, and the same for capacities. The union over all the profile's devices
// makes it an upper bound, which CEL in the CRD can compute the same way.
func attributeAndCapacityCount(s *PoolSpec) int {
	pa, pc, builtins := ProfileShape(s.Profile)
	attrs, caps := map[string]bool{}, map[string]bool{}
	for _, n := range pa {
		attrs[n] = true
	}
	for _, n := range pc {
		caps[n] = true
	}
	for n := range s.Attributes {
		attrs[n] = true
	}
	for n := range s.Capacities {
		caps[n] = true
	}
	n := len(attrs) + len(caps)
	if builtins {
		for _, b := range []string{AttrDeviceType, AttrIndex} {
			// A spec attribute of that name replaces the built-in only in the driver's domain.
			if !attrs[b] || s.AttributeDomain != s.DriverName {
				n++
			}
		}
	}
	return n
}

// cloneAttrs copies an attribute map; the values' pointers are shared, nothing writes through them.
func cloneAttrs(a attrs) attrs { return maps.Clone(a) }
