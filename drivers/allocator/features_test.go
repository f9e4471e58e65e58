package allocator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/featuregates"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
)

// The allocator decides as kube-scheduler does with the cluster's gates: with the 1.37 defaults
// a device with binding conditions and a partition consuming counters are allocatable; with
// the gate off, they are not.
func TestAllocatorFollowsFeatureGates(t *testing.T) {
	withGates := func(flag string) *Allocator {
		g, err := featuregates.Parse(flag)
		if err != nil {
			t.Fatal(err)
		}
		f := g.Allocator()
		a := New(Options{Features: &f})
		a.UpsertClass(newClass("gpu"))
		a.UpsertNode(newNode("node-a"))
		s := newSlice("node-a", 1, nil)
		s.Spec.Devices[0].BindingConditions = []string{"dra.example.com/is-prepared"}
		s.Spec.Devices[0].BindingFailureConditions = []string{"dra.example.com/failed"}
		a.UpsertSlice(compactslice.From(s))
		return a
	}
	r := mustAllocate(t, withGates(""), newClaim("bound", exactly("gpu", "gpu", 1)))
	if got := r.Devices.Results[0].BindingConditions; len(got) != 1 {
		t.Errorf("binding conditions are copied into the result, got %v", got)
	}
	pending(t, withGates("DRADeviceBindingConditions=false"), newClaim("bound", exactly("gpu", "gpu", 1)))

	mig := func(flag string) *Allocator {
		g, err := featuregates.Parse(flag)
		if err != nil {
			t.Fatal(err)
		}
		f := g.Allocator()
		a := New(Options{Features: &f})
		for _, s := range migSlices(t) {
			a.UpsertSlice(compactslice.From(s))
		}
		a.UpsertNode(newNode("node-a"))
		a.UpsertClass(realClass("mig.nvidia.com", "gpu.nvidia.com", "mig"))
		return a
	}
	mustAllocate(t, mig(""), newClaim("mig", exactly("mig", "mig.nvidia.com", 1)))
	pending(t, mig("DRAPartitionableDevices=false"), newClaim("mig", exactly("mig", "mig.nvidia.com", 1)))
}

func migSlices(t *testing.T) []*resourcev1.ResourceSlice {
	t.Helper()
	p := pooltest.Pool("ns", "mig", "", simdevice.PoolSpec{DriverName: "gpu.nvidia.com", DeviceType: "gpu", DeviceCount: 1,
		Profile: simdevice.ProfileNvidiaMIGA100, TargetNodes: []string{"node-a"}})
	s, err := simdevice.DesiredSlices(p, []*corev1.Node{newNode("node-a")})
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range s {
		sl.Spec.Pool.Generation = 1
	}
	return s
}
