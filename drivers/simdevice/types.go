// Package simdevice models the SimulatedDevicePool (SDP) custom resource and turns it into the
// ResourceSlices a DRA driver would publish. It is pure: no I/O, no clients, no clocks. The
// publisher (a controller elsewhere) lists Nodes, calls DesiredSlices, compares with SlicesEqual
// and writes only what changed.
package simdevice

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/draforge/draforge/drivers/gvr"
)

// API coordinates of the SimulatedDevicePool CRD (deploy/crds/simulateddevicepool-crd.yaml);
// its resource is gvr.SimulatedDevicePools.
const (
	Group   = gvr.DRAForgeGroup
	Version = gvr.SimulatedDevicePoolVersion
	Kind    = "SimulatedDevicePool"
)

// Names shared with the rest of DRAForge.
const (
	// DefaultDriverName is spec.driverName when it is not set.
	DefaultDriverName = "sim.draforge.oaslananka"

	LabelSDPName      = "draforge.oaslananka/sdp-name"
	LabelSDPNamespace = "draforge.oaslananka/sdp-namespace"
	LabelSDPUID       = "draforge.oaslananka/sdp-uid"

	// TaintUnhealthy is put on devices with an "unhealthy" fault.
	TaintUnhealthy = "draforge.oaslananka/unhealthy"
	// TaintCapacityExhausted is put on devices with a "capacity-exhausted" fault.
	TaintCapacityExhausted = "draforge.oaslananka/capacity-exhausted"

	// MaxDeviceCount is the upper bound of spec.deviceCount (devices per node).
	MaxDeviceCount = 128
	// MaxDevicesPerNode caps the devices one pool publishes on each node it targets, counting
	// what the API server stores (DevicesPerNode): a GPU's MIG or CPX partitions and a NIC's
	// virtual functions each count. 1,024 is eight full ResourceSlices (ResourceSliceMaxDevices)
	// and well above a real node (8 H100 with every MIG placement publish 208); without it
	// 8 groups of 128 devices with 8 partitions each would publish 9,216 per node.
	MaxDevicesPerNode = 1024
)

// Profile makes each simulated device look like what a real DRA driver publishes: its device
// names, attributes, capacities, partitions and counter sets (see profiles.go and profile_*.go,
// each citing the upstream file it mirrors).
type Profile string

// Known profiles.
const (
	// NVIDIA GPU driver (gpu.nvidia.com): full A100 80GB GPUs; the same shared through
	// consumable memory (--consumable-shares=memory); full H200, B200 and GB200 GPUs; DynamicMIG
	// on A100-SXM4-40GB (MIG mode on: partitions only), H100 80GB HBM3 and H200 (full GPU and
	// partitions, exclusive through shared counters).
	ProfileNvidiaGPU       Profile = "nvidia-gpu"
	ProfileNvidiaGPUShares Profile = "nvidia-gpu-shares"
	ProfileNvidiaGPUH200   Profile = "nvidia-gpu-h200"
	ProfileNvidiaGPUB200   Profile = "nvidia-gpu-b200"
	ProfileNvidiaGPUGB200  Profile = "nvidia-gpu-gb200"
	ProfileNvidiaMIGA100   Profile = "nvidia-mig-a100"
	ProfileNvidiaMIGH100   Profile = "nvidia-mig-h100"
	ProfileNvidiaMIGH200   Profile = "nvidia-mig-h200"
	// NVIDIA compute-domain driver (compute-domain.nvidia.com): an IMEX channel and daemon per node.
	ProfileNvidiaComputeDomain Profile = "nvidia-compute-domain"
	// dra-example-driver: gpu profile with 4 partitions per GPU (gpu.example.com); its default
	// configuration (whole GPUs, --gpu-partitions=0); whole GPUs shared between claims
	// (--gpu-allow-multiple-allocations); net profile with consumable bandwidth (net.example.com);
	// its cpu profile is with the CPU drivers below.
	ProfileExampleGPU       Profile = "example-gpu"
	ProfileExampleGPUPlain  Profile = "example-gpu-plain"
	ProfileExampleGPUShared Profile = "example-gpu-shared"
	ProfileExampleNet       Profile = "example-net"
	// Intel GPU driver (gpu.intel.com).
	ProfileIntelGPU Profile = "intel-gpu"
	// AMD GPU driver (gpu.amd.com): MI300X unpartitioned (SPX) and partitioned (CPX, 8 per GPU).
	ProfileAMDGPU    Profile = "amd-gpu"
	ProfileAMDGPUCPX Profile = "amd-gpu-cpx"
	// Google TPU driver (tpu.google.com): a TPU v6e host with 8 chips per node.
	ProfileGoogleTPU Profile = "google-tpu"
	// SR-IOV network driver (sriovnetwork.k8snetworkplumbingwg.io): 8 virtual functions per NIC port.
	ProfileSRIOVVF Profile = "sriov-vf"
	// CPU DRA driver (dra.cpu), default mode: one device per NUMA node sharing its CPUs
	// through consumable capacity; grouped by socket; one device per CPU (individual mode);
	// and dra-example-driver's cpu profile (cpu.example.com).
	ProfileDRACPU           Profile = "dra-cpu"
	ProfileDRACPUSocket     Profile = "dra-cpu-socket"
	ProfileDRACPUMachine    Profile = "dra-cpu-machine"
	ProfileDRACPUIndividual Profile = "dra-cpu-individual"
	ProfileExampleCPU       Profile = "example-cpu"
	// DRAForge-made shapes, not mirroring a driver.
	ProfileMellanoxNIC Profile = "mellanox-nic"
	ProfileGeneric     Profile = "generic"
)

