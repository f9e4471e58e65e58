// Package oracle is the differential test of the simulator's allocator against kube-scheduler:
// the same claims over the same ResourceSlices, DeviceClasses and DeviceTaintRules are decided
// by drivers/allocator (per node, in process) and by a real kube-scheduler v1.37.2 (each claim in
// a pod pinned to one node), and the verdicts must agree.
package oracle

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Drivers of the random corpus.
const (
	gpuDriver = "gpu.oracle.draforge"
	nicDriver = "nic.oracle.draforge"
	pcieRoot  = resourcev1.QualifiedName("resource.kubernetes.io/pcieRoot")
)

// World is what a set of claims is decided against: node templates with their slices, the
// classes and the taint rules. Each (claim, template) pair gets its own copy of the template's
// node and slices in the cluster, so claims never compete for devices.
type World struct {
	Name      string
	Templates []Template
	Classes   []*resourcev1.DeviceClass
	Rules     []*resourcev1.DeviceTaintRule
}

// Template is one node and the slices published for it (NodeName set to Node.Name), and
// the allocations already holding some of its devices (results name the template's pools).
type Template struct {
	Node      *corev1.Node
	Slices    []*resourcev1.ResourceSlice
	Allocated []resourcev1.DeviceRequestAllocationResult
}

// Case is one claim to decide in a world.
type Case struct {
	ID    string // stable, for the report: "random-17" or "scenario/file.yaml/claim"
	World *World
	Claim *resourcev1.ResourceClaim
}

func attrStr(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
func attrInt(i int64) resourcev1.DeviceAttribute  { return resourcev1.DeviceAttribute{IntValue: &i} }
func attrBool(b bool) resourcev1.DeviceAttribute  { return resourcev1.DeviceAttribute{BoolValue: &b} }
func attrVer(v string) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{VersionValue: &v}
}
func qty(s string) resource.Quantity           { return resource.MustParse(s) }
func capOf(s string) resourcev1.DeviceCapacity { return resourcev1.DeviceCapacity{Value: qty(s)} }
func counters(kv ...string) map[string]resourcev1.Counter {
	out := map[string]resourcev1.Counter{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = resourcev1.Counter{Value: qty(kv[i+1])}
	}
	return out
}

func slice(node, driver, name string, count int64, devices []resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + name},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: count}, Devices: devices},
	}
}

func gpus(n int, model, memory, version string, from int, taints map[int]resourcev1.DeviceTaint) []resourcev1.Device {
	var out []resourcev1.Device
	for i := range n {
		d := resourcev1.Device{Name: fmt.Sprintf("gpu-%d", from+i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": attrStr("gpu"), "model": attrStr(model), "index": attrInt(int64(from + i)),
				"healthy": attrBool(i != n-1), "driverVersion": attrVer(version),
				pcieRoot: attrStr(fmt.Sprintf("pci0000:%02x", (from+i)/2)),
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": capOf(memory)},
		}
		if t, ok := taints[from+i]; ok {
			d.Taints = []resourcev1.DeviceTaint{t}
		}
		out = append(out, d)
	}
	return out
}

func nics(n int, speed int64) []resourcev1.Device {
	var out []resourcev1.Device
	for i := range n {
		out = append(out, resourcev1.Device{Name: fmt.Sprintf("nic-%d", i),
			AllowMultipleAllocations: ptr.To(true),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": attrStr("nic"), "speed": attrInt(speed), pcieRoot: attrStr(fmt.Sprintf("pci0000:%02x", i/2)),
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"bandwidth": {Value: qty("100G"),
				RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr.To(qty("10G")),
					ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr.To(qty("1G")), Max: ptr.To(qty("100G")), Step: ptr.To(qty("1G"))}}}},
		})
	}
	return out
}

