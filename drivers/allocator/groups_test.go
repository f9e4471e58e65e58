package allocator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
)

// The tests below publish SimulatedDevicePools written with spec.deviceGroups (no profile) and
// run the scheduler's structured allocator on them: partitions exclude the whole device through
// shared counters, consumable capacity is shared within request policies, GPU and NIC align on
// the topology's pcieRoot, binding conditions reach the allocation result, and per-device node
// selection binds each device to its node.

const groupsDriver = "sim.draforge.oaslananka"

func groupsCluster(t *testing.T, features *structured.Features, spec simdevice.PoolSpec, nodes ...string) *Allocator {
	t.Helper()
	a := New(Options{Features: features})
	spec.TargetNodes = nodes
	p := &simdevice.Pool{ObjectMeta: metav1.ObjectMeta{Name: "groups", Namespace: "ns", UID: "uid"}, Spec: spec}
	publishPool(t, a, p, nodes...)
	for _, typ := range []string{"gpu", "nic"} {
		a.UpsertClass(newClass(typ, "device.driver == '"+groupsDriver+"' && device.attributes['"+groupsDriver+"'].deviceType == '"+typ+"'"))
	}
	return a
}

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func TestGroupPartitionsExcludeWholeDevice(t *testing.T) {
	a := groupsCluster(t, nil, simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{{
		DeviceType: "gpu", Count: 1, Partitions: 4, Capacities: map[string]resource.Quantity{"memory": resource.MustParse("80Gi")},
	}}}, "node-a")
	part := func(name string) *resourcev1.ResourceClaim {
		return newClaim(name, withCapacity(exactly("p", "gpu", 1, "has(device.attributes['"+groupsDriver+"'].partition)"), map[resourcev1.QualifiedName]string{"memory": "20Gi"}))
	}
	whole := newClaim("whole", exactly("w", "gpu", 1, "!has(device.attributes['"+groupsDriver+"'].partition)"))

	r := mustAllocate(t, a, part("part-0"))
	if got := devicesOf(r); len(got) != 1 || !strings.Contains(got[0], "gpu-0-part-") {
		t.Fatalf("want a partition, got %v", got)
	}
	pending(t, a, whole) // one partition taken: the whole GPU's counters are not free
	for _, n := range []string{"part-1", "part-2", "part-3"} {
		mustAllocate(t, a, part(n))
	}
	pending(t, a, part("part-4")) // the partitions counter is used up

	// The other way round: the whole device first leaves no partition.
	b := groupsCluster(t, nil, simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{{DeviceType: "gpu", Count: 1, Partitions: 2}}}, "node-a")
	if got := devicesOf(mustAllocate(t, b, whole)); len(got) != 1 || !strings.HasSuffix(got[0], "/gpu-0") {
		t.Fatalf("want the whole gpu-0, got %v", got)
	}
	pending(t, b, part("after-whole"))
}

func TestGroupConsumableCapacity(t *testing.T) {
	a := groupsCluster(t, nil, simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{{
		DeviceType: "nic", Count: 1, AllowMultipleAllocations: true,
		Capacities: map[string]resource.Quantity{"bandwidth": resource.MustParse("100G")},
		RequestPolicies: map[string]simdevice.RequestPolicy{"bandwidth": {
			Default: q("10G"), ValidRange: &simdevice.PolicyRange{Min: q("1G"), Max: q("100G")}}},
	}}}, "node-a")
	bw := func(name, v string) *resourcev1.ResourceClaim {
		return newClaim(name, withCapacity(exactly("n", "nic", 1), map[resourcev1.QualifiedName]string{"bandwidth": v}))
	}
	r := mustAllocate(t, a, bw("a", "60G"))
	res := r.Devices.Results[0]
	if got := res.ConsumedCapacity["bandwidth"]; res.ShareID == nil || got.Cmp(resource.MustParse("60G")) != 0 {
		t.Fatalf("want a share consuming 60G, got %v %v", res.ShareID, res.ConsumedCapacity)
	}
	// No request: the policy default (10G) is consumed.
	r = mustAllocate(t, a, newClaim("default", exactly("n", "nic", 1)))
	if got := r.Devices.Results[0].ConsumedCapacity["bandwidth"]; got.Cmp(resource.MustParse("10G")) != 0 {
		t.Fatalf("want the default 10G consumed, got %v", got.String())
	}
	pending(t, a, bw("too-much", "40G")) // 60G + 10G used, 30G left
	mustAllocate(t, a, bw("rest", "30G"))
	pending(t, a, bw("over-max", "101G"))
}