// FaultMode is what a fault does to a device.
type FaultMode string

// Fault modes. See DesiredSlices for how each is published.
const (
	FaultHealthy           FaultMode = "healthy"
	FaultUnhealthy         FaultMode = "unhealthy"
	FaultCapacityExhausted FaultMode = "capacity-exhausted"
	FaultDisappear         FaultMode = "disappear"
	// FaultBindingFailure makes the simulated driver report the device's first
	// bindingFailureCondition as True instead of its bindingConditions (see drivers/binding).
	FaultBindingFailure FaultMode = "binding-failure"

	// Driver-shaped faults: a health event of the real driver a profile mirrors, published as
	// that driver publishes it (health.go). Only profiles whose driver has a health monitor
	// accept them (FaultFamilies).
	//
	// The NVIDIA GPU driver's:
	//
	// FaultXID is an NVML XID critical error with code Fault.XID.
	FaultXID FaultMode = "xid"
	// FaultECC is an uncorrectable (double-bit) ECC error, which NVML reports as XID 48.
	FaultECC FaultMode = "ecc"
	// FaultNVLink is an NVLink error, which NVML reports as XID 74.
	FaultNVLink FaultMode = "nvlink"
	// FaultGPULost is NVML's ERROR_GPU_IS_LOST while waiting for events.
	FaultGPULost FaultMode = "gpu-lost"
	// FaultUnmonitored is a GPU whose events the driver could not register.
	FaultUnmonitored FaultMode = "unmonitored"
	// FaultFabricDetached is a GPU whose NVLink fabric is not attached (NVML's GPU fabric info
	// not COMPLETED with SUCCESS): the GPU driver publishes nothing for it, but GPU Feature
	// Discovery labels the node's NVLink clique only from attached GPUs (drivers/gpufabric).
	FaultFabricDetached FaultMode = "fabric-detached"

	// The Intel GPU driver's: a health category that xpumd reports critical, or the device
	// gone from the PCI bus (health_intel.go).
	//
	// FaultDeviceAbsent is a GPU no longer discoverable on the PCI bus (a udev remove).
	FaultDeviceAbsent FaultMode = "device-absent"
	// FaultMemoryCritical is the GPU memory's health critical (Sysman: critical or replace).
	FaultMemoryCritical FaultMode = "memory-critical"
	// FaultOverheat is the GPU core's temperature critical.
	FaultOverheat FaultMode = "overheat"
)

// FaultModes lists every fault mode: DRAForge's own, then the driver-shaped ones.
var FaultModes = append([]FaultMode{FaultHealthy, FaultUnhealthy, FaultCapacityExhausted, FaultDisappear, FaultBindingFailure},
	DriverFaultModes...)

// DriverFaultModes are the driver-shaped fault modes: the NVIDIA GPU driver's health events
// and the NVLink fabric state its stack reads, then the Intel GPU driver's health events.
var DriverFaultModes = []FaultMode{FaultXID, FaultECC, FaultNVLink, FaultGPULost, FaultUnmonitored, FaultFabricDetached,
	FaultDeviceAbsent, FaultMemoryCritical, FaultOverheat}

// AttributeValue is a typed device attribute; exactly one field must be set.
type AttributeValue struct {
	String  *string `json:"string,omitempty"`
	Int     *int64  `json:"int,omitempty"`
	Bool    *bool   `json:"bool,omitempty"`
	Version *string `json:"version,omitempty"`
}

