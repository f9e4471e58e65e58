package simdevice

import (
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/devicehealth"
)

// The Intel GPU driver's health, as intel/intel-resource-drivers-for-kubernetes publishes it at
// the commit the intel-gpu profile mirrors (1da939f): the kubelet plugin keeps a health status
// per category and device (pkg/gpu/device DeviceInfo.HealthStatus), fed by xpumd
// (cmd/kubelet-gpu-plugin/xpumd.go: a category is Unhealthy at severity critical and above, and
// at warning with --ignore-health-warning=false; the chart's default ignores warnings) and by
// udev (node_state.go RefreshDeviceOnDriverEvent: a device no longer discoverable gets category
// DeviceAbsent). A device with an Unhealthy category is published with attribute
// health=Unhealthy and one taint HealthIssues-<its unhealthy categories, sorted, joined by "_">
// with effect NoExecute (node_state.go GetResources), so kube-controller-manager evicts the
// pods using it; the taint goes once every category is healthy again.

// IntelDriverName is the Intel GPU DRA driver's name.
const IntelDriverName = devicehealth.IntelDriverName

// AttrIntelHealth is the Intel driver's device attribute with its overall health (Healthy,
// Unhealthy or Unknown: pkg/gpu/device DeviceInfo.Health).
const AttrIntelHealth = "health"

// intelHealthCategory is the health category an Intel fault mode makes Unhealthy: the driver's
// own DeviceAbsent, and xpumd's names (hw.type, then "." and hw.sensor_location: xpumd exporter
// translator.go updateStatus; the values as the driver's xpumd_test.go uses them).
func intelHealthCategory(m FaultMode) string {
	switch m {
	case FaultDeviceAbsent:
		return devicehealth.IntelDeviceAbsent
	case FaultMemoryCritical:
		return devicehealth.IntelMemory
	case FaultOverheat:
		return devicehealth.IntelCoreTemperature
	}
	return ""
}

// addCategory records an unhealthy category once.
func addCategory(cats []string, c string) []string {
	if slices.Contains(cats, c) {
		return cats
	}
	return append(cats, c)
}

// intelHealthTaint is the driver's taint for a device whose categories are unhealthy.
func intelHealthTaint(categories []string) resourcev1.DeviceTaint {
	sorted := slices.Sorted(slices.Values(categories))
	return resourcev1.DeviceTaint{Key: devicehealth.IntelTaintPrefix + strings.Join(sorted, "_"), Effect: resourcev1.DeviceTaintEffectNoExecute}
}
