// Package poolfaults edits spec.faults of a SimulatedDevicePool: pure functions that compute the
// new fault list and the JSON merge patch that writes it with optimistic concurrency, and Patch,
// which reads, edits and writes a pool with them.
package poolfaults

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/draforge/draforge/drivers/simdevice"
)

// Modes are the accepted --mode values: DRAForge's own, then the real drivers' health events
// (simdevice.DriverFaultModes, for pools whose profile mirrors that driver).
var Modes = append([]simdevice.FaultMode{simdevice.FaultUnhealthy, simdevice.FaultCapacityExhausted, simdevice.FaultDisappear, simdevice.FaultBindingFailure, simdevice.FaultHealthy},
	simdevice.DriverFaultModes...)

// ParseMode checks a mode name.
func ParseMode(s string) (simdevice.FaultMode, error) {
	m := simdevice.FaultMode(s)
	if slices.Contains(Modes, m) {
		return m, nil
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown fault mode %q (want %s)", s, strings.Join(names, ", "))
}

// NewFault builds the fault a user asked for: device by name or index, node ("" for every
// targeted node), mode, and xid (0 when not given), which mode xid requires and no other mode
// takes (ecc and nvlink are XIDs 48 and 74 already).
func NewFault(device, node, mode string, xid int64) (simdevice.Fault, error) {
	m, err := ParseMode(mode)
	if err != nil {
		return simdevice.Fault{}, err
	}
	f := simdevice.Fault{Device: DeviceRef(device), Node: node, Mode: m}
	switch {
	case m == simdevice.FaultXID && xid == 0:
		return simdevice.Fault{}, fmt.Errorf("mode xid needs the XID code (e.g. --xid 79)")
	case m == simdevice.FaultXID && (xid < 1 || xid > simdevice.MaxXID):
		return simdevice.Fault{}, fmt.Errorf("XID %d: must be between 1 and %d", xid, simdevice.MaxXID)
	case m == simdevice.FaultXID:
		f.XID = &xid
	case xid != 0:
		return simdevice.Fault{}, fmt.Errorf("an XID is only given with mode xid (mode %s%s)", m, xidNote(m))
	}
	return f, nil
}

func xidNote(m simdevice.FaultMode) string {
	if x, ok := simdevice.FaultXIDOf(simdevice.Fault{Mode: m}); ok {
		return fmt.Sprintf(" is XID %d", x)
	}
	return ""
}

// DeviceRef parses a device given as a name ("gpu-1") or an index ("1").
func DeviceRef(s string) intstr.IntOrString {
	if i, err := strconv.Atoi(s); err == nil && i >= 0 {
		return intstr.FromInt32(int32(i))
	}
	return intstr.FromString(s)
}

// Key is the device and node a fault is on, the same for every way of naming the device (an
// index or a name); "" when the pool has no such device. Faults of one key replace each other.
func Key(p *simdevice.Pool, f simdevice.Fault) string {
	t := target(p, f.Device)
	if t == "" {
		return ""
	}
	return f.Node + "|" + t
}

// target resolves a device reference to "<group>/<index>" (the implicit group is ""), or "".
func target(p *simdevice.Pool, d intstr.IntOrString) string {
	g, i, err := p.Spec.FaultGroup(d)
	if err != nil {
		return ""
	}
	if g == nil {
		return "/" + strconv.Itoa(i)
	}
	return g.DeviceType + "/" + strconv.Itoa(i)
}

// Set returns the pool's faults with any fault on the same device and node replaced by f
// (so a new XID replaces the device's previous one, as the NVIDIA driver keeps one xid taint per
// device); mode "healthy" removes the device's faults on that node instead of recording a no-op
// fault, which is how a driver-shaped fault recovers (the taint goes). The result is validated
// with the pool's own validation.
func Set(p *simdevice.Pool, f simdevice.Fault) ([]simdevice.Fault, error) {
	key := target(p, f.Device)
	if key == "" {
		return nil, fmt.Errorf("SimulatedDevicePool %s/%s has no device %s (%s)", p.Namespace, p.Name, f.Device.String(), deviceNames(p))
	}
	if fam, ok := simdevice.FamilyOf(f.Mode); ok {
		// The pool's validation says so too, at spec.faults[i]; this names the pool and profile.
		if !slices.Contains(fam.Profiles(), p.Spec.Profile) {
			return nil, fmt.Errorf("SimulatedDevicePool %s/%s: mode %s is a health event of %s, and its profile %q does not publish it (profiles that do: %s)",
				p.Namespace, p.Name, f.Mode, fam.Product, p.Spec.Profile, profileNames(fam.Profiles()))
		}
	}
	var out []simdevice.Fault
	for _, old := range p.Spec.Faults {
		if old.Node == f.Node && target(p, old.Device) == key {
			continue
		}
		out = append(out, old)
	}
	if f.Mode != simdevice.FaultHealthy {
		out = append(out, f)
	}
	check := *p
	check.Spec.Faults = out
	if errs := check.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Merge returns the pool's faults with each of fs set as Set sets one (replacing the fault of
// the same device and node), validated once at the end: the faults of a fault campaign.
func Merge(p *simdevice.Pool, fs []simdevice.Fault) ([]simdevice.Fault, error) {
	check := *p
	check.Spec.Faults = slices.Clone(p.Spec.Faults)
	for _, f := range fs {
		if f.Mode == simdevice.FaultHealthy {
			return nil, fmt.Errorf("a campaign sets faults: mode healthy removes them")
		}
		key := target(&check, f.Device)
		if key == "" {
			return nil, fmt.Errorf("SimulatedDevicePool %s/%s has no device %s (%s)", p.Namespace, p.Name, f.Device.String(), deviceNames(p))
		}
		check.Spec.Faults = slices.DeleteFunc(check.Spec.Faults, func(old simdevice.Fault) bool {
			return old.Node == f.Node && target(&check, old.Device) == key
		})
		check.Spec.Faults = append(check.Spec.Faults, f)
	}
	if errs := check.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return check.Spec.Faults, nil
}

func profileNames(ps []simdevice.Profile) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// MergePatch is a JSON merge patch setting spec.faults (removing it when empty). With a
// resourceVersion the API server rejects the patch with Conflict if the pool changed since it
// was read, so concurrent fault edits are never lost (merge patches replace lists wholesale).
func MergePatch(resourceVersion string, faults []simdevice.Fault) ([]byte, error) {
	var f any = faults
	if len(faults) == 0 {
		f = nil
	}
	patch := map[string]any{"spec": map[string]any{"faults": f}}
	if resourceVersion != "" {
		patch["metadata"] = map[string]any{"resourceVersion": resourceVersion}
	}
	return json.Marshal(patch)
}

// deviceNames describes the pool's physical devices for an error message.
func deviceNames(p *simdevice.Pool) string {
	if len(p.Spec.DeviceGroups) == 0 {
		return fmt.Sprintf("devices are %s-0..%s-%d", p.Spec.DeviceType, p.Spec.DeviceType, p.Spec.DeviceCount-1)
	}
	var parts []string
	for _, g := range p.Spec.DeviceGroups {
		parts = append(parts, fmt.Sprintf("%s-0..%s-%d", g.DeviceType, g.DeviceType, g.Count-1))
	}
	return "devices are " + strings.Join(parts, ", ")
}
