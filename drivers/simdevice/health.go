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
// that driver publishes it. Only the NVIDIA GPU driver has such a monitor today
// (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, cmd/gpu-kubelet-plugin/device_health.go,
// behind its NVMLDeviceHealthCheck feature gate, alpha and off by default); a simulated pool
// whose profile mirrors it behaves as if the gate were on.

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

// HealthEventProfiles lists, sorted, the profiles that accept driver-shaped faults: those whose
// driver is the NVIDIA GPU driver, except DynamicMIG ones (see healthFaultsRefused).
func HealthEventProfiles() []Profile {
	var out []Profile
	for p, def := range profiles {
		if def.driver == NvidiaDriverName && !def.dynamicMIG {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// IsDriverFault reports whether m is a driver-shaped fault mode.
func IsDriverFault(m FaultMode) bool { return slices.Contains(DriverFaultModes, m) }

// healthFaultsRefused says why the profile cannot publish driver-shaped faults, or "".
func healthFaultsRefused(p Profile) string {
	def := profiles[p]
	names := make([]string, 0, len(HealthEventProfiles()))
	for _, h := range HealthEventProfiles() {
		names = append(names, string(h))
	}
	want := "the pool's profile must mirror the NVIDIA GPU driver (" + strings.Join(names, ", ") + ")"
	switch {
	case def.driver == NvidiaDriverName && def.dynamicMIG:
		// pkg/featuregates/featuregates.go ValidateFeatureGates (v0.4.1 and the commit the
		// profiles mirror): "DynamicMIG is currently mutually exclusive with NVMLDeviceHealthCheck".
		return fmt.Sprintf("profile %q mirrors the NVIDIA driver's DynamicMIG mode, which the driver does not run together with its NVML health monitor (feature gates DynamicMIG and NVMLDeviceHealthCheck are mutually exclusive), so it publishes no health taints; %s", p, want)
	case def.driver != NvidiaDriverName:
		if p == "" {
			return "driver-shaped fault modes are events of NVIDIA GPUs (the driver's health events, the NVLink fabric's state) and the pool has no profile: " + want
		}
		return fmt.Sprintf("driver-shaped fault modes are events of NVIDIA GPUs (the driver's health events, the NVLink fabric's state) and profile %q does not mirror it: %s", p, want)
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