// migSlices is two GPUs, each as a whole device and as partitions, mutually exclusive through
// the GPU's counter set (the shape of NVIDIA's MIG and the example driver's partitions).
func migSlices(node string) []*resourcev1.ResourceSlice {
	cs := slice(node, gpuDriver, "counters", 2, nil)
	var devs []resourcev1.Device
	for g := range 2 {
		set := fmt.Sprintf("gpu-%d-cs", g)
		cs.Spec.SharedCounters = append(cs.Spec.SharedCounters, resourcev1.CounterSet{Name: set, Counters: counters("memory", "40Gi", "slices", "7")})
		parent := fmt.Sprintf("uuid-%s-%d", node, g)
		mk := func(name, profile, mem, slices string) resourcev1.Device {
			typ := "mig"
			if profile == "whole" {
				typ = "gpu"
			}
			return resourcev1.Device{Name: name,
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"type": attrStr(typ), "profile": attrStr(profile), "parentUUID": attrStr(parent), "model": attrStr("a100"),
					"index": attrInt(int64(g)), pcieRoot: attrStr(fmt.Sprintf("pci0000:%02x", g)),
				},
				Capacity:         map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": capOf(mem)},
				ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: set, Counters: counters("memory", mem, "slices", slices)}},
			}
		}
		devs = append(devs, mk(fmt.Sprintf("gpu-%d", g), "whole", "40Gi", "7"))
		for j := range 3 {
			devs = append(devs, mk(fmt.Sprintf("gpu-%d-mig-1g-%d", g, j), "1g.5gb", "5Gi", "1"))
		}
		devs = append(devs, mk(fmt.Sprintf("gpu-%d-mig-3g-0", g), "3g.20gb", "20Gi", "3"), mk(fmt.Sprintf("gpu-%d-mig-4g-0", g), "4g.20gb", "20Gi", "4"))
	}
	return []*resourcev1.ResourceSlice{cs, slice(node, gpuDriver, "devices", 2, devs)}
}

func node(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{"kubernetes.io/hostname": name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func class(name, expr string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}}
}

