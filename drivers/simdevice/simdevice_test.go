package simdevice

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func testNodes() []*corev1.Node {
	mk := func(name, rack string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"draforge.test/rack": rack}}}
	}
	return []*corev1.Node{mk("node-c", "r2"), mk("node-a", "r1"), mk("node-b", "r1")}
}

func newPool(mut func(*PoolSpec)) *Pool {
	p := &Pool{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "ns1", UID: "uid-1"},
		Spec:       PoolSpec{DeviceType: "gpu", DeviceCount: 2, TargetNodes: []string{"node-a"}},
	}
	if mut != nil {
		mut(&p.Spec)
	}
	p.Default()
	return p
}

func mustSlices(t *testing.T, p *Pool) []*resourcev1.ResourceSlice {
	t.Helper()
	s, err := DesiredSlices(p, testNodes())
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range s {
		checkSliceValid(t, sl)
	}
	return s
}

// checkSliceValid checks by hand the ResourceSlice rules the API server enforces (the
// validation code lives in k8s.io/kubernetes, which this module does not import).
func checkSliceValid(t *testing.T, s *resourcev1.ResourceSlice) {
	t.Helper()
	errf := func(format string, args ...any) { t.Errorf("slice %s: "+format, append([]any{s.Name}, args...)...) }
	if msgs := content.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
		errf("name: %v", msgs)
	}
	for k, v := range s.Labels {
		if msgs := append(content.IsLabelKey(k), content.IsLabelValue(v)...); len(msgs) > 0 {
			errf("label %s=%s: %v", k, v, msgs)
		}
	}
	if msgs := content.IsDNS1123Subdomain(s.Spec.Driver); len(msgs) > 0 || len(s.Spec.Driver) > resourcev1.DriverNameMaxLength {
		errf("driver %q: %v", s.Spec.Driver, msgs)
	}
	perDevice := s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection
	if perDevice == (s.Spec.NodeName != nil) || (s.Spec.NodeName != nil && *s.Spec.NodeName == "") {
		errf("exactly one of nodeName or perDeviceNodeSelection must be set")
	}
	for _, d := range s.Spec.Devices {
		if perDevice != (d.NodeName != nil && *d.NodeName != "") {
			errf("device %s: nodeName must be set exactly when the slice has perDeviceNodeSelection", d.Name)
		}
		// kubernetes v1.37.2 pkg/apis/resource/validation validateNodeAllocatableMapping: a
		// capacityKey names one of the device's capacities as written, with a positive multiplier.
		for r, m := range d.NodeAllocatableResources {
			if m.Mapping == nil && m.Overhead == nil {
				errf("device %s: nodeAllocatableResources[%s]: mapping or overhead required", d.Name, r)
			}
			if mp := m.Mapping; mp != nil && mp.CapacityKey != nil {
				if _, ok := d.Capacity[*mp.CapacityKey]; !ok || mp.CapacityMultiplier == nil || mp.CapacityMultiplier.Sign() <= 0 {
					errf("device %s: nodeAllocatableResources[%s]: capacityKey %s must be a capacity, with a positive capacityMultiplier", d.Name, r, *mp.CapacityKey)
				}
			}
		}
	}
	pool := s.Spec.Pool
	if len(pool.Name) > resourcev1.PoolNameMaxLength {
		errf("pool name too long: %d", len(pool.Name))
	}
	for _, seg := range strings.Split(pool.Name, "/") {
		if msgs := content.IsDNS1123Subdomain(seg); len(msgs) > 0 {
			errf("pool name segment %q: %v", seg, msgs)
		}
	}
	if pool.ResourceSliceCount < 1 || pool.Generation < 0 {
		errf("pool %+v", pool)
	}
	limit := resourcev1.ResourceSliceMaxDevices
	for _, d := range s.Spec.Devices {
		if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
			limit = resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures
		}
	}
	if len(s.Spec.Devices) > 0 && len(s.Spec.SharedCounters) > 0 {
		errf("a slice carries either devices or shared counters")
	}
	if len(s.Spec.SharedCounters) > resourcev1.ResourceSliceMaxCounterSets {
		errf("%d counter sets", len(s.Spec.SharedCounters))
	}
	for _, cs := range s.Spec.SharedCounters {
		if msgs := content.IsDNS1123Label(cs.Name); len(msgs) > 0 {
			errf("counter set name %q: %v", cs.Name, msgs)
		}
		if len(cs.Counters) == 0 || len(cs.Counters) > resourcev1.ResourceSliceMaxCountersPerCounterSet {
			errf("counter set %s: %d counters", cs.Name, len(cs.Counters))
		}
		for n := range cs.Counters {
			if msgs := content.IsDNS1123Label(n); len(msgs) > 0 {
				errf("counter set %s: counter name %q: %v", cs.Name, n, msgs)
			}
		}
	}
	if len(s.Spec.Devices) > limit {
		errf("%d devices > %d", len(s.Spec.Devices), limit)
	}
	names := map[string]bool{}
	for _, d := range s.Spec.Devices {
		if msgs := content.IsDNS1123Label(d.Name); len(msgs) > 0 {
			errf("device name %q: %v", d.Name, msgs)
		}
		if names[d.Name] {
			errf("duplicate device %s", d.Name)
		}
		names[d.Name] = true
		if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			errf("device %s: %d attributes+capacities", d.Name, n)
		}
		check := func(q resourcev1.QualifiedName) {
			domain, id, ok := strings.Cut(string(q), "/")
			if !ok { // unqualified: the driver's own domain
				id = domain
			}
			if (ok && (len(domain) > resourcev1.DeviceMaxDomainLength || len(content.IsDNS1123Subdomain(domain)) > 0)) ||
				len(id) > resourcev1.DeviceMaxIDLength || len(content.IsCIdentifier(id)) > 0 {
				errf("device %s: bad qualified name %q", d.Name, q)
			}
		}
		if len(d.ConsumesCounters) > resourcev1.ResourceSliceMaxDeviceCounterConsumptionsPerDevice {
			errf("device %s: %d counter consumptions", d.Name, len(d.ConsumesCounters))
		}
		for _, c := range d.ConsumesCounters {
			if len(c.Counters) == 0 || len(c.Counters) > resourcev1.ResourceSliceMaxCountersPerDeviceCounterConsumption {
				errf("device %s: %d counters consumed from %s", d.Name, len(c.Counters), c.CounterSet)
			}
		}
		for q, a := range d.Attributes {
			check(q)
			set := 0
			for _, b := range []bool{a.StringValue != nil, a.IntValue != nil, a.BoolValue != nil, a.VersionValue != nil} {
				if b {
					set++
				}
			}
			if set != 1 || (a.StringValue != nil && len(*a.StringValue) > 64) || (a.VersionValue != nil && !semverRE.MatchString(*a.VersionValue)) {
				errf("device %s: bad attribute %s", d.Name, q)
			}
		}
		for q := range d.Capacity {
			check(q)
		}
		for _, tn := range d.Taints {
			// The effects the API server accepts (validDeviceTaintEffects): NoSchedule, None
			// (the NVIDIA driver's informational health taints), NoExecute (the Intel driver's).
			if msgs := content.IsLabelKey(tn.Key); len(msgs) > 0 || !slices.Contains([]resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoSchedule,
				resourcev1.DeviceTaintEffectNone, resourcev1.DeviceTaintEffectNoExecute}, tn.Effect) {
				errf("device %s: bad taint %+v", d.Name, tn)
			}
		}
	}
}

