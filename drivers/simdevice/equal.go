package simdevice

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// SlicesEqual reports whether the stored slice actual already matches desired, so the publisher
// can skip the write. It compares the name, the labels DRAForge sets (other labels on actual are
// ignored) and the spec, ignoring fields the server or the publisher sets:
// metadata other than name and labels, Pool.Generation (owned by the publisher, see
// DesiredSlices) and the taints' TimeAdded (filled in by the API server). Quantities are
// compared by value, and nil and empty lists and maps are equal.
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
	return equality.Semantic.DeepEqual(normalize(desired.Spec), normalize(actual.Spec))
}

func normalize(s resourcev1.ResourceSliceSpec) resourcev1.ResourceSliceSpec {
	s = *s.DeepCopy()
	s.Pool.Generation = 0
	for i := range s.Devices {
		for j := range s.Devices[i].Taints {
			s.Devices[i].Taints[j].TimeAdded = nil
		}
	}
	return s
}