// Fault changes one device (by name "<deviceType>-<i>" or by index i) on one node, or on every
// targeted node when Node is empty.
type Fault struct {
	Device intstr.IntOrString `json:"device"`
	Node   string             `json:"node,omitempty"`
	Mode   FaultMode          `json:"mode"`
	// XID is the XID code of a fault with mode xid (1..MaxXID); set with no other mode.
	XID *int64 `json:"xid,omitempty"`
}

// FaultCampaign gives the fault Mode (with XID for mode xid) to physical devices (nodes, for
// NodeWide modes) by their seeded draw: at once to each whose draw falls below Fraction, or,
// with MeanTimeToFault instead, to each at its own time (see CampaignOnset).
type FaultCampaign struct {
	Seed int64     `json:"seed"`
	Mode FaultMode `json:"mode"`
	XID  *int64    `json:"xid,omitempty"`
	// Fraction of the devices hit, in (0, 1]; unset for a timed campaign (a pointer, so a
	// written 0 is refused as the CRD refuses it, not taken for unset).
	Fraction *float64 `json:"fraction,omitempty"`
	// MeanTimeToFault (a Go duration, e.g. "500h") makes the campaign timed: each device fails
	// once, an exponentially distributed time with this mean after Start.
	MeanTimeToFault string `json:"meanTimeToFault,omitempty"`
	// Start is when a timed campaign begins, after the pool's creation (default 0), and Duration
	// how long its faults keep coming (0 or unset: no end). Faults stay once caused.
	Start    string `json:"start,omitempty"`
	Duration string `json:"duration,omitempty"`
}

// Timed reports whether the campaign causes its faults over time.
func (c FaultCampaign) Timed() bool { return c.MeanTimeToFault != "" }

// PoolSpec is spec of a SimulatedDevicePool.
type PoolSpec struct {
	// DriverName is the DRA driver name written to every slice. Default DefaultDriverName.
	DriverName string `json:"driverName,omitempty"`
	// PoolName is the user-facing pool name. Default metadata.name. The DRA pool name is
	// derived from it per node (see PoolNameFor).
	PoolName string `json:"poolName,omitempty"`
	// AttributeDomain qualifies attribute and capacity names. Default DriverName.
	AttributeDomain string `json:"attributeDomain,omitempty"`
	// DeviceCount is the number of devices per targeted node (1..128). With DeviceGroups it is
	// not set: DeviceType, DeviceCount, Profile, Attributes and Capacities are one implicit group.
	DeviceCount int `json:"deviceCount,omitempty"`
	// DeviceType is a DNS label such as gpu, nic or fpga; devices are named "<deviceType>-<i>".
	DeviceType string  `json:"deviceType,omitempty"`
	Profile    Profile `json:"profile,omitempty"`
	// NodeSelector and TargetNodes choose nodes; a node is targeted when it is listed in
	// TargetNodes OR its labels match NodeSelector (union). At least one must be non-empty.
	NodeSelector map[string]string            `json:"nodeSelector,omitempty"`
	TargetNodes  []string                     `json:"targetNodes,omitempty"`
	Attributes   map[string]AttributeValue    `json:"attributes,omitempty"`
	Capacities   map[string]resource.Quantity `json:"capacities,omitempty"`
	Faults       []Fault                      `json:"faults,omitempty"`
	// FaultCampaigns hit a seeded fraction of the devices on every targeted node with one fault
	// each (campaign.go), before Faults apply. Not with DeviceGroups.
	FaultCampaigns []FaultCampaign `json:"faultCampaigns,omitempty"`
	// DeviceGroups are several kinds of devices per node (e.g. 8 GPUs and 8 NICs), each with
	// its own type, count, attributes, capacities, sharing, partitions and binding conditions.
	DeviceGroups []DeviceGroup `json:"deviceGroups,omitempty"`
	// Topology places the devices of DeviceGroups on PCIe roots and NUMA nodes.
	Topology *Topology `json:"topology,omitempty"`
	// DeviceStatus says whether the simulated driver's kubelet plugin writes the status.devices
	// of the claims it prepares. Unset, the profile decides (ReportsDeviceStatus).
	DeviceStatus *bool `json:"deviceStatus,omitempty"`
}

// ReportsDeviceStatus reports whether the pool's simulated kubelet plugin writes a prepared
// claim's status.devices: spec.deviceStatus when set, else what the driver the profile mirrors
// does by default (see profileDef.deviceStatus).
func (s *PoolSpec) ReportsDeviceStatus() bool {
	if s.DeviceStatus != nil {
		return *s.DeviceStatus
	}
	return profiles[s.Profile].deviceStatus
}