// RandomWorld is six heterogeneous node types: A100 and H100 GPUs, partitionable GPUs,
// shared NICs with consumable bandwidth, GPUs and NICs on shared PCIe roots, and GPUs with
// driver-published taints; plus DeviceTaintRules tainting gpu-3 and nic-0 on every node.
func RandomWorld() *World {
	ns := map[int]resourcev1.DeviceTaint{
		0: {Key: "oracle.draforge/health", Value: "degraded", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		1: {Key: "oracle.draforge/maintenance", Effect: resourcev1.DeviceTaintEffectNoExecute},
		2: {Key: "oracle.draforge/info", Effect: resourcev1.DeviceTaintEffectNone},
	}
	w := &World{Name: "random"}
	add := func(name string, slices ...*resourcev1.ResourceSlice) {
		w.Templates = append(w.Templates, Template{Node: node(name, nil), Slices: slices})
	}
	add("a100x4", slice("a100x4", gpuDriver, "gpus", 1, gpus(4, "a100", "40Gi", "1.4.2", 0, nil)))
	add("h100x8", slice("h100x8", gpuDriver, "gpus", 1, gpus(8, "h100", "80Gi", "2.0.1", 0, nil)))
	add("mig", migSlices("mig")...)
	add("nic", slice("nic", nicDriver, "nics", 1, nics(4, 200)))
	add("mixed", slice("mixed", gpuDriver, "gpus", 1, gpus(4, "a100", "40Gi", "1.6.0", 0, nil)), slice("mixed", nicDriver, "nics", 1, nics(4, 100)))
	add("tainted", slice("tainted", gpuDriver, "gpus", 1, gpus(4, "h100", "80Gi", "2.1.0", 0, ns)))
	// The same devices partly taken by other claims: whole devices, a whole GPU whose
	// partitions then have no counters left, one partition, shared bandwidth.
	add("a100x4-busy", slice("a100x4-busy", gpuDriver, "gpus", 1, gpus(4, "a100", "40Gi", "1.4.2", 0, nil)))
	w.Templates[len(w.Templates)-1].Allocated = []resourcev1.DeviceRequestAllocationResult{
		{Request: "r", Driver: gpuDriver, Pool: "a100x4-busy", Device: "gpu-0"},
		{Request: "r", Driver: gpuDriver, Pool: "a100x4-busy", Device: "gpu-1"}}
	add("mig-busy", migSlices("mig-busy")...)
	w.Templates[len(w.Templates)-1].Allocated = []resourcev1.DeviceRequestAllocationResult{
		{Request: "r", Driver: gpuDriver, Pool: "mig-busy", Device: "gpu-0"},
		{Request: "r", Driver: gpuDriver, Pool: "mig-busy", Device: "gpu-1-mig-3g-0"}}
	add("nic-busy", slice("nic-busy", nicDriver, "nics", 1, nics(4, 200)))
	w.Templates[len(w.Templates)-1].Allocated = []resourcev1.DeviceRequestAllocationResult{
		{Request: "r", Driver: nicDriver, Pool: "nic-busy", Device: "nic-1", ShareID: ptr.To(types.UID("8f0c2a5e-0000-4000-8000-000000000001")),
			ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": qty("80G")}},
		{Request: "r", Driver: nicDriver, Pool: "nic-busy", Device: "nic-2", ShareID: ptr.To(types.UID("8f0c2a5e-0000-4000-8000-000000000002")),
			ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": qty("95G")}}}
	w.Classes = []*resourcev1.DeviceClass{
		class("gpu", `device.driver == "`+gpuDriver+`" && device.attributes["`+gpuDriver+`"].type == "gpu"`),
		class("mig", `device.driver == "`+gpuDriver+`" && device.attributes["`+gpuDriver+`"].type == "mig"`),
		class("nic", `device.driver == "`+nicDriver+`"`),
		class("any-gpu", `device.driver == "`+gpuDriver+`"`),
	}
	w.Rules = []*resourcev1.DeviceTaintRule{
		{ObjectMeta: metav1.ObjectMeta{Name: "oracle-drain-gpu-3"}, Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(gpuDriver), Device: ptr.To("gpu-3")},
			Taint:          resourcev1.DeviceTaint{Key: "oracle.draforge/drain", Value: "planned", Effect: resourcev1.DeviceTaintEffectNoSchedule}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "oracle-evict-nic-0"}, Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(nicDriver), Device: ptr.To("nic-0")},
			Taint:          resourcev1.DeviceTaint{Key: "oracle.draforge/maintenance", Effect: resourcev1.DeviceTaintEffectNoExecute}}},
	}
	return w
}

// selectors per class, over every attribute type (string, int, bool, version) and capacity.
// Attributes some devices of the class lack are guarded with has(), as a CEL runtime error
// would abort the scheduler's allocation for the whole pod.
var selectors = map[string][]string{
	"gpu": {
		`device.attributes["` + gpuDriver + `"].model == "h100"`,
		`device.attributes["` + gpuDriver + `"].model == "a100"`,
		`has(device.attributes["` + gpuDriver + `"].index) && device.attributes["` + gpuDriver + `"].index >= 2`,
		`has(device.attributes["` + gpuDriver + `"].healthy) && device.attributes["` + gpuDriver + `"].healthy`,
		`has(device.attributes["` + gpuDriver + `"].driverVersion) && device.attributes["` + gpuDriver + `"].driverVersion.isGreaterThan(semver("1.5.0"))`,
		`device.capacity["` + gpuDriver + `"].memory.compareTo(quantity("50Gi")) >= 0`,
		`device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"`,
	},
	"mig": {
		`device.attributes["` + gpuDriver + `"].profile == "1g.5gb"`,
		`device.attributes["` + gpuDriver + `"].profile == "3g.20gb"`,
		`device.attributes["` + gpuDriver + `"].profile != "1g.5gb"`,
		`device.capacity["` + gpuDriver + `"].memory.isLessThan(quantity("10Gi"))`,
	},
	"nic": {
		`device.attributes["` + nicDriver + `"].speed >= 200`,
		`device.attributes["` + nicDriver + `"].speed < 200`,
		`device.allowMultipleAllocations`,
	},
	"any-gpu": {
		`device.attributes["` + gpuDriver + `"].type == "mig"`,
		`device.attributes["` + gpuDriver + `"].model == "a100"`,
	},
}