func TestMultiNodePoolsAreSeparateAndValid(t *testing.T) {
	p := newPool(func(s *PoolSpec) { s.TargetNodes = []string{"node-a", "node-b", "node-c"}; s.DeviceCount = 3 })
	slices := mustSlices(t, p)
	if len(slices) != 3 {
		t.Fatalf("want 3 slices (one pool per node), got %d", len(slices))
	}
	pools := map[string]bool{}
	for i, s := range slices {
		if want := []string{"node-a", "node-b", "node-c"}[i]; *s.Spec.NodeName != want {
			t.Errorf("slice %d on %s, want %s (sorted by node)", i, *s.Spec.NodeName, want)
		}
		if pools[s.Spec.Pool.Name] {
			t.Errorf("pool %s shared between nodes", s.Spec.Pool.Name)
		}
		pools[s.Spec.Pool.Name] = true
		if want := "ns1/gpus/" + *s.Spec.NodeName; s.Spec.Pool.Name != want {
			t.Errorf("pool name %s, want %s", s.Spec.Pool.Name, want)
		}
		if s.Spec.Pool.ResourceSliceCount != 1 || s.Spec.Pool.Generation != 0 {
			t.Errorf("pool %+v: want resourceSliceCount 1, generation 0 (set by publisher)", s.Spec.Pool)
		}
		if len(s.Spec.Devices) != 3 || s.Spec.Devices[2].Name != "gpu-2" {
			t.Errorf("devices %v", s.Spec.Devices)
		}
		if s.Spec.Driver != DefaultDriverName {
			t.Errorf("driver %s", s.Spec.Driver)
		}
		if s.Labels[LabelSDPName] != "gpus" || s.Labels[LabelSDPNamespace] != "ns1" || s.Labels[LabelSDPUID] != "uid-1" {
			t.Errorf("labels %v", s.Labels)
		}
	}
	again := mustSlices(t, p)
	for i := range slices {
		if slices[i].Name != again[i].Name || !SlicesEqual(slices[i], again[i]) {
			t.Errorf("not deterministic: %s vs %s", slices[i].Name, again[i].Name)
		}
	}
}

