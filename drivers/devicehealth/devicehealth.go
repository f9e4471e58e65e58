// Package devicehealth names the health taints real DRA drivers publish and says what they
// mean: the NVIDIA GPU driver's (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1,
// cmd/gpu-kubelet-plugin/device_health.go) and the Intel GPU driver's
// (intel/intel-resource-drivers-for-kubernetes 1da939f, cmd/kubelet-gpu-plugin/node_state.go). drivers/simdevice publishes them for driver-shaped
// faults; explain and doctor describe them wherever they come from. Pure, no dependencies on
// the rest of DRAForge.
package devicehealth

import (
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
)

// NvidiaDriverName is the NVIDIA GPU DRA driver's name (its DriverName constant), the family of
// the nvidia-* profiles and the domain of its health taint keys.
const NvidiaDriverName = "gpu.nvidia.com"

// The NVIDIA driver's health taint keys (device_health.go TaintKeyXID, TaintKeyGPULost,
// TaintKeyUnmonitored): one key per health dimension, whatever spec.driverName the pool uses.
const (
	TaintNvidiaXID         = NvidiaDriverName + "/xid"
	TaintNvidiaGPULost     = NvidiaDriverName + "/gpu-lost"
	TaintNvidiaUnmonitored = NvidiaDriverName + "/unmonitored"
)

// XIDs of the driver-shaped modes that name an XID. NVML reports an uncorrectable double-bit
// ECC error as XID 48 and an NVLink error as XID 74 (NVIDIA Xid catalog,
// docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html; XID 48 also in
// docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html).
const (
	XIDDoubleBitECC int64 = 48
	XIDNVLink       int64 = 74
	// MaxXID bounds spec.faults[].xid. The catalog's XIDs are below 200 today; the bound leaves
	// room for new ones and keeps the taint value short.
	MaxXID int64 = 999
)

// NvidiaIgnoredXIDs are the XIDs the driver treats as application errors (device_health.go
// xidsToSkip): their taint has effect None, informational, instead of NoSchedule. The driver's
// --additional-xids-to-ignore flag, which adds to the list, is not simulated.
var NvidiaIgnoredXIDs = []int64{13, 31, 43, 45, 68, 109}

// xidDescriptions name the XIDs the driver's ignore list comments on (device_health.go) and the
// hardware XIDs the docs use, as the NVIDIA Xid catalog describes them; for explain.
var xidDescriptions = map[int64]string{
	13:  "Graphics Engine Exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "Preemptive cleanup, due to previous errors",
	48:  "double-bit (uncorrectable) ECC error",
	63:  "ECC page retirement or row remapping recorded",
	64:  "ECC page retirement or row remapping failure",
	68:  "Video processor exception",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	109: "Context Switch Timeout Error",
}

// IntelDriverName is the Intel GPU DRA driver's name (pkg/gpu/device DriverName).
const IntelDriverName = "gpu.intel.com"

// The Intel GPU driver's health: one taint per unhealthy device, key IntelTaintPrefix followed by
// the device's unhealthy categories, sorted and joined by "_", no value, effect NoExecute
// (node_state.go GetResources). The categories DRAForge's Intel faults set: the driver's own
// DeviceAbsent (the device left the PCI bus) and xpumd's names, hw.type then "." and
// hw.sensor_location (xpumd exporter translator.go; as the driver's xpumd_test.go uses them).
const (
	IntelHealthy         = "Healthy"
	IntelUnhealthy       = "Unhealthy"
	IntelTaintPrefix     = "HealthIssues-"
	IntelDeviceAbsent    = "DeviceAbsent"
	IntelMemory          = "memory"
	IntelCoreTemperature = "temperature.core.gpu"
)

// intelCategories describe the categories for explain.
var intelCategories = map[string]string{
	IntelDeviceAbsent:    "the GPU is no longer discoverable on the PCI bus",
	IntelMemory:          "GPU memory health critical",
	IntelCoreTemperature: "GPU core temperature critical",
}

// IntelCategories returns the unhealthy categories an Intel health taint names; ok is false for
// other keys.
func IntelCategories(key string) ([]string, bool) {
	rest, ok := strings.CutPrefix(key, IntelTaintPrefix)
	if !ok || rest == "" {
		return nil, false
	}
	// Category names hold no "_" (DeviceAbsent, memory, temperature.<location>).
	return strings.Split(rest, "_"), true
}

// ReportsUnhealthy reports whether a driver marks a device with taint t unhealthy in its pod
// resource health (KEP-4680): the Intel driver reports its devices' overall health
// (cmd/kubelet-gpu-plugin/resourceHealthPodStatus.go), Unhealthy with any unhealthy category;
// the NVIDIA driver v0.4.1 reports none.
func ReportsUnhealthy(t resourcev1.DeviceTaint) bool {
	_, ok := IntelCategories(t.Key)
	return ok
}

// IgnoredXID reports whether the NVIDIA driver publishes XID xid as informational (effect None).
func IgnoredXID(xid int64) bool { return slices.Contains(NvidiaIgnoredXIDs, xid) }

// Meaning explains a health taint of the NVIDIA or Intel driver, for explain; "" for other keys.
func Meaning(t resourcev1.DeviceTaint) string {
	if cats, ok := IntelCategories(t.Key); ok {
		parts := make([]string, len(cats))
		for i, c := range cats {
			parts[i] = c
			if d := intelCategories[c]; d != "" {
				parts[i] += " (" + d + ")"
			}
		}
		return "Intel GPU driver health: unhealthy " + strings.Join(parts, ", ") + "; effect NoExecute evicts the pods using the GPU"
	}
	switch t.Key {
	case TaintNvidiaXID:
		xid, err := strconv.ParseInt(t.Value, 10, 64)
		if err != nil {
			return "NVIDIA driver health event: XID " + t.Value
		}
		msg := "NVIDIA driver health event: XID " + t.Value
		if d := xidDescriptions[xid]; d != "" {
			msg += " (" + d + ")"
		}
		if IgnoredXID(xid) {
			return msg + ", an application error the driver publishes as informational (effect None)"
		}
		return msg + ", a critical error"
	case TaintNvidiaGPULost:
		return "NVIDIA driver health event: a GPU was lost (NVML ERROR_GPU_IS_LOST); the driver taints every GPU of the node"
	case TaintNvidiaUnmonitored:
		return "NVIDIA driver health event: the driver could not register health events for the GPU (unmonitored, informational)"
	}
	return ""
}
