package simdevice

import (
	"strconv"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func groupPool(mut func(*PoolSpec)) *Pool {
	return newPool(func(s *PoolSpec) {
		s.DeviceType, s.DeviceCount = "", 0
		mut(s)
	})
}

func TestGroupsPublishEveryGroupWithTopology(t *testing.T) {
	p := groupPool(func(s *PoolSpec) {
		s.Topology = &Topology{NUMANodes: 2, PCIeRootsPerNUMANode: 2}
		s.DeviceGroups = []DeviceGroup{
			{DeviceType: "gpu", Count: 8, Attributes: map[string]AttributeValue{"model": {String: ptrTo("sim")}}},
			{DeviceType: "nic", Count: 4},
		}
	})
	sl := mustSlices(t, p)
	if len(sl) != 1 || len(sl[0].Spec.Devices) != 12 {
		t.Fatalf("want one slice with 12 devices, got %d slices", len(sl))
	}
	root := func(d resourcev1.Device) string { return *d.Attributes[AttrPCIeRoot].StringValue }
	numa := func(d resourcev1.Device) int64 { return *d.Attributes[AttrNUMANode].IntValue }
	devs := map[string]resourcev1.Device{}
	for _, d := range sl[0].Spec.Devices {
		devs[d.Name] = d
	}
	// 4 roots: GPUs 2i and 2i+1 and NIC i share root i; roots 0-1 on NUMA 0, 2-3 on NUMA 1.
	for i, want := range []string{"pci0000:00", "pci0000:10", "pci0000:20", "pci0000:30"} {
		nic := devs["nic-"+itoa(i)]
		for _, g := range []string{"gpu-" + itoa(2*i), "gpu-" + itoa(2*i+1)} {
			if root(devs[g]) != want || root(nic) != want || numa(devs[g]) != int64(i/2) || numa(nic) != int64(i/2) {
				t.Errorf("%s and nic-%d: roots %s %s numa %d %d, want %s numa %d", g, i, root(devs[g]), root(nic), numa(devs[g]), numa(nic), want, i/2)
			}
		}
	}
	if g := devs["gpu-3"]; *g.Attributes[AttrDeviceType].StringValue != "gpu" || *g.Attributes[AttrIndex].IntValue != 3 || *g.Attributes["model"].StringValue != "sim" {
		t.Errorf("gpu-3 attributes %v", g.Attributes)
	}
	if _, ok := devs["nic-0"].Attributes["model"]; ok {
		t.Error("a group's attributes leak into another group")
	}
}

func TestGroupPartitionsCountersAndLayout(t *testing.T) {
	p := groupPool(func(s *PoolSpec) {
		s.DeviceGroups = []DeviceGroup{
			{DeviceType: "gpu", Count: 9, Partitions: 4, Capacities: map[string]resource.Quantity{"memory": resource.MustParse("80Gi")}},
			{DeviceType: "nic", Count: 2, PerDeviceNodeSelection: true},
		}
		s.Faults = []Fault{{Device: intstr.FromString("gpu-1"), Mode: FaultUnhealthy}, {Device: intstr.FromString("gpu-8"), Mode: FaultDisappear}}
	})
	sl := mustSlices(t, p)
	// Counter slices first (8 sets max each), then devices (64 max with counters), then the
	// per-device node selection slice.
	var layout []string
	for _, s := range sl {
		switch {
		case len(s.Spec.SharedCounters) > 0:
			layout = append(layout, "counters:"+itoa(len(s.Spec.SharedCounters)))
		case s.Spec.PerDeviceNodeSelection != nil:
			layout = append(layout, "per-device:"+itoa(len(s.Spec.Devices)))
		default:
			layout = append(layout, "devices:"+itoa(len(s.Spec.Devices)))
		}
	}
	if got := strings.Join(layout, " "); got != "counters:8 devices:40 per-device:2" {
		t.Fatalf("layout %q", got)
	}
	cs := sl[0].Spec.SharedCounters[0]
	if cs.Name != "gpu-0-counters" || qv(cs.Counters[PartitionsCounter].Value) != 4 || qs(cs.Counters["memory"].Value) != "80Gi" {
		t.Errorf("counter set %+v", cs)
	}
	for _, d := range sl[1].Spec.Devices {
		switch d.Name {
		case "gpu-0":
			if c := d.ConsumesCounters[0].Counters; qv(c[PartitionsCounter].Value) != 4 || qs(c["memory"].Value) != "80Gi" {
				t.Errorf("the whole device consumes all: %v", c)
			}
		case "gpu-0-part-2":
			c := d.ConsumesCounters[0].Counters
			if qv(c[PartitionsCounter].Value) != 1 || qs(c["memory"].Value) != "20Gi" || qs(d.Capacity["memory"].Value) != "20Gi" ||
				*d.Attributes[AttrPartition].IntValue != 2 || *d.Attributes[AttrParent].StringValue != "gpu-0" {
				t.Errorf("partition %+v", d)
			}
		case "gpu-1-part-0":
			if len(d.Taints) != 1 || d.Taints[0].Key != TaintUnhealthy {
				t.Errorf("a fault taints the partitions of its device: %v", d.Taints)
			}
		case "gpu-8", "gpu-8-part-0":
			t.Errorf("%s disappeared", d.Name)
		}
	}
	if d := sl[2].Spec.Devices[0]; sl[2].Spec.NodeName != nil || d.NodeName == nil || *d.NodeName != "node-a" {
		t.Errorf("per-device slice: nodeName %v, device nodeName %v", sl[2].Spec.NodeName, d.NodeName)
	}
}

func TestGroupSharingAndBindingFields(t *testing.T) {
	min, def := resource.MustParse("1G"), resource.MustParse("10G")
	p := groupPool(func(s *PoolSpec) {
		s.DeviceGroups = []DeviceGroup{{DeviceType: "nic", Count: 1, AllowMultipleAllocations: true,
			Capacities:        map[string]resource.Quantity{"bw": resource.MustParse("100G")},
			RequestPolicies:   map[string]RequestPolicy{"bw": {Default: &def, ValidRange: &PolicyRange{Min: &min}}},
			BindingConditions: []string{"ready"}, BindingFailureConditions: []string{"failed"}, BindsToNode: true}}
	})
	d := mustSlices(t, p)[0].Spec.Devices[0]
	pol := d.Capacity["bw"].RequestPolicy
	if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations || pol == nil || pol.Default.String() != "10G" || pol.ValidRange.Min.String() != "1G" || pol.ValidRange.Max != nil {
		t.Errorf("sharing fields %+v", d)
	}
	if strings.Join(d.BindingConditions, ",") != "ready" || strings.Join(d.BindingFailureConditions, ",") != "failed" || d.BindsToNode == nil {
		t.Errorf("binding fields %+v", d)
	}
}

func TestGroupValidationMessages(t *testing.T) {
	one, two := resource.MustParse("1"), resource.MustParse("2")
	for name, tc := range map[string]struct {
		mut  func(*PoolSpec)
		want string
	}{
		"legacy field": {func(s *PoolSpec) { s.DeviceType = "gpu"; s.DeviceGroups = []DeviceGroup{{DeviceType: "x", Count: 1}} }, "spec.deviceType: Forbidden"},
		"duplicate type": {func(s *PoolSpec) {
			s.DeviceGroups = []DeviceGroup{{DeviceType: "x", Count: 1}, {DeviceType: "x", Count: 1}}
		}, "spec.deviceGroups[1].deviceType: Duplicate"},
		"policy above capacity": {func(s *PoolSpec) {
			s.DeviceGroups = []DeviceGroup{{DeviceType: "x", Count: 1, AllowMultipleAllocations: true, Capacities: map[string]resource.Quantity{"c": one},
				RequestPolicies: map[string]RequestPolicy{"c": {Default: &one, ValidValues: []resource.Quantity{one, two}}}}}
		}, "spec.deviceGroups[0].requestPolicies[c].validValues[1]: Invalid value: \"2\": must not be larger than the capacity"},
		"topology alone": {func(s *PoolSpec) { s.DeviceType, s.DeviceCount, s.Topology = "gpu", 1, &Topology{1, 1} }, "spec.topology: Forbidden"},
		"fault index": {func(s *PoolSpec) {
			s.DeviceGroups = []DeviceGroup{{DeviceType: "x", Count: 1}}
			s.Faults = []Fault{{Device: intstr.FromInt32(0), Mode: FaultUnhealthy}}
		}, "spec.faults[0].device"},
	} {
		errs := groupPool(tc.mut).Validate()
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
			t.Errorf("%s: want %q in %v", name, tc.want, msgs)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func itoa(i int) string { return strconv.Itoa(i) }

func qv(q resource.Quantity) int64  { return q.Value() }
func qs(q resource.Quantity) string { return q.String() }

func TestGroupSummaries(t *testing.T) {
	p := groupPool(func(s *PoolSpec) {
		s.DeviceGroups = []DeviceGroup{{DeviceType: "gpu", Count: 8}, {DeviceType: "nic", Count: 4}}
	})
	if p.Spec.DeviceTypes() != "gpu,nic" || p.Spec.PhysicalDevicesPerNode() != 12 {
		t.Errorf("groups: %q %d", p.Spec.DeviceTypes(), p.Spec.PhysicalDevicesPerNode())
	}
	if l := newPool(nil); l.Spec.DeviceTypes() != "gpu" || l.Spec.PhysicalDevicesPerNode() != 2 {
		t.Errorf("implicit group: %q %d", l.Spec.DeviceTypes(), l.Spec.PhysicalDevicesPerNode())
	}
}

func TestGroupAttributesWinOverBuiltins(t *testing.T) {
	p := groupPool(func(s *PoolSpec) {
		s.DeviceGroups = []DeviceGroup{{DeviceType: "gpu", Count: 1, Partitions: 2,
			Attributes: map[string]AttributeValue{AttrIndex: {Int: ptrTo(int64(7))}, AttrParent: {String: ptrTo("board-0")}}}}
	})
	for _, d := range mustSlices(t, p)[1].Spec.Devices {
		if *d.Attributes[AttrIndex].IntValue != 7 || *d.Attributes[AttrParent].StringValue != "board-0" {
			t.Errorf("%s: the group's index and parent must win: %v", d.Name, d.Attributes)
		}
	}
}
