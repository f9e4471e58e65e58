package simdevice

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// TestProfileEnumsAgree: the CRD's enum (both copies) and the CUE schema list exactly the
// profiles Validate accepts.
func TestProfileEnumsAgree(t *testing.T) {
	var want []string
	for _, p := range Profiles() {
		want = append(want, string(p))
	}
	for _, file := range []string{"../../deploy/crds/simulateddevicepool-crd.yaml", "../../deploy/helm/draforge/crds/simulateddevicepool-crd.yaml"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema struct {
							Properties struct {
								Spec struct {
									Properties struct {
										Profile struct {
											Enum []string `json:"enum"`
										} `json:"profile"`
									} `json:"properties"`
								} `json:"spec"`
							} `json:"properties"`
						} `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		got := slices.Sorted(slices.Values(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties.Profile.Enum))
		if !slices.Equal(got, want) {
			t.Errorf("%s: profile enum %v, want %v", file, got, want)
		}
	}
	// The enum is either written on the field or in a #Profile definition (generated).
	files, _ := filepath.Glob("../../schemas/*.cue")
	var m []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m = regexp.MustCompile(`(?m)^\s*(?:#Profile|profile\?):\s*("[^\n]+)$`).FindStringSubmatch(string(raw)); m != nil {
			break
		}
	}
	if m == nil {
		t.Fatal("schemas/*.cue: no profile enum")
	}
	var got []string
	for _, alt := range strings.Split(m[1], "|") {
		got = append(got, strings.Trim(strings.TrimSpace(alt), `"`))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("CUE profile enum %v, want %v", got, want)
	}
}

// TestSlicesWithinLimitsForLargeNodes: many partitionable GPUs on one node need several counter
// slices (at most 8 sets each) and device slices of at most 64 devices; every device's counter
// set is published in the same pool.
func TestSlicesWithinLimitsForLargeNodes(t *testing.T) {
	for _, tc := range []struct {
		profile        Profile
		gpus           int
		counterSlices  int
		devicesPerGPU  int
		slicePerDevice bool
	}{
		{ProfileNvidiaMIGH100, 20, 3, 26, true},
		{ProfileNvidiaMIGA100, 9, 2, 25, true},
		{ProfileExampleGPU, 30, 4, 5, false},
	} {
		p := newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = tc.profile, tc.gpus })
		got := mustSlices(t, p)
		sets, devices, counterSlices := map[string]bool{}, 0, 0
		for i, s := range got {
			if s.Spec.Pool.ResourceSliceCount != int64(len(got)) {
				t.Errorf("%s: slice %d resourceSliceCount %d, want %d", tc.profile, i, s.Spec.Pool.ResourceSliceCount, len(got))
			}
			if len(s.Spec.SharedCounters) > 0 {
				if i != counterSlices {
					t.Errorf("%s: counter slices come first", tc.profile)
				}
				counterSlices++
			}
			for _, cs := range s.Spec.SharedCounters {
				sets[cs.Name] = true
			}
			devices += len(s.Spec.Devices)
		}
		if counterSlices != tc.counterSlices || len(sets) != tc.gpus || devices != tc.gpus*tc.devicesPerGPU {
			t.Errorf("%s: %d counter slices, %d sets, %d devices", tc.profile, counterSlices, len(sets), devices)
		}
		if tc.slicePerDevice && len(got) != tc.counterSlices+tc.gpus {
			t.Errorf("%s: want one device slice per GPU, got %d slices", tc.profile, len(got))
		}
		if !tc.slicePerDevice && len(got)-counterSlices != (devices+63)/64 {
			t.Errorf("%s: devices must be packed 64 per slice, got %d device slices", tc.profile, len(got)-counterSlices)
		}
		for _, s := range got {
			for _, d := range s.Spec.Devices {
				for _, c := range d.ConsumesCounters {
					if !sets[c.CounterSet] {
						t.Errorf("%s: device %s consumes unknown counter set %s", tc.profile, d.Name, c.CounterSet)
					}
				}
			}
		}
	}
}

// TestFaultsHitPhysicalDevices: with a partitionable profile a fault names the physical GPU; an
// unhealthy GPU taints all its partitions, a disappeared one takes its partitions and counter
// set with it.
func TestFaultsHitPhysicalDevices(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.Profile, s.DeviceCount = ProfileNvidiaMIGH100, 3
		s.Faults = []Fault{
			{Device: intstr.FromString("gpu-0"), Mode: FaultUnhealthy},
			{Device: intstr.FromInt32(2), Mode: FaultDisappear},
		}
	})
	tainted, clean, sets := 0, 0, map[string]bool{}
	for _, s := range mustSlices(t, p) {
		for _, cs := range s.Spec.SharedCounters {
			sets[cs.Name] = true
		}
		for _, d := range s.Spec.Devices {
			switch {
			case strings.HasPrefix(d.Name, "gpu-2"):
				t.Errorf("%s must have disappeared with its GPU", d.Name)
			case strings.HasPrefix(d.Name, "gpu-0") && len(d.Taints) == 1 && d.Taints[0].Key == TaintUnhealthy:
				tainted++
			case strings.HasPrefix(d.Name, "gpu-1") && len(d.Taints) == 0:
				clean++
			default:
				t.Errorf("%s: taints %v", d.Name, d.Taints)
			}
		}
	}
	if tainted != 26 || clean != 26 || len(sets) != 2 || sets["gpu-2-counter-set"] {
		t.Errorf("tainted %d, clean %d, counter sets %v", tainted, clean, sets)
	}
}

// BenchmarkDesiredSlicesMIG: one node of 8 H100s with DynamicMIG (9 slices, 208 devices).
func BenchmarkDesiredSlicesMIG(b *testing.B) {
	p := newPool(func(s *PoolSpec) { s.Profile, s.DeviceCount = ProfileNvidiaMIGH100, 8 })
	nodes := testNodes()[1:2]
	for b.Loop() {
		if _, err := DesiredSlices(p, nodes); err != nil {
			b.Fatal(err)
		}
	}
}

// Only the network drivers write status.devices by default; spec.deviceStatus overrides.
func TestReportsDeviceStatus(t *testing.T) {
	for _, p := range Profiles() {
		want := p == ProfileMellanoxNIC || p == ProfileSRIOVVF
		if got := (&PoolSpec{Profile: p}).ReportsDeviceStatus(); got != want {
			t.Errorf("profile %s: reports %v, want %v", p, got, want)
		}
	}
	if (&PoolSpec{}).ReportsDeviceStatus() {
		t.Error("a pool without a profile reports device status")
	}
	off, on := false, true
	if (&PoolSpec{Profile: ProfileSRIOVVF, DeviceStatus: &off}).ReportsDeviceStatus() || !(&PoolSpec{DeviceStatus: &on}).ReportsDeviceStatus() {
		t.Error("spec.deviceStatus does not override the profile")
	}
}
