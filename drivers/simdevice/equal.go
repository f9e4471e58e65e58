package simdevice

import (
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// SlicesEqual reports whether the stored slice actual already matches desired, so the publisher
// can skip the write. It compares the name, the labels DRAForge sets (other labels on actual are
// ignored) and the spec, ignoring fields the server or the publisher sets:
// metadata other than name and labels, Pool.Generation (owned by the publisher, see
// DesiredSlices) and the taints' TimeAdded (filled in by the API server). Quantities are
// compared by value, and nil and empty lists and maps are equal. Attribute and capacity names
// qualified with the slice's own driver domain equal their short form: the API and the
// allocator read "<driver>/name" and "name" as the same ID, and releases before this one
// published the qualified form, so an upgrade must not rewrite every slice for it.
//
// A stored slice without nodeAllocatableResources on any device equals a desired one with them:
// with the DRANodeAllocatableResources gate off (alpha, off by default in 1.37) the API server
// drops the field from every device of a slice it writes (kubernetes v1.37.2
// pkg/registry/resource/resourceslice/strategy.go, dropDisabledDRANodeAllocatableResourcesFields),
// so writing it again would change nothing and repeat forever. NodeAllocatableDropped tells
// when that happened.
func SlicesEqual(desired, actual *resourcev1.ResourceSlice) bool {
	if desired == nil || actual == nil {
		return desired == actual
	}
	if desired.Name != actual.Name {
		return false
	}
	for k, v := range desired.Labels {
		if got, ok := actual.Labels[k]; !ok || got != v {
			return false
		}
	}
	d, okD := normalize(desired.Spec)
	a, okA := normalize(actual.Spec)
	if NodeAllocatableDropped(desired, actual) {
		for i := range d.Devices {
			d.Devices[i].NodeAllocatableResources = nil
		}
	}
	return okD && okA && equality.Semantic.DeepEqual(d, a)
}

// NodeAllocatableDropped reports whether desired maps node-allocatable resources
// (nodeAllocatableResources) and the stored actual has none on any device: the API server
// dropped them, its DRANodeAllocatableResources gate being off.
func NodeAllocatableDropped(desired, actual *resourcev1.ResourceSlice) bool {
	return desired != nil && actual != nil && hasNodeAllocatable(desired) && !hasNodeAllocatable(actual)
}

func hasNodeAllocatable(s *resourcev1.ResourceSlice) bool {
	for i := range s.Spec.Devices {
		if len(s.Spec.Devices[i].NodeAllocatableResources) > 0 {
			return true
		}
	}
	return false
}

// normalize drops the ignored fields and shortens names in the driver's domain; ok is false
// when a device names one ID both ways (then nothing is taken as equal).
func normalize(s resourcev1.ResourceSliceSpec) (_ resourcev1.ResourceSliceSpec, ok bool) {
	s = *s.DeepCopy()
	s.Pool.Generation = 0
	for i := range s.Devices {
		d := &s.Devices[i]
		for j := range d.Taints {
			d.Taints[j].TimeAdded = nil
		}
		if d.Attributes, ok = shortNames(d.Attributes, s.Driver); !ok {
			return s, false
		}
		if d.Capacity, ok = shortNames(d.Capacity, s.Driver); !ok {
			return s, false
		}
	}
	return s, true
}

// shortNames returns m with "<driver>/" removed from its keys; ok is false on a collision.
func shortNames[V any](m map[resourcev1.QualifiedName]V, driver string) (map[resourcev1.QualifiedName]V, bool) {
	prefix := driver + "/"
	qualified := false
	for k := range m {
		if strings.HasPrefix(string(k), prefix) {
			qualified = true
			break
		}
	}
	if !qualified {
		return m, true
	}
	out := make(map[resourcev1.QualifiedName]V, len(m))
	for k, v := range m {
		short := resourcev1.QualifiedName(strings.TrimPrefix(string(k), prefix))
		if _, dup := out[short]; dup {
			return nil, false
		}
		out[short] = v
	}
	return out, true
}
