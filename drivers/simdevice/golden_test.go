package simdevice

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// goldenPublication is testdata/golden/<profile>.yaml: what the real driver publishes for one
// node, written by hand from the driver's source and documentation (each file names them).
type goldenPublication struct {
	Driver      string `json:"driver"`
	DeviceCount int    `json:"deviceCount"`
	// PerHost names attributes whose values depend on the host (UUIDs, PCI placement): only
	// their presence and type are compared.
	PerHost []string `json:"perHost"`
	Slices  []struct {
		SharedCounters []resourcev1.CounterSet `json:"sharedCounters,omitempty"`
		// DeviceNames, when set, lists all devices of the slice and Devices details some.
		DeviceNames []string            `json:"deviceNames,omitempty"`
		Devices     []resourcev1.Device `json:"devices,omitempty"`
	} `json:"slices"`
}

// profilesWithoutDriver are DRAForge-made shapes that mirror no driver, so have no golden file.
var profilesWithoutDriver = []Profile{ProfileGeneric, ProfileMellanoxNIC}

func loadGolden(t *testing.T, file string) goldenPublication {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenPublication
	if err := yaml.UnmarshalStrict(raw, &g); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return g
}

// placeholder keeps an attribute's type and drops its value.
func placeholder(a resourcev1.DeviceAttribute) resourcev1.DeviceAttribute {
	switch {
	case a.StringValue != nil:
		return resourcev1.DeviceAttribute{StringValue: ptr.To("<per host>")}
	case a.IntValue != nil:
		return resourcev1.DeviceAttribute{IntValue: ptr.To[int64](-1)}
	case a.BoolValue != nil:
		return resourcev1.DeviceAttribute{BoolValue: ptr.To(false)}
	case a.VersionValue != nil:
		return resourcev1.DeviceAttribute{VersionValue: ptr.To("0.0.0")}
	}
	return a
}

// deviceDiff returns "" when got publishes what want does (names, attribute types and values,
// capacities with request policies, counter consumption, allowMultipleAllocations), perHost
// attributes compared by type only.
func deviceDiff(want, got resourcev1.Device, perHost []string) string {
	norm := func(d resourcev1.Device) resourcev1.Device {
		d = *d.DeepCopy()
		for _, k := range perHost {
			if a, ok := d.Attributes[resourcev1.QualifiedName(k)]; ok {
				d.Attributes[resourcev1.QualifiedName(k)] = placeholder(a)
			}
		}
		return d
	}
	w, g := norm(want), norm(got)
	if equality.Semantic.DeepEqual(w, g) {
		return ""
	}
	wy, _ := yaml.Marshal(w)
	gy, _ := yaml.Marshal(g)
	return fmt.Sprintf("device %s differs\n--- driver publishes:\n%s--- simulated:\n%s", want.Name, wy, gy)
}

func sortedCounterSets(cs []resourcev1.CounterSet) []resourcev1.CounterSet {
	out := slices.Clone(cs)
	slices.SortFunc(out, func(a, b resourcev1.CounterSet) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TestProfilesMatchRealDrivers publishes one node with each real-driver profile, under the real
// driver's name, and compares the slices with the golden copy of what that driver publishes:
// slice layout, counter sets, device names, attribute names, types and values, capacities and
// their request policies, counter consumption.
func TestProfilesMatchRealDrivers(t *testing.T) {
	for _, profile := range Profiles() {
		if slices.Contains(profilesWithoutDriver, profile) {
			continue
		}
		t.Run(string(profile), func(t *testing.T) {
			g := loadGolden(t, filepath.Join("testdata", "golden", string(profile)+".yaml"))
			p := newPool(func(s *PoolSpec) {
				s.Profile, s.DriverName, s.DeviceCount = profile, g.Driver, g.DeviceCount
			})
			got := mustSlices(t, p)
			if len(got) != len(g.Slices) {
				t.Fatalf("%d slices, the driver publishes %d", len(got), len(g.Slices))
			}
			for i, want := range g.Slices {
				s := got[i].Spec
				if s.Driver != g.Driver || s.NodeName == nil || *s.NodeName != "node-a" {
					t.Errorf("slice %d: driver %s node %v", i, s.Driver, s.NodeName)
				}
				if !equality.Semantic.DeepEqual(sortedCounterSets(want.SharedCounters), sortedCounterSets(s.SharedCounters)) {
					wy, _ := yaml.Marshal(want.SharedCounters)
					gy, _ := yaml.Marshal(s.SharedCounters)
					t.Errorf("slice %d: counter sets differ\n--- driver publishes:\n%s--- simulated:\n%s", i, wy, gy)
				}
				wantNames := want.DeviceNames
				if wantNames == nil {
					for _, d := range want.Devices {
						wantNames = append(wantNames, d.Name)
					}
				}
				byName := map[string]resourcev1.Device{}
				var gotNames []string
				for _, d := range s.Devices {
					byName[d.Name] = d
					gotNames = append(gotNames, d.Name)
				}
				slices.Sort(wantNames)
				slices.Sort(gotNames)
				if !slices.Equal(wantNames, gotNames) {
					t.Errorf("slice %d: devices\n  simulated %v\n  driver    %v", i, gotNames, wantNames)
				}
				for _, w := range want.Devices {
					if d, ok := byName[w.Name]; ok {
						if diff := deviceDiff(w, d, g.PerHost); diff != "" {
							t.Errorf("slice %d: %s", i, diff)
						}
					}
				}
			}
		})
	}
}

// TestGoldenComparisonDetectsDrift guards the comparison itself: an attribute the driver no
// longer publishes, a renamed capacity or a changed per-host attribute type must be reported.
func TestGoldenComparisonDetectsDrift(t *testing.T) {
	g := loadGolden(t, filepath.Join("testdata", "golden", string(ProfileNvidiaGPU)+".yaml"))
	want := g.Slices[0].Devices[0]
	if diff := deviceDiff(want, *want.DeepCopy(), g.PerHost); diff != "" {
		t.Fatalf("a device must equal itself: %s", diff)
	}
	for name, mutate := range map[string]func(d *resourcev1.Device){
		"extra index": func(d *resourcev1.Device) { d.Attributes["index"] = integer(0) },
		"qualified name": func(d *resourcev1.Device) {
			d.Capacity["gpu.nvidia.com/memory"] = d.Capacity["memory"]
			delete(d.Capacity, "memory")
		},
		"per-host type":   func(d *resourcev1.Device) { d.Attributes[AttrNUMANode] = str("0") },
		"fixed value":     func(d *resourcev1.Device) { d.Attributes["brand"] = str("Other") },
		"sharing enabled": func(d *resourcev1.Device) { d.AllowMultipleAllocations = ptr.To(true) },
	} {
		d := want.DeepCopy()
		mutate(d)
		if deviceDiff(want, *d, g.PerHost) == "" {
			t.Errorf("%s: not detected", name)
		}
	}
	// A per-host value may differ.
	d := want.DeepCopy()
	d.Attributes["uuid"] = str("GPU-other")
	if diff := deviceDiff(want, *d, g.PerHost); diff != "" {
		t.Errorf("per-host value must not matter: %s", diff)
	}
}
