package simdevice

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/devicehealth"
)

// Driver-shaped faults: a health event of the real driver a profile mirrors, published the way
// that driver publishes it. Two drivers have such a monitor: the NVIDIA GPU driver
// (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, cmd/gpu-kubelet-plugin/device_health.go,
// behind its NVMLDeviceHealthCheck feature gate, alpha and off by default; a simulated pool
// whose profile mirrors it behaves as if the gate were on) and the Intel GPU driver
// (health_intel.go).

// Names of the NVIDIA driver's health taints (drivers/devicehealth).
const (
	NvidiaDriverName       = devicehealth.NvidiaDriverName
	TaintNvidiaXID         = devicehealth.TaintNvidiaXID
	TaintNvidiaGPULost     = devicehealth.TaintNvidiaGPULost
	TaintNvidiaUnmonitored = devicehealth.TaintNvidiaUnmonitored
	XIDDoubleBitECC        = devicehealth.XIDDoubleBitECC
	XIDNVLink              = devicehealth.XIDNVLink
	MaxXID                 = devicehealth.MaxXID
)

// FaultFamily is a driver whose events some driver-shaped fault modes are.
type FaultFamily struct {
	// Driver is the real driver's name; What says what its modes are events of.
	Driver, What string
	// Product names the driver for messages ("the NVIDIA GPU driver").
	Product string
	Modes   []FaultMode
}

// FaultFamilies are the drivers with driver-shaped faults, in DriverFaultModes order.
var FaultFamilies = []FaultFamily{
	{Driver: NvidiaDriverName, What: "NVIDIA GPUs (the driver's health events, the NVLink fabric's state)", Product: "the NVIDIA GPU driver",
		Modes: []FaultMode{FaultXID, FaultECC, FaultNVLink, FaultGPULost, FaultUnmonitored, FaultFabricDetached}},
	{Driver: IntelDriverName, What: "Intel GPUs (the driver's health monitor, fed by xpumd and udev)", Product: "the Intel GPU driver",
		Modes: []FaultMode{FaultDeviceAbsent, FaultMemoryCritical, FaultOverheat}},
}

// FamilyOf returns the family of a driver-shaped mode; ok is false for DRAForge's own modes.
func FamilyOf(m FaultMode) (FaultFamily, bool) {
	for _, f := range FaultFamilies {
		if slices.Contains(f.Modes, m) {
			return f, true
		}
	}
	return FaultFamily{}, false
}

// Profiles lists, sorted, the profiles that publish the family's events: those whose driver is
// the family's, except the NVIDIA driver's DynamicMIG ones (see faultRefused).
func (f FaultFamily) Profiles() []Profile {
	var out []Profile
	for p, def := range profiles {
		if def.driver == f.Driver && !def.dynamicMIG {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// IsDriverFault reports whether m is a driver-shaped fault mode.
func IsDriverFault(m FaultMode) bool { return slices.Contains(DriverFaultModes, m) }

// faultRefused says why the profile cannot publish driver-shaped mode m, or "".
func faultRefused(p Profile, m FaultMode) string {
	fam, ok := FamilyOf(m)
	if !ok {
		return ""
	}
	def := profiles[p]
	var names []string
	for _, h := range fam.Profiles() {
		names = append(names, string(h))
	}
	want := "the pool's profile must mirror " + fam.Product + " (" + strings.Join(names, ", ") + ")"
	switch {
	case def.driver == fam.Driver && def.dynamicMIG:
		// pkg/featuregates/featuregates.go ValidateFeatureGates (v0.4.1 and the commit the
		// profiles mirror): "DynamicMIG is currently mutually exclusive with NVMLDeviceHealthCheck".
		return fmt.Sprintf("profile %q mirrors the NVIDIA driver's DynamicMIG mode, which the driver does not run together with its NVML health monitor (feature gates DynamicMIG and NVMLDeviceHealthCheck are mutually exclusive), so it publishes no health taints; %s", p, want)
	case def.driver != fam.Driver:
		if p == "" {
			return fmt.Sprintf("fault mode %s is an event of %s and the pool has no profile: %s", m, fam.What, want)
		}
		return fmt.Sprintf("fault mode %s is an event of %s and profile %q does not mirror that driver: %s", m, fam.What, p, want)
	}
	return ""
}

// FaultXIDOf returns the XID a fault reports: Fault.XID for mode xid, 48 for ecc, 74 for nvlink,
// and false for the other modes.
func FaultXIDOf(f Fault) (int64, bool) {
	switch f.Mode {
	case FaultXID:
		if f.XID == nil {
			return 0, false
		}
		return *f.XID, true
	case FaultECC:
		return XIDDoubleBitECC, true
	case FaultNVLink:
		return XIDNVLink, true
	}
	return 0, false
}

// nvidiaHealthTaint is the taint the NVIDIA driver publishes for a driver-shaped fault
// (device_health.go healthEventToTaint): an XID gives key xid, the decimal code as value and
// NoSchedule, or None for an ignored XID (IsEventNonFatal); GPU lost gives key gpu-lost, no
// value, NoSchedule; unmonitored gives key unmonitored, no value, None.
func nvidiaHealthTaint(f Fault) resourcev1.DeviceTaint {
	if xid, ok := FaultXIDOf(f); ok {
		effect := resourcev1.DeviceTaintEffectNoSchedule
		if devicehealth.IgnoredXID(xid) {
			effect = resourcev1.DeviceTaintEffectNone
		}
		return resourcev1.DeviceTaint{Key: TaintNvidiaXID, Value: strconv.FormatInt(xid, 10), Effect: effect}
	}
	if f.Mode == FaultGPULost {
		return resourcev1.DeviceTaint{Key: TaintNvidiaGPULost, Effect: resourcev1.DeviceTaintEffectNoSchedule}
	}
	return resourcev1.DeviceTaint{Key: TaintNvidiaUnmonitored, Effect: resourcev1.DeviceTaintEffectNone}
}

// setTaint adds t, or overwrites the value and effect of the taint with its key, as the driver
// keeps one taint per key (allocatable.go AddOrUpdateTaint: a later XID replaces an earlier one).
func setTaint(ts []resourcev1.DeviceTaint, t resourcev1.DeviceTaint) []resourcev1.DeviceTaint {
	for i := range ts {
		if ts[i].Key == t.Key {
			ts[i].Value, ts[i].Effect = t.Value, t.Effect
			return ts
		}
	}
	return append(ts, t)
}

// ReportsUnhealthy reports whether the simulated kubelet plugin reports a device carrying taint
// t as Unhealthy in pod resource health (KEP-4680): DRAForge's unhealthy fault, and the Intel
// driver's health taints (that driver reports health; the NVIDIA driver v0.4.1 does not).
func ReportsUnhealthy(t resourcev1.DeviceTaint) bool {
	return t.Key == TaintUnhealthy || devicehealth.ReportsUnhealthy(t)
}
