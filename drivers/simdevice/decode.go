package simdevice

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FromUnstructured decodes a SimulatedDevicePool and fills in defaults (driverName, poolName,
// attributeDomain). It checks apiVersion and kind but does not validate the spec; call Validate.
func FromUnstructured(u *unstructured.Unstructured) (*Pool, error) {
	if u == nil || u.Object == nil {
		return nil, fmt.Errorf("simdevice: nil object")
	}
	if gv, k := u.GetAPIVersion(), u.GetKind(); gv != Group+"/"+Version || k != Kind {
		return nil, fmt.Errorf("simdevice: expected %s/%s %s, got %q %q", Group, Version, Kind, gv, k)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("simdevice: encode %s: %w", u.GetName(), err)
	}
	p := &Pool{}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("simdevice: decode %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	p.Default()
	return p, nil
}

// Default fills in the fields the CRD (or the controller) defaults.
func (p *Pool) Default() {
	if p.Spec.DriverName == "" {
		p.Spec.DriverName = DefaultDriverName
	}
	if p.Spec.PoolName == "" {
		p.Spec.PoolName = p.Name
	}
	if p.Spec.AttributeDomain == "" {
		p.Spec.AttributeDomain = p.Spec.DriverName
	}
}