func TestSlicingRespectsDeviceLimits(t *testing.T) {
	full := mustSlices(t, newPool(func(s *PoolSpec) { s.DeviceCount = 128 }))
	if len(full) != 1 || len(full[0].Spec.Devices) != 128 || full[0].Spec.Pool.ResourceSliceCount != 1 {
		t.Fatalf("128 untainted devices should fit one slice, got %d slices", len(full))
	}
	tainted := mustSlices(t, newPool(func(s *PoolSpec) {
		s.DeviceCount = 128
		s.Faults = []Fault{{Device: intstr.FromInt32(5), Mode: FaultUnhealthy}}
	}))
	if len(tainted) != 2 {
		t.Fatalf("tainted devices limit a slice to 64 devices: want 2 slices, got %d", len(tainted))
	}
	seen := map[string]bool{}
	for _, s := range tainted {
		if s.Spec.Pool.ResourceSliceCount != 2 || s.Spec.Pool.Name != tainted[0].Spec.Pool.Name {
			t.Errorf("slice %s pool %+v", s.Name, s.Spec.Pool)
		}
		for _, d := range s.Spec.Devices {
			if seen[d.Name] {
				t.Errorf("duplicate device %s in pool", d.Name)
			}
			seen[d.Name] = true
		}
	}
	if len(seen) != 128 || tainted[0].Name == tainted[1].Name {
		t.Errorf("want 128 distinct devices in 2 distinct slices, got %d", len(seen))
	}
}

func TestFaults(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.DeviceCount = 4
		s.TargetNodes = []string{"node-a", "node-b"}
		s.Faults = []Fault{
			{Device: intstr.FromString("gpu-0"), Mode: FaultUnhealthy},
			{Device: intstr.FromInt32(1), Node: "node-b", Mode: FaultCapacityExhausted},
			{Device: intstr.FromInt32(2), Node: "node-a", Mode: FaultDisappear},
			{Device: intstr.FromInt32(3), Mode: FaultHealthy},
		}
	})
	slices := mustSlices(t, p)
	byNode := map[string]map[string]resourcev1.Device{}
	for _, s := range slices {
		m := map[string]resourcev1.Device{}
		for _, d := range s.Spec.Devices {
			m[d.Name] = d
		}
		byNode[*s.Spec.NodeName] = m
	}
	taintKeys := func(d resourcev1.Device) string {
		var ks []string
		for _, tn := range d.Taints {
			ks = append(ks, tn.Key+"="+tn.Value+":"+string(tn.Effect))
		}
		return strings.Join(ks, ",")
	}
	a, b := byNode["node-a"], byNode["node-b"]
	if got := taintKeys(a["gpu-0"]); got != TaintUnhealthy+"=true:NoSchedule" {
		t.Errorf("node-a gpu-0 taints %q", got)
	}
	if got := taintKeys(b["gpu-0"]); got != TaintUnhealthy+"=true:NoSchedule" {
		t.Errorf("node-b gpu-0 taints %q", got)
	}
	if got := taintKeys(b["gpu-1"]); got != TaintCapacityExhausted+"=true:NoSchedule" {
		t.Errorf("node-b gpu-1 taints %q", got)
	}
	if got := taintKeys(a["gpu-1"]); got != "" {
		t.Errorf("node-a gpu-1 must be untouched, taints %q", got)
	}
	if _, ok := a["gpu-2"]; ok {
		t.Error("node-a gpu-2 should have disappeared")
	}
	if _, ok := b["gpu-2"]; !ok {
		t.Error("node-b gpu-2 should still exist")
	}
	if len(a["gpu-3"].Taints) != 0 || len(a) != 3 || len(b) != 4 {
		t.Errorf("unexpected devices a=%d b=%d", len(a), len(b))
	}

	// All devices gone: the pool stays visible with one empty slice.
	gone := mustSlices(t, newPool(func(s *PoolSpec) {
		s.DeviceCount = 1
		s.Faults = []Fault{{Device: intstr.FromInt32(0), Mode: FaultDisappear}}
	}))
	if len(gone) != 1 || len(gone[0].Spec.Devices) != 0 || gone[0].Spec.Pool.ResourceSliceCount != 1 {
		t.Errorf("want one empty slice, got %d", len(gone))
	}
}