var tolerations = []resourcev1.DeviceToleration{
	{Key: "oracle.draforge/health", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule},
	{Key: "oracle.draforge/drain", Operator: resourcev1.DeviceTolerationOpEqual, Value: "planned"},
	{Key: "oracle.draforge/drain", Operator: resourcev1.DeviceTolerationOpEqual, Value: "other"},
	{Key: "oracle.draforge/maintenance", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute},
	{Operator: resourcev1.DeviceTolerationOpExists},
}

// RandomClaims generates n claims from seed: counts and All, selectors, firstAvailable,
// adminAccess, capacity requests (within and outside the request policy), tolerations and
// matchAttribute/distinctAttribute constraints.
func RandomClaims(seed uint64, n int) []*resourcev1.ResourceClaim {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	classes := []string{"gpu", "gpu", "mig", "nic", "any-gpu"}
	pick := func(list []string, k int) []resourcev1.DeviceSelector {
		var out []resourcev1.DeviceSelector
		for _, i := range r.Perm(len(list))[:min(k, len(list))] {
			out = append(out, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: list[i]}})
		}
		return out
	}
	count := func() int64 { return []int64{1, 1, 1, 2, 2, 3, 4, 5}[r.IntN(8)] }
	var out []*resourcev1.ResourceClaim
	for i := range n {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("random-%03d", i)}}
		nreq := 1 + r.IntN(3)
		if r.IntN(2) == 0 {
			nreq = 1
		}
		for q := range nreq {
			cl := classes[r.IntN(len(classes))]
			e := resourcev1.ExactDeviceRequest{DeviceClassName: cl, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count(),
				Selectors: pick(selectors[cl], r.IntN(3))}
			if r.IntN(10) == 0 {
				e.AllocationMode, e.Count = resourcev1.DeviceAllocationModeAll, 0
			}
			if cl == "nic" && r.IntN(2) == 0 {
				bw := []string{"5G", "30G", "60G", "99G", "150G", "2500M"}[r.IntN(6)]
				e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": qty(bw)}}
			}
			if r.IntN(3) == 0 {
				for _, k := range r.Perm(len(tolerations))[:1+r.IntN(2)] {
					e.Tolerations = append(e.Tolerations, tolerations[k])
				}
			}
			req := resourcev1.DeviceRequest{Name: fmt.Sprintf("r%d", q)}
			switch {
			case r.IntN(6) == 0:
				// firstAvailable: two or three alternatives, most demanding first.
				for s := range 2 + r.IntN(2) {
					sc := classes[r.IntN(len(classes))]
					sub := resourcev1.DeviceSubRequest{Name: fmt.Sprintf("s%d", s), DeviceClassName: sc,
						AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count(), Selectors: pick(selectors[sc], r.IntN(2))}
					if r.IntN(3) == 0 {
						sub.Tolerations = []resourcev1.DeviceToleration{tolerations[r.IntN(len(tolerations))]}
					}
					req.FirstAvailable = append(req.FirstAvailable, sub)
				}
			case r.IntN(15) == 0 && e.AllocationMode == resourcev1.DeviceAllocationModeExactCount:
				e.AdminAccess = ptr.To(true)
				req.Exactly = &e
			default:
				req.Exactly = &e
			}
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
		}
		switch r.IntN(8) {
		case 0:
			c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(pcieRoot))}}
		case 1:
			c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(gpuDriver + "/model"))}}
		case 2:
			c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{DistinctAttribute: ptr.To(resourcev1.FullyQualifiedName(gpuDriver + "/index"))}}
		case 3:
			c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(gpuDriver + "/parentUUID"))}}
		}
		out = append(out, c)
	}
	return out
}
