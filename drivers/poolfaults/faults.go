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

// Modes are the accepted --mode values.
var Modes = []simdevice.FaultMode{simdevice.FaultUnhealthy, simdevice.FaultCapacityExhausted, simdevice.FaultDisappear, simdevice.FaultBindingFailure, simdevice.FaultHealthy}

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

// DeviceRef parses a device given as a name ("gpu-1") or an index ("1").
func DeviceRef(s string) intstr.IntOrString {
	if i, err := strconv.Atoi(s); err == nil && i >= 0 {
		return intstr.FromInt32(int32(i))
	}
	return intstr.FromString(s)
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

// Set returns the pool's faults with any fault on the same device and node replaced by one
// with mode; mode "healthy" removes the device's faults on that node instead of recording a
// no-op fault. The result is validated with the pool's own validation.
func Set(p *simdevice.Pool, device intstr.IntOrString, node string, mode simdevice.FaultMode) ([]simdevice.Fault, error) {
	key := target(p, device)
	if key == "" {
		return nil, fmt.Errorf("SimulatedDevicePool %s/%s has no device %s (%s)", p.Namespace, p.Name, device.String(), deviceNames(p))
	}
	var out []simdevice.Fault
	for _, f := range p.Spec.Faults {
		if f.Node == node && target(p, f.Device) == key {
			continue
		}
		out = append(out, f)
	}
	if mode != simdevice.FaultHealthy {
		out = append(out, simdevice.Fault{Device: device, Node: node, Mode: mode})
	}
	check := *p
	check.Spec.Faults = out
	if errs := check.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
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