func TestTypedQualifiedAttributes(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.Attributes = map[string]AttributeValue{
			"model": {String: ptr.To("H100")}, "numa": {Int: ptr.To[int64](1)},
			"ecc": {Bool: ptr.To(true)}, "firmware": {Version: ptr.To("2.1.0")},
		}
		s.Capacities = map[string]resource.Quantity{"memory": resource.MustParse("80Gi")}
	})
	d := mustSlices(t, p)[0].Spec.Devices[1]
	// The attribute domain is the driver's: names are published unqualified, as drivers do.
	q := func(n string) resourcev1.QualifiedName { return resourcev1.QualifiedName(n) }
	if a := d.Attributes[q("model")]; a.StringValue == nil || *a.StringValue != "H100" {
		t.Errorf("model %+v", a)
	}
	if a := d.Attributes[q("numa")]; a.IntValue == nil || *a.IntValue != 1 {
		t.Errorf("numa %+v", a)
	}
	if a := d.Attributes[q("ecc")]; a.BoolValue == nil || !*a.BoolValue {
		t.Errorf("ecc %+v", a)
	}
	if a := d.Attributes[q("firmware")]; a.VersionValue == nil || *a.VersionValue != "2.1.0" {
		t.Errorf("firmware %+v", a)
	}
	if a := d.Attributes[q(AttrIndex)]; a.IntValue == nil || *a.IntValue != 1 {
		t.Errorf("index %+v", a)
	}
	if a := d.Attributes[q(AttrDeviceType)]; a.StringValue == nil || *a.StringValue != "gpu" {
		t.Errorf("deviceType %+v", a)
	}
	if c := d.Capacity[q("memory")]; c.Value.Cmp(resource.MustParse("80Gi")) != 0 {
		t.Errorf("memory %v", c.Value)
	}
}

func TestNvidiaProfile(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.Profile = ProfileNvidiaGPU
		s.AttributeDomain = "gpu.nvidia.com" // not the driver's domain: names are qualified
		s.Attributes = map[string]AttributeValue{"productName": {String: ptr.To("NVIDIA H100 80GB HBM3")}}
	})
	devs := mustSlices(t, p)[0].Spec.Devices
	n := func(s string) resourcev1.QualifiedName { return resourcev1.QualifiedName("gpu.nvidia.com/" + s) }
	for _, want := range []string{"type", "productName", "architecture", "brand", "cudaComputeCapability", "driverVersion", "cudaDriverVersion", "uuid"} {
		if _, ok := devs[0].Attributes[n(want)]; !ok {
			t.Errorf("missing gpu.nvidia.com/%s", want)
		}
	}
	for _, gone := range []string{"index", "minor", "deviceType"} {
		if _, ok := devs[0].Attributes[n(gone)]; ok {
			t.Errorf("gpu.nvidia.com/%s is no longer published by the driver", gone)
		}
	}
	for _, want := range []resourcev1.QualifiedName{AttrPCIBusID, AttrPCIeRoot, AttrNUMANode} {
		if _, ok := devs[0].Attributes[want]; !ok {
			t.Errorf("missing %s (another domain, stays qualified)", want)
		}
	}
	if v := devs[0].Attributes[n("productName")].StringValue; *v != "NVIDIA H100 80GB HBM3" {
		t.Errorf("user attribute must override the profile, got %s", *v)
	}
	if v := devs[0].Attributes[n("cudaComputeCapability")].VersionValue; v == nil {
		t.Error("cudaComputeCapability must be a version")
	}
	if *devs[0].Attributes[n("uuid")].StringValue == *devs[1].Attributes[n("uuid")].StringValue {
		t.Error("uuid must differ per device")
	}
	if *devs[0].Attributes[AttrPCIBusID].StringValue == *devs[1].Attributes[AttrPCIBusID].StringValue {
		t.Error("pciBusID must differ per device")
	}
	if devs[0].Name != "gpu-0" || devs[1].Name != "gpu-1" {
		t.Errorf("devices are named gpu-<minor>, got %s %s", devs[0].Name, devs[1].Name)
	}
	if _, ok := devs[0].Capacity[n("memory")]; !ok {
		t.Error("missing capacity gpu.nvidia.com/memory")
	}

	// With the driver's own name the names are unqualified, as the driver publishes them.
	own := mustSlices(t, newPool(func(s *PoolSpec) { s.Profile = ProfileNvidiaGPU; s.DriverName = "gpu.nvidia.com" }))[0].Spec.Devices[0]
	if _, ok := own.Capacity["memory"]; !ok {
		t.Errorf("capacity must be published as memory, got %v", own.Capacity)
	}
	if _, ok := own.Attributes["productName"]; !ok {
		t.Errorf("attribute must be published as productName, got %v", own.Attributes)
	}
}

