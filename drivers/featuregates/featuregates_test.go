package featuregates

import (
	"context"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// The 1.37 defaults: what kube-scheduler v1.37.2 passes to the allocator without flags.
func TestDefaultsAreKubernetes137(t *testing.T) {
	want := structured.Features{
		AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true,
		DeviceBindingAndStatus: true, ConsumableCapacity: true, FractionalCapacityRange: true,
	}
	if got := Defaults().Allocator(); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	if s := Defaults().String(); s != "" {
		t.Errorf("defaults differ from themselves: %q", s)
	}
}

func TestParse(t *testing.T) {
	for flag, want := range map[string]func(f structured.Features) bool{
		"":                                   func(f structured.Features) bool { return f == Defaults().Allocator() },
		"DRAListTypeAttributes=true":         func(f structured.Features) bool { return f.ListTypeAttributes },
		" DRADeviceBindingConditions=false ": func(f structured.Features) bool { return !f.DeviceBindingAndStatus && f.ConsumableCapacity },
		"SchedulerQueueingHints=true,DRADeviceTaints=false,DRADeviceTaintRules=false": func(f structured.Features) bool {
			return !f.DeviceTaints // a non-DRA gate is ignored
		},
		"DRAConsumableCapacity=false,DRAFractionalCapacityRange=false": func(f structured.Features) bool {
			return !f.ConsumableCapacity && !f.FractionalCapacityRange
		},
		"DRAPartitionableDevices=false": func(f structured.Features) bool { return !f.PartitionableDevices },
	} {
		g, err := Parse(flag)
		if err != nil {
			t.Errorf("%q: %v", flag, err)
			continue
		}
		if !want(g.Allocator()) || (strings.Contains(flag, "DRADeviceTaintRules=false") == g.DeviceTaintRules()) {
			t.Errorf("%q: features %+v", flag, g.Allocator())
		}
	}
	for flag, msg := range map[string]string{
		"DRAAdminAccess=false":                                            "locked to true",
		"DRAConsumableCapacty=false":                                      "unrecognized DRA feature gate DRAConsumableCapacty",
		"DRAConsumableCapacity=false":                                     "DRAFractionalCapacityRange is enabled, but depends on features that are disabled: [DRAConsumableCapacity]",
		"DRAPartitionableDevices=false,DRADeviceCompatibilityGroups=true": "DRADeviceCompatibilityGroups is enabled, but depends",
		"DRADeviceTaints":                                                 "missing bool value",
		"DRADeviceTaints=maybe":                                           "invalid value of DRADeviceTaints",
		"DRADeviceTaints=false":                                           "DRADeviceTaintRules is enabled, but depends on features that are disabled: [DRADeviceTaints]",
	} {
		if _, err := Parse(flag); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: want an error containing %q, got %v", flag, msg, err)
		}
	}
}

// Every combination a cluster can run with is accepted by the structured allocator (an
// unsupported feature set is an error at NewAllocator).
func TestAllocatorAcceptsParsedFeatures(t *testing.T) {
	for _, flag := range []string{"", "DRAListTypeAttributes=true", "DRADerivedAttributes=true,DRADeviceCompatibilityGroups=true,DRAOptionalNodeOperations=true", "DRAPartitionableDevices=false,DRADeviceTaints=false,DRADeviceTaintRules=false"} {
		g, err := Parse(flag)
		if err != nil {
			t.Fatal(err)
		}
		f := g.Allocator()
		_, err = structured.NewAllocator(context.Background(), f, structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()},
			classes{}, []*resourcev1.ResourceSlice{}, cel.NewCache(1, CEL(f)))
		if err != nil {
			t.Errorf("%q: %v", flag, err)
		}
	}
}

type classes struct{}

func (classes) List() ([]*resourcev1.DeviceClass, error)    { return nil, nil }
func (classes) Get(string) (*resourcev1.DeviceClass, error) { return nil, nil }
