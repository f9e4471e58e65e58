package simdevice

import (
	"maps"
	"slices"
)

// KnownProfiles are the profiles Validate accepts. The CRD's and the CUE schema's profile enum
// and their per-device limit rule are generated from this list and ProfileNames
// (drivers/simdevice/schemagen); a test fails when the committed schemas are stale.
var KnownProfiles = Profiles()

// ProfileNames returns the attribute and capacity names (unqualified, sorted) a profile adds
// to every device.
func ProfileNames(p Profile) (attributes, capacities []string) {
	attributes = slices.Sorted(maps.Keys(profileAttributes(p, "", 0)))
	capacities = slices.Sorted(maps.Keys(profileCapacities(p)))
	return attributes, capacities
}