func TestNodeTargetingIsUnion(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.TargetNodes = []string{"node-c", "node-x"} // node-x does not exist: nothing published
		s.NodeSelector = map[string]string{"draforge.test/rack": "r1"}
	})
	var got []string
	for _, s := range mustSlices(t, p) {
		got = append(got, *s.Spec.NodeName)
	}
	if strings.Join(got, ",") != "node-a,node-b,node-c" {
		t.Errorf("targeted %v", got)
	}
	sel := newPool(func(s *PoolSpec) { s.TargetNodes = nil; s.NodeSelector = map[string]string{"draforge.test/rack": "r2"} })
	if s := mustSlices(t, sel); len(s) != 1 || *s[0].Spec.NodeName != "node-c" {
		t.Errorf("nodeSelector r2 should target node-c only")
	}
}

func TestLongNamesStayValid(t *testing.T) {
	long := strings.Repeat("n", 60) + "." + strings.Repeat("o", 60) + "." + strings.Repeat("d", 60) + "." + strings.Repeat("e", 60)
	p := newPool(func(s *PoolSpec) { s.TargetNodes = []string{long}; s.PoolName = strings.Repeat("p", 63) })
	p.Namespace = strings.Repeat("s", 63)
	slices, err := DesiredSlices(p, []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: long}}})
	if err != nil || len(slices) != 1 {
		t.Fatalf("%v %d", err, len(slices))
	}
	checkSliceValid(t, slices[0])
	if !strings.HasPrefix(slices[0].Spec.Pool.Name, "sdp-") || len(slices[0].Name) > 253 {
		t.Errorf("pool %s slice %s", slices[0].Spec.Pool.Name, slices[0].Name)
	}
	other := PoolNameFor(p.Namespace, p.Spec.PoolName, long+"x")
	if other == slices[0].Spec.Pool.Name {
		t.Error("hashed pool names must differ per node")
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		mut  func(*Pool)
		want string
	}{
		"count zero":      {func(p *Pool) { p.Spec.DeviceCount = 0 }, "spec.deviceCount"},
		"count too large": {func(p *Pool) { p.Spec.DeviceCount = 129 }, "between 1 and 128"},
		"no targets":      {func(p *Pool) { p.Spec.TargetNodes = nil }, "at least one of spec.nodeSelector or spec.targetNodes"},
		"empty selector": {func(p *Pool) { p.Spec.TargetNodes = nil; p.Spec.NodeSelector = map[string]string{} },
			"at least one of"},
		"bad driver":      {func(p *Pool) { p.Spec.DriverName = "Sim_Driver" }, "spec.driverName"},
		"long driver":     {func(p *Pool) { p.Spec.DriverName = strings.Repeat("a", 64) }, "spec.driverName"},
		"bad device type": {func(p *Pool) { p.Spec.DeviceType = "GPU" }, "spec.deviceType"},
		"bad profile":     {func(p *Pool) { p.Spec.Profile = "amd" }, "spec.profile"},
		"two values": {func(p *Pool) {
			p.Spec.Attributes = map[string]AttributeValue{"m": {String: ptr.To("x"), Int: ptr.To[int64](1)}}
		}, "exactly one of string, int, bool or version"},
		"no value":    {func(p *Pool) { p.Spec.Attributes = map[string]AttributeValue{"m": {}} }, "exactly one"},
		"bad version": {func(p *Pool) { p.Spec.Attributes = map[string]AttributeValue{"v": {Version: ptr.To("1.2")}} }, "semantic version"},
		"bad attr name": {func(p *Pool) { p.Spec.Attributes = map[string]AttributeValue{"bad-name": {Bool: ptr.To(true)}} },
			"spec.attributes[bad-name]"},
		"negative capacity": {func(p *Pool) { p.Spec.Capacities = map[string]resource.Quantity{"m": resource.MustParse("-1")} },
			"must not be negative"},
		"fault index": {func(p *Pool) { p.Spec.Faults = []Fault{{Device: intstr.FromInt32(2), Mode: FaultUnhealthy}} },
			"spec.faults[0].device"},
		"fault name": {func(p *Pool) { p.Spec.Faults = []Fault{{Device: intstr.FromString("nic-0"), Mode: FaultUnhealthy}} },
			"spec.faults[0].device"},
		"fault name leading zero": {func(p *Pool) {
			p.Spec.Faults = []Fault{{Device: intstr.FromString("gpu-01"), Mode: FaultUnhealthy}}
		}, "spec.faults[0].device"},
		"fault mode":     {func(p *Pool) { p.Spec.Faults = []Fault{{Device: intstr.FromInt32(0), Mode: "broken"}} }, "spec.faults[0].mode"},
		"dup node":       {func(p *Pool) { p.Spec.TargetNodes = []string{"a", "a"} }, "Duplicate"},
		"no namespace":   {func(p *Pool) { p.Namespace = "" }, "metadata.namespace"},
		"bad label":      {func(p *Pool) { p.Spec.NodeSelector = map[string]string{"a": "b c"} }, "spec.nodeSelector"},
		"long pool name": {func(p *Pool) { p.Spec.PoolName = strings.Repeat("p", 64) }, "spec.poolName"},
		"too many attributes": {func(p *Pool) {
			p.Spec.Attributes = map[string]AttributeValue{}
			for i := range 31 {
				p.Spec.Attributes[fmt.Sprintf("a%d", i)] = AttributeValue{Bool: ptr.To(true)}
			}
		}, "at most 32 are allowed"},
	}
	if errs := newPool(nil).Validate(); errs != nil {
		t.Fatalf("base pool invalid: %v", errs)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPool(nil)
			tc.mut(p)
			errs := p.Validate()
			if len(errs) == 0 {
				t.Fatal("want errors")
			}
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if joined := strings.Join(all, "\n"); !strings.Contains(joined, tc.want) {
				t.Errorf("want %q in\n%s", tc.want, joined)
			}
			if _, err := DesiredSlices(p, testNodes()); err == nil {
				t.Error("DesiredSlices must refuse an invalid pool")
			}
		})
	}
}

