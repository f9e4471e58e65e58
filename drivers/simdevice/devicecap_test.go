package simdevice

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// publishedOnOneNode counts the devices DesiredSlices publishes on node-a.
func publishedOnOneNode(t *testing.T, p *Pool) int {
	t.Helper()
	n := 0
	for _, s := range mustSlices(t, p) {
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "node-a" {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.NodeName == nil || *d.NodeName == "node-a" {
				n++
			}
		}
	}
	return n
}

// TestDevicesPerNodeCountsWhatIsPublished: the number the cap is checked against is the number
// of devices DesiredSlices really publishes on a node, for every profile (a MIG GPU is 25 or 26
// devices, a CPX GPU 8, a NIC port 8 virtual functions) and for groups with partitions.
func TestDevicesPerNodeCountsWhatIsPublished(t *testing.T) {
	for _, prof := range append([]Profile{""}, KnownProfiles...) {
		n := 3
		if slices.Contains(WholeNodeProfiles(), prof) {
			n = 1 // one device for the whole node
		}
		p := newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = prof, n })
		if got, want := publishedOnOneNode(t, p), p.Spec.DevicesPerNode(); got != want || want != n*DevicesPerPhysical(prof) {
			t.Errorf("profile %q: published %d devices, DevicesPerNode %d, %d × DevicesPerPhysical %d", prof, got, want, n, n*DevicesPerPhysical(prof))
		}
	}
	for name, want := range map[Profile]int{ProfileNvidiaMIGA100: 25, ProfileNvidiaMIGH100: 26, ProfileAMDGPUCPX: 8, ProfileSRIOVVF: 8, ProfileExampleGPU: 5, ProfileNvidiaGPU: 1, "no-such-profile": 1} {
		if got := DevicesPerPhysical(name); got != want {
			t.Errorf("DevicesPerPhysical(%q) = %d, want %d", name, got, want)
		}
	}
	p := groupPool(func(s *PoolSpec) {
		s.DeviceGroups = []DeviceGroup{{DeviceType: "gpu", Count: 3, Partitions: 4}, {DeviceType: "nic", Count: 2}, {DeviceType: "remote", Count: 2, PerDeviceNodeSelection: true}}
	})
	if got, want := publishedOnOneNode(t, p), p.Spec.DevicesPerNode(); got != want || want != 3*5+2+2 {
		t.Errorf("groups: published %d devices, DevicesPerNode %d, want 19", got, want)
	}
}

// TestDeviceCapValidation: MaxDevicesPerNode is allowed, one more is not, with the field path
// and the cap in the message; counts already out of their own range are reported only there.
func TestDeviceCapValidation(t *testing.T) {
	eight := make([]DeviceGroup, 8)
	for i := range eight {
		eight[i] = DeviceGroup{DeviceType: fmt.Sprintf("t%d", i), Count: MaxDeviceCount}
	}
	for name, tc := range map[string]struct {
		pool *Pool
		want string // "" for valid
	}{
		"cpx at the cap":       {newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = ProfileAMDGPUCPX, 128 }), ""},
		"whole node, one":      {newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = ProfileDRACPUMachine, 1 }), ""},
		"whole node, two":      {newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = ProfileDRACPUMachine, 2 }), `spec.deviceCount: Invalid value: 2: profile "dra-cpu-machine" publishes one device for the whole node: deviceCount must be 1`},
		"mig a100 below":       {newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = ProfileNvidiaMIGA100, 40 }), ""},
		"mig a100 one above":   {newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = ProfileNvidiaMIGA100, 41 }), `spec.deviceCount: Invalid value: 41: the pool would publish 1025 devices per node (25 per physical device with profile "nvidia-mig-a100"), at most 1024 are allowed`},
		"8 full groups at cap": {groupPool(func(s *PoolSpec) { s.DeviceGroups = eight }), ""},
		"partitions at cap":    {groupPool(func(s *PoolSpec) { s.DeviceGroups = []DeviceGroup{{DeviceType: "gpu", Count: 128, Partitions: 7}} }), ""},
		"groups one above": {groupPool(func(s *PoolSpec) {
			s.DeviceGroups = []DeviceGroup{{DeviceType: "gpu", Count: 128, Partitions: 7}, {DeviceType: "nic", Count: 1}}
		}), "spec.deviceGroups: Invalid value: 1025: the pool would publish 1025 devices per node (the sum over the groups of count × (1 + partitions)), at most 1024 are allowed"},
	} {
		var msgs []string
		for _, e := range tc.pool.Validate() {
			msgs = append(msgs, e.Error())
		}
		switch {
		case tc.want == "" && len(msgs) > 0:
			t.Errorf("%s: want valid, got %v", name, msgs)
		case tc.want != "" && (len(msgs) != 1 || msgs[0] != tc.want):
			t.Errorf("%s: want exactly\n  %s\ngot %q", name, tc.want, msgs)
		}
	}

	// A count beyond its own bound is reported there, not twice.
	for _, p := range []*Pool{
		newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = ProfileNvidiaMIGH100, 500 }),
		groupPool(func(s *PoolSpec) { s.DeviceGroups = []DeviceGroup{{DeviceType: "gpu", Count: 500, Partitions: 8}} }),
	} {
		errs := p.Validate()
		if len(errs) != 1 || strings.Contains(errs[0].Error(), "would publish") {
			t.Errorf("want only the count's own error, got %v", errs)
		}
	}
}
