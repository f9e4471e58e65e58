// Package featuregates turns kube-scheduler's DRA feature gates into the features of the
// scheduler's structured allocator, so DRAForge allocates exactly what kube-scheduler would: the
// same devices eligible, the same allocator implementation (stable, incubating or experimental).
//
// The gates, their Kubernetes 1.37 defaults, locks and dependencies mirror kubernetes v1.37.2
// pkg/features/kube_features.go (defaultVersionedKubernetesFeatureGates and
// defaultKubernetesFeatureGateDependencies); the mapping mirrors AllocatorFeatures in
// pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, which reads them through
// pkg/scheduler/framework/plugins/feature/feature.go.
package featuregates

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// KubernetesVersion is the release whose gate defaults Defaults returns.
const KubernetesVersion = "1.37"

// gate is one feature gate at KubernetesVersion.
type gate struct {
	def    bool
	locked bool // LockToDefault: setting it to the other value is an error
	deps   []string
}

// gates are the DRA gates kube-scheduler's allocator depends on, and what they depend on.
var gates = map[string]gate{
	"DynamicResourceAllocation":    {def: true, locked: true},
	"NodeDeclaredFeatures":         {def: true, locked: true},
	"DRAAdminAccess":               {def: true, locked: true, deps: []string{"DynamicResourceAllocation"}},
	"DRAPrioritizedList":           {def: true, locked: true, deps: []string{"DynamicResourceAllocation"}},
	"DRAResourceClaimDeviceStatus": {def: true, locked: true},
	"DRADeviceTaints":              {def: true, deps: []string{"DynamicResourceAllocation"}},
	// GA in 1.37, not yet locked (LockToDefault in 1.38): the scheduler's ResourceSlice tracker
	// applies DeviceTaintRules only with it on.
	"DRADeviceTaintRules":          {def: true, deps: []string{"DRADeviceTaints"}},
	"DRAPartitionableDevices":      {def: true, deps: []string{"DynamicResourceAllocation"}},
	"DRAConsumableCapacity":        {def: true, deps: []string{"DynamicResourceAllocation"}},
	"DRAFractionalCapacityRange":   {def: true, deps: []string{"DRAConsumableCapacity"}},
	"DRADeviceBindingConditions":   {def: true, deps: []string{"DynamicResourceAllocation", "DRAResourceClaimDeviceStatus"}},
	"DRAListTypeAttributes":        {def: false, deps: []string{"DynamicResourceAllocation"}},
	"DRAOptionalNodeOperations":    {def: false, deps: []string{"DynamicResourceAllocation", "NodeDeclaredFeatures"}},
	"DRADerivedAttributes":         {def: false, deps: []string{"DynamicResourceAllocation"}},
	"DRADeviceCompatibilityGroups": {def: false, deps: []string{"DynamicResourceAllocation", "DRAPartitionableDevices"}},
}

// Gates is the state of every gate in gates.
type Gates map[string]bool

// Defaults returns the gates as a kube-scheduler of KubernetesVersion has them without flags.
func Defaults() Gates {
	g := Gates{}
	for name, s := range gates {
		g[name] = s.def
	}
	return g
}

// Parse reads a --feature-gates value as kube-scheduler does ("Name=true,Other=false") over the
// defaults. Gates that do not affect allocation (not DRA*) are ignored, so the scheduler's whole
// flag can be passed; an unknown DRA gate, a bad value, changing a locked gate or enabling a gate
// whose dependency is disabled is an error, as it would stop kube-scheduler from starting.
func Parse(flag string) (Gates, error) {
	g := Defaults()
	for _, kv := range strings.Split(flag, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("--feature-gates: %q: missing bool value for %s", kv, name)
		}
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("--feature-gates: invalid value of %s: %s, err: %v", name, value, err)
		}
		s, known := gates[name]
		switch {
		case !known && (strings.HasPrefix(name, "DRA") || name == "DynamicResourceAllocation"):
			return nil, fmt.Errorf("--feature-gates: unrecognized DRA feature gate %s (known: %s)", name, strings.Join(slices.Sorted(maps.Keys(gates)), ", "))
		case !known:
			continue // not an allocator concern
		case s.locked && on != s.def:
			return nil, fmt.Errorf("--feature-gates: cannot set feature gate %s to %v, feature is locked to %v in Kubernetes %s", name, on, s.def, KubernetesVersion)
		}
		g[name] = on
	}
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		if !g[name] {
			continue
		}
		var off []string
		for _, d := range gates[name].deps {
			if !g[d] {
				off = append(off, d)
			}
		}
		if len(off) > 0 {
			return nil, fmt.Errorf("--feature-gates: %s is enabled, but depends on features that are disabled: %v", name, off)
		}
	}
	return g, nil
}

// Allocator returns the structured allocator's features, as kube-scheduler's AllocatorFeatures
// derives them from the gates.
func (g Gates) Allocator() structured.Features {
	return structured.Features{
		AdminAccess:             g["DRAAdminAccess"],
		PrioritizedList:         g["DRAPrioritizedList"],
		PartitionableDevices:    g["DRAPartitionableDevices"],
		DeviceTaints:            g["DRADeviceTaints"],
		DeviceBindingAndStatus:  g["DRADeviceBindingConditions"] && g["DRAResourceClaimDeviceStatus"],
		ConsumableCapacity:      g["DRAConsumableCapacity"],
		FractionalCapacityRange: g["DRAFractionalCapacityRange"],
		ListTypeAttributes:      g["DRAListTypeAttributes"],
		OptionalNodeOperations:  g["DRAOptionalNodeOperations"],
		DerivedAttributes:       g["DRADerivedAttributes"],
		CompatibilityGroups:     g["DRADeviceCompatibilityGroups"],
	}
}

// DeviceTaintRules reports whether DeviceTaintRules taint devices (kube-scheduler starts its
// ResourceSlice tracker with EnableDeviceTaintRules from this gate).
func (g Gates) DeviceTaintRules() bool { return g["DRADeviceTaintRules"] }

// CEL returns the CEL environment's features for a given set of allocator features, as
// kube-scheduler builds its CEL cache (dynamicresources.go New).
func CEL(f structured.Features) cel.Features {
	return cel.Features{EnableConsumableCapacity: f.ConsumableCapacity, EnableListTypeAttributes: f.ListTypeAttributes}
}

// String renders the gates that differ from the defaults, sorted ("" when none do).
func (g Gates) String() string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(g)) {
		if g[name] != gates[name].def {
			out = append(out, name+"="+strconv.FormatBool(g[name]))
		}
	}
	return strings.Join(out, ",")
}