// roundTrip simulates storing a slice in the API server: JSON encoding (quantities re-parsed),
// server-set metadata, a publisher-set generation and server-set taint timestamps.
func roundTrip(t *testing.T, s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	out := &resourcev1.ResourceSlice{}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	out.ResourceVersion, out.UID, out.Generation = "42", "server-uid", 3
	out.CreationTimestamp = metav1.Now()
	out.Labels["other.example/label"] = "x"
	out.Spec.Pool.Generation = 7
	for i := range out.Spec.Devices {
		for j := range out.Spec.Devices[i].Taints {
			out.Spec.Devices[i].Taints[j].TimeAdded = ptr.To(metav1.Now())
		}
	}
	return out
}

func TestSlicesEqualIgnoresServerFields(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.Profile = ProfileNvidiaGPU
		s.Capacities = map[string]resource.Quantity{"memory": resource.MustParse("81920Mi")}
		s.Faults = []Fault{{Device: intstr.FromInt32(0), Mode: FaultUnhealthy}}
	})
	desired := mustSlices(t, p)
	for _, d := range desired {
		stored := roundTrip(t, d)
		if !SlicesEqual(d, stored) {
			t.Fatalf("stored copy of %s must compare equal (zero writes when nothing changed)", d.Name)
		}
		// Recompute from scratch: still equal.
		again := mustSlices(t, p)[0]
		if !SlicesEqual(again, stored) {
			t.Fatal("recomputed slice must equal the stored one")
		}
	}
	stored := roundTrip(t, desired[0])
	// Releases up to 81a072d published every name qualified with the driver's
	// domain: the same IDs, so no write on upgrade.
	qualified := stored.DeepCopy()
	for i := range qualified.Spec.Devices {
		d := &qualified.Spec.Devices[i]
		for _, m := range []map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{d.Attributes} {
			for k, v := range m {
				if !strings.Contains(string(k), "/") {
					delete(m, k)
					m[resourcev1.QualifiedName(stored.Spec.Driver+"/"+string(k))] = v
				}
			}
		}
		for k, v := range d.Capacity {
			if !strings.Contains(string(k), "/") {
				delete(d.Capacity, k)
				d.Capacity[resourcev1.QualifiedName(stored.Spec.Driver+"/"+string(k))] = v
			}
		}
	}
	if fmt.Sprint(qualified.Spec) == fmt.Sprint(stored.Spec) {
		t.Fatal("the qualified variant changed nothing: the check below proves nothing")
	}
	if !SlicesEqual(desired[0], qualified) {
		t.Error("names qualified with the driver's own domain must equal their short form")
	}
	changes := map[string]func(*resourcev1.ResourceSlice){
		"attribute": func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[0].Attributes["x/y"] = resourcev1.DeviceAttribute{BoolValue: ptr.To(true)}
		},
		"capacity": func(s *resourcev1.ResourceSlice) { s.Spec.Devices[1].Capacity = nil },
		"same ID both ways": func(s *resourcev1.ResourceSlice) {
			for k, v := range s.Spec.Devices[0].Attributes {
				if !strings.Contains(string(k), "/") {
					s.Spec.Devices[0].Attributes[resourcev1.QualifiedName(stored.Spec.Driver+"/"+string(k))] = v
					break
				}
			}
		},
		"other domain": func(s *resourcev1.ResourceSlice) {
			for k, v := range s.Spec.Devices[0].Attributes {
				if !strings.Contains(string(k), "/") {
					delete(s.Spec.Devices[0].Attributes, k)
					s.Spec.Devices[0].Attributes[resourcev1.QualifiedName("other.example/"+string(k))] = v
					break
				}
			}
		},
		"taint":      func(s *resourcev1.ResourceSlice) { s.Spec.Devices[0].Taints = nil },
		"count":      func(s *resourcev1.ResourceSlice) { s.Spec.Pool.ResourceSliceCount = 2 },
		"device":     func(s *resourcev1.ResourceSlice) { s.Spec.Devices = s.Spec.Devices[:1] },
		"node":       func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = ptr.To("node-z") },
		"label":      func(s *resourcev1.ResourceSlice) { s.Labels[LabelSDPUID] = "other" },
		"nil actual": nil,
	}
	for name, change := range changes {
		if change == nil {
			if SlicesEqual(desired[0], nil) {
				t.Error("nil actual must not be equal")
			}
			continue
		}
		c := stored.DeepCopy()
		change(c)
		if SlicesEqual(desired[0], c) {
			t.Errorf("change %q not detected", name)
		}
	}
}

func TestFromUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "draforge.oaslananka/v1alpha1",
		"kind":       "SimulatedDevicePool",
		"metadata":   map[string]any{"name": "pool1", "namespace": "ns", "uid": "u1"},
		"spec": map[string]any{
			"deviceType":  "gpu",
			"deviceCount": int64(2),
			"targetNodes": []any{"node-a"},
			"attributes":  map[string]any{"model": map[string]any{"string": "H100"}, "gen": map[string]any{"int": int64(5)}},
			"capacities":  map[string]any{"memory": "80Gi", "lanes": int64(16)},
			"faults":      []any{map[string]any{"device": "gpu-1", "mode": "unhealthy"}, map[string]any{"device": int64(0), "mode": "disappear"}},
		},
	}}
	p, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.DriverName != DefaultDriverName || p.Spec.PoolName != "pool1" || p.Spec.AttributeDomain != DefaultDriverName {
		t.Errorf("defaults not applied: %+v", p.Spec)
	}
	if errs := p.Validate(); errs != nil {
		t.Fatal(errs)
	}
	if q := p.Spec.Capacities["lanes"]; q.Value() != 16 {
		t.Errorf("lanes %v", q)
	}
	if p.Spec.Faults[0].Device.StrVal != "gpu-1" || p.Spec.Faults[1].Device.IntVal != 0 {
		t.Errorf("faults %+v", p.Spec.Faults)
	}
	u.SetKind("Other")
	if _, err := FromUnstructured(u); err == nil {
		t.Error("wrong kind must fail")
	}
}