// DeviceGroup is one kind of device of a pool with deviceGroups. Its devices are named
// "<deviceType>-<i>" (and "<deviceType>-<i>-part-<j>" for partitions) and carry the built-in
// deviceType and index attributes.
type DeviceGroup struct {
	DeviceType string                       `json:"deviceType"`
	Count      int                          `json:"count"`
	Attributes map[string]AttributeValue    `json:"attributes,omitempty"`
	Capacities map[string]resource.Quantity `json:"capacities,omitempty"`
	// AllowMultipleAllocations publishes the devices as shareable: claims consume their
	// capacities (consumable capacity, KEP-5075) within RequestPolicies.
	AllowMultipleAllocations bool `json:"allowMultipleAllocations,omitempty"`
	// RequestPolicies are per-capacity request policies (resource.k8s.io CapacityRequestPolicy).
	RequestPolicies map[string]RequestPolicy `json:"requestPolicies,omitempty"`
	// Partitions (2..8) makes each device partitionable: a counter set "<deviceType>-<i>-counters"
	// with a "partitions" counter and one counter per capacity; the whole device consumes all of
	// it and each of the Partitions partitions 1/Partitions, so they exclude each other.
	Partitions int `json:"partitions,omitempty"`
	// BindingConditions and BindingFailureConditions are published on every device; the
	// simulated driver sets them on an allocated claim's status.devices after
	// BindingDelaySeconds (the failure condition instead when the device has a
	// binding-failure fault). BindsToNode is published as is.
	BindingConditions        []string `json:"bindingConditions,omitempty"`
	BindingFailureConditions []string `json:"bindingFailureConditions,omitempty"`
	BindsToNode              bool     `json:"bindsToNode,omitempty"`
	BindingDelaySeconds      int      `json:"bindingDelaySeconds,omitempty"`
	// PerDeviceNodeSelection publishes the group in slices with perDeviceNodeSelection: true,
	// each device naming its node (device.nodeName), as drivers of network-attached devices do.
	PerDeviceNodeSelection bool `json:"perDeviceNodeSelection,omitempty"`
}

// RequestPolicy mirrors resource.k8s.io/v1 CapacityRequestPolicy: a default and either a set of
// valid values or a range.
type RequestPolicy struct {
	Default     *resource.Quantity  `json:"default,omitempty"`
	ValidValues []resource.Quantity `json:"validValues,omitempty"`
	ValidRange  *PolicyRange        `json:"validRange,omitempty"`
}

// PolicyRange mirrors CapacityRequestPolicyRange. With Step, default, min, max and step must be
// whole numbers (int64): the CRD's CEL can only divide integers.
type PolicyRange struct {
	Min  *resource.Quantity `json:"min,omitempty"`
	Max  *resource.Quantity `json:"max,omitempty"`
	Step *resource.Quantity `json:"step,omitempty"`
}

// Topology is a simulated host's PCIe and NUMA layout: NUMANodes × PCIeRootsPerNUMANode roots.
// Device i of a group of n devices sits on root ⌊i·roots/n⌋, so the i-th GPU and the i-th NIC of
// groups of equal size share a root; devices get resource.kubernetes.io/pcieRoot and numaNode.
type Topology struct {
	NUMANodes            int `json:"numaNodes"`
	PCIeRootsPerNUMANode int `json:"pcieRootsPerNUMANode"`
}

// NodeStatus reports what was published for one node.
type NodeStatus struct {
	Node        string   `json:"node"`
	PoolName    string   `json:"poolName"`
	SliceNames  []string `json:"sliceNames,omitempty"`
	DeviceCount int      `json:"deviceCount"`
	Generation  int64    `json:"generation"`
}

// PoolStatus is status of a SimulatedDevicePool.
type PoolStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// NodeCount is the number of nodes the pool publishes on, for the "Nodes" printer column;
	// Nodes lists them, at most 100 (the first by name: drivers/pools.MaxStatusNodes).
	NodeCount int          `json:"nodeCount,omitempty"`
	Nodes     []NodeStatus `json:"nodes,omitempty"`
}

// Pool is a decoded SimulatedDevicePool.
type Pool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PoolSpec   `json:"spec"`
	Status            PoolStatus `json:"status,omitempty"`
}

// Published reports whether DRAForge published the ResourceSlice with these labels: the pool
// machine labels every slice it writes with its SimulatedDevicePool's UID. Slices without the
// label are another driver's, whatever their driver name.
func Published(sliceLabels map[string]string) bool { return sliceLabels[LabelSDPUID] != "" }