func TestGroupGPUNICAlignmentOnPCIeRoot(t *testing.T) {
	a := groupsCluster(t, nil, simdevice.PoolSpec{
		Topology: &simdevice.Topology{NUMANodes: 2, PCIeRootsPerNUMANode: 2},
		DeviceGroups: []simdevice.DeviceGroup{
			{DeviceType: "gpu", Count: 8},
			{DeviceType: "nic", Count: 4},
		}}, "node-a")
	aligned := func(name string) *resourcev1.ResourceClaim {
		c := newClaim(name, exactly("gpu", "gpu", 2), exactly("nic", "nic", 1))
		c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{Requests: []string{"gpu", "nic"}, MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(simdevice.AttrPCIeRoot))}}
		return c
	}
	// Four roots, two GPUs and one NIC on each: four aligned claims fit, a fifth does not.
	for i, n := range []string{"a0", "a1", "a2", "a3"} {
		r := mustAllocate(t, a, aligned(n))
		got := devicesOf(r)
		gpuRoot := map[string]bool{}
		for _, d := range got {
			idx := d[strings.LastIndex(d, "-")+1:]
			if strings.Contains(d, "/gpu-") {
				gpuRoot[map[string]string{"0": "0", "1": "0", "2": "1", "3": "1", "4": "2", "5": "2", "6": "3", "7": "3"}[idx]] = true
			}
		}
		if len(gpuRoot) != 1 || !strings.Contains(strings.Join(got, " "), "/nic-"+strings.Join(keys(gpuRoot), "")) {
			t.Fatalf("claim %d: devices %v are not on one PCIe root", i, got)
		}
	}
	pending(t, a, aligned("a4"))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestGroupBindingConditionsReachAllocation(t *testing.T) {
	spec := simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{{
		DeviceType: "gpu", Count: 1, BindingConditions: []string{"example.com/attached"},
		BindingFailureConditions: []string{"example.com/attach-failed"}, BindsToNode: true,
	}}}
	a := groupsCluster(t, nil, spec, "node-a")
	res := mustAllocate(t, a, newClaim("c", exactly("g", "gpu", 1))).Devices.Results[0]
	if len(res.BindingConditions) != 1 || res.BindingConditions[0] != "example.com/attached" ||
		len(res.BindingFailureConditions) != 1 || res.BindingFailureConditions[0] != "example.com/attach-failed" {
		t.Fatalf("binding conditions not copied into the result: %+v", res)
	}
	// Without DRADeviceBindingConditions the scheduler's allocator never picks such a device.
	off := DefaultFeatures
	off.DeviceBindingAndStatus = false
	pending(t, groupsCluster(t, &off, spec, "node-a"), newClaim("c", exactly("g", "gpu", 1)))

	// Pools without binding conditions are preferred (the allocator tries them first).
	mixed := groupsCluster(t, nil, simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{{DeviceType: "gpu", Count: 1}}}, "node-a")
	spec.TargetNodes = []string{"node-a"}
	p := pooltest.Pool("ns", "bc", "uid2", spec)
	sl, err := simdevice.DesiredSlices(p, []*corev1.Node{newNode("node-a")})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sl {
		s.Spec.Pool.Generation = 1
		mixed.UpsertSlice(compactslice.From(s))
	}
	if got := devicesOf(mustAllocate(t, mixed, newClaim("first", exactly("g", "gpu", 1)))); !strings.Contains(got[0], "ns/groups/") {
		t.Fatalf("want the pool without binding conditions first, got %v", got)
	}
	if r := mustAllocate(t, mixed, newClaim("second", exactly("g", "gpu", 1))); len(r.Devices.Results[0].BindingConditions) == 0 {
		t.Fatalf("second claim should get the device with binding conditions: %v", devicesOf(r))
	}
}

func TestGroupPerDeviceNodeSelection(t *testing.T) {
	a := groupsCluster(t, nil, simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{{DeviceType: "nic", Count: 1, PerDeviceNodeSelection: true}}}, "node-a", "node-b")
	r1 := mustAllocate(t, a, newClaim("n1", exactly("n", "nic", 1)))
	r2 := mustAllocate(t, a, newClaim("n2", exactly("n", "nic", 1)))
	if n1, n2 := nodeOf(t, r1), nodeOf(t, r2); n1 == n2 {
		t.Fatalf("each node's NIC is bound to its node: both claims on %s", n1)
	}
	pending(t, a, newClaim("n3", exactly("n", "nic", 1)))
}

// A request between steps is rounded up to the next step, as the scheduler's allocator does.
func TestGroupConsumableCapacityWithStep(t *testing.T) {
	a := groupsCluster(t, nil, simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{{
		DeviceType: "gpu", Count: 1, AllowMultipleAllocations: true,
		Capacities: map[string]resource.Quantity{"memory": resource.MustParse("80Gi")},
		RequestPolicies: map[string]simdevice.RequestPolicy{"memory": {
			Default: q("80Gi"), ValidRange: &simdevice.PolicyRange{Min: q("1Gi"), Step: q("1Gi")}}},
	}}}, "node-a")
	mem := func(name, v string) *resourcev1.ResourceClaim {
		return newClaim(name, withCapacity(exactly("g", "gpu", 1), map[resourcev1.QualifiedName]string{"memory": v}))
	}
	r := mustAllocate(t, a, mem("a", "1500Mi"))
	if got := r.Devices.Results[0].ConsumedCapacity["memory"]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Fatalf("1500Mi rounds up to 2Gi, got %v", got.String())
	}
	mustAllocate(t, a, mem("b", "78Gi"))
	pending(t, a, mem("c", "1Mi"))                       // rounds up to 1Gi: 80Gi used
	pending(t, a, newClaim("d", exactly("g", "gpu", 1))) // the default is the whole GPU
}