// A slice whose nodeAllocatableResources the API server dropped (gate off) is published: no
// rewrite forever. A stored slice that keeps some mapping is compared as usual, and a pool
// without mappings is unaffected.
func TestSlicesEqualNodeAllocatableDropped(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.Profile, s.DriverName, s.DeviceType, s.DeviceCount = ProfileExampleCPU, "cpu.example.com", "numa", 2
	})
	desired := mustSlices(t, p)[0]
	stored := roundTrip(t, desired)
	if !SlicesEqual(desired, stored) || NodeAllocatableDropped(desired, stored) {
		t.Fatal("a stored copy with the mapping (gate on) must be equal, nothing dropped")
	}
	dropped := stored.DeepCopy()
	for i := range dropped.Spec.Devices {
		dropped.Spec.Devices[i].NodeAllocatableResources = nil
	}
	if !SlicesEqual(desired, dropped) || !NodeAllocatableDropped(desired, dropped) {
		t.Error("a slice the server stripped of every mapping must be equal and reported dropped")
	}
	partial := stored.DeepCopy()
	partial.Spec.Devices[0].NodeAllocatableResources = nil
	if SlicesEqual(desired, partial) {
		t.Error("one device's mapping missing while another keeps its mapping is a difference")
	}
	changed := stored.DeepCopy()
	changed.Spec.Devices[0].NodeAllocatableResources[corev1.ResourceCPU].Mapping.CapacityMultiplier = ptr.To(resource.MustParse("2"))
	if SlicesEqual(desired, changed) {
		t.Error("a changed mapping is a difference")
	}
	// Dropped mappings hide nothing else.
	dropped.Spec.Devices[1].Attributes["numaNodeID"] = integer(7)
	if SlicesEqual(desired, dropped) {
		t.Error("an attribute change next to dropped mappings is a difference")
	}
	// A stored mapping the pool no longer wants is a difference.
	plain := newPool(func(s *PoolSpec) {
		s.Profile, s.DriverName, s.DeviceType, s.DeviceCount = ProfileDRACPU, "dra.cpu", "numa", 2
	})
	want := mustSlices(t, plain)[0]
	extra := roundTrip(t, want)
	extra.Spec.Devices[0].NodeAllocatableResources = stored.Spec.Devices[0].NodeAllocatableResources
	if SlicesEqual(want, extra) || NodeAllocatableDropped(want, extra) {
		t.Error("a mapping the pool does not publish is a difference")
	}
}

// spec.capacities.cpu replaces the CPU capacity the CPU profiles write qualified with the
// driver's domain (one ID, one name), and dra-cpu's numCPUs follows it.
func TestCPUProfilesCapacityOverride(t *testing.T) {
	for _, tc := range []struct {
		profile Profile
		driver  string
		key     resourcev1.QualifiedName
	}{
		{ProfileDRACPU, "dra.cpu", "dra.cpu/cpu"},
		{ProfileExampleCPU, "cpu.example.com", "cpu.example.com/cpu"},
		// Under the simulator's driver name with the example driver's attribute domain.
		{ProfileExampleCPU, DefaultDriverName, "cpu.example.com/cpu"},
	} {
		p := newPool(func(s *PoolSpec) {
			s.Profile, s.DriverName, s.DeviceType, s.DeviceCount = tc.profile, tc.driver, "numa", 2
			if tc.driver == DefaultDriverName {
				s.AttributeDomain = "cpu.example.com"
			}
			s.Capacities = map[string]resource.Quantity{"cpu": resource.MustParse("48")}
		})
		slices := mustSlices(t, p)
		d := slices[0].Spec.Devices[0]
		if q := d.Capacity[tc.key].Value; len(d.Capacity) != 1 || q.Value() != 48 {
			t.Errorf("%s: capacity %v, want only %s = 48", tc.profile, d.Capacity, tc.key)
		}
		if n, ok := d.Attributes["dra.cpu/numCPUs"]; tc.profile == ProfileDRACPU && (!ok || *n.IntValue != 48) {
			t.Errorf("%s: numCPUs %v, want 48", tc.profile, n)
		}
		if !SlicesEqual(slices[0], roundTrip(t, slices[0])) {
			t.Errorf("%s: the stored copy must be equal", tc.profile)
		}
	}
}
