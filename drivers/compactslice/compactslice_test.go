package compactslice

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
)

func nodes(n int) []*corev1.Node {
	var out []*corev1.Node
	for i := range n {
		out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{"x": "y"}}})
	}
	return out
}

// published returns the slices DRAForge publishes for a pool of each profile, with user
// attributes of every scalar type, a capacity and a fault (a device taint).
func published(t testing.TB) []*resourcev1.ResourceSlice {
	t.Helper()
	var out []*resourcev1.ResourceSlice
	for _, profile := range append([]simdevice.Profile{""}, simdevice.Profiles()...) {
		count, faulty := 8, int32(3)
		if slices.Contains(simdevice.WholeNodeProfiles(), profile) {
			count, faulty = 1, 0 // one device for the whole node
		}
		p := pooltest.Pool("ns", "p"+string(profile), "uid",
			simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: count, Profile: profile, NodeSelector: map[string]string{"x": "y"},
				Attributes: map[string]simdevice.AttributeValue{
					"s": {String: new("a")}, "i": {Int: new(int64(7))}, "b": {Bool: new(false)}, "v": {Version: new("1.2.3")}},
				Capacities: map[string]resource.Quantity{"memory": resource.MustParse("80Gi"), "cores": resource.MustParse("1500m")},
				Faults:     []simdevice.Fault{{Device: intstr.FromInt32(faulty), Mode: simdevice.FaultUnhealthy}}})
		s, err := simdevice.DesiredSlices(p, nodes(3))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s...)
	}
	return out
}

// odd is a slice using every field that has no compact form.
func odd() *resourcev1.ResourceSlice {
	node := "node-0"
	return &resourcev1.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: "odd", Labels: map[string]string{"a": "b"}, UID: "u", ResourceVersion: "9"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "d.example.com", Pool: resourcev1.ResourcePool{Name: "p", Generation: 3, ResourceSliceCount: 2},
			PerDeviceNodeSelection: new(true),
			SharedCounters: []resourcev1.CounterSet{{Name: "mem", Counters: map[string]resourcev1.Counter{
				"memory": {Value: resource.MustParse("40Gi")}}}},
			Devices: []resourcev1.Device{
				{Name: "plain"},
				{
					Name:     "everything",
					NodeName: &node,
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
						"list":    {IntValues: []int64{1, 2}},
						"strings": {StringValues: []string{"a"}},
						"two":     {IntValue: new(int64(1)), StringValue: new("x")}, // invalid, still kept
						"none":    {},                                               // likewise
						"plain":   {BoolValue: new(true)},
					},
					Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
						"bw":  {Value: resource.MustParse("10G"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: new(resource.MustParse("1G"))}},
						"mem": {Value: resource.MustParse("1Gi")},
					},
					ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "mem", Counters: map[string]resourcev1.Counter{
						"memory": {Value: resource.MustParse("10Gi")}}}},
					Taints:                   []resourcev1.DeviceTaint{{Key: "k", Value: "v", Effect: resourcev1.DeviceTaintEffectNoExecute}},
					BindsToNode:              new(true),
					BindingConditions:        []string{"ready"},
					BindingFailureConditions: []string{"failed"},
					AllowMultipleAllocations: new(true),
				},
				{Name: "selected", AllNodes: new(true), NodeSelector: &corev1.NodeSelector{}},
			},
		},
	}
}

func checkRoundTrip(t *testing.T, s *resourcev1.ResourceSlice) {
	t.Helper()
	want := s.DeepCopy()
	c := From(s)
	got := c.Expand()
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("slice %s does not round-trip:\n got %+v\nwant %+v", s.Name, got, want)
	}
	if c.Driver() != s.Spec.Driver || c.Pool() != s.Spec.Pool || c.Len() != len(s.Spec.Devices) ||
		c.NodeName() != func() string {
			if s.Spec.NodeName == nil {
				return ""
			}
			return *s.Spec.NodeName
		}() {
		t.Fatalf("slice %s: accessors disagree with the spec", s.Name)
	}
	for i, d := range s.Spec.Devices {
		multi := d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
		if c.DeviceName(i) != d.Name || c.AllowsMultipleAllocations(i) != multi || !equality.Semantic.DeepEqual(c.Taints(i), d.Taints) ||
			!equality.Semantic.DeepEqual(*c.Device(i), d) {
			t.Fatalf("slice %s device %d: accessors disagree with the spec", s.Name, i)
		}
	}
}

func TestRoundTripPublishedSlices(t *testing.T) {
	for _, s := range published(t) {
		checkRoundTrip(t, s)
	}
}

func TestRoundTripOddFields(t *testing.T) {
	checkRoundTrip(t, odd())
	c := From(odd())
	if !c.AllowsMultipleAllocations(1) || c.AllowsMultipleAllocations(0) || c.devices[0].rest != nil || c.devices[1].rest == nil {
		t.Fatal("the plain device should be compact and the odd one keep its rest")
	}
	if len(c.devices[1].attrs) != 1 || len(c.devices[1].caps) != 1 {
		t.Fatalf("only the plain attribute and capacity have a compact form: %+v", c.devices[1])
	}
}

// TestRoundTripRandomSlices fills every field of many slices at random.
func TestRoundTripRandomSlices(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0.3).NumElements(0, 4).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
		},
		func(ts *metav1.Time, c randfill.Continue) {
			*ts = metav1.Unix(c.Int63n(1<<31), 0)
		},
	)
	for range 500 {
		var s resourcev1.ResourceSlice
		f.Fill(&s)
		checkRoundTrip(t, &s)
	}
}

// TestIndependentOfInputAndOutput: the compact form keeps nothing of its input, and expanded
// objects share nothing with it or with each other.
func TestIndependentOfInputAndOutput(t *testing.T) {
	s := odd()
	want := s.DeepCopy()
	c := From(s)
	s.Labels["a"] = "changed"
	s.Spec.SharedCounters[0].Name = "changed"
	s.Spec.Devices[1].Attributes["list"].IntValues[0]++
	s.Spec.Devices[1].Taints[0].Key = "changed"
	x := c.Expand()
	x.Labels["a"] = "changed"
	*x.Spec.Devices[1].Attributes["plain"].BoolValue = false
	x.Spec.Devices[1].Capacity["mem"] = resourcev1.DeviceCapacity{}
	x.Spec.Devices[1].Taints[0].Key = "changed"
	if got := c.Expand(); !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("compact form changed:\n got %+v\nwant %+v", got, want)
	}
	d := c.DeepCopyObject().(*Slice)
	d.Labels["a"] = "changed"
	if c.Labels["a"] != "b" {
		t.Fatal("DeepCopyObject shares the labels")
	}
}

func TestDecodeUnstructured(t *testing.T) {
	s := odd()
	m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		t.Fatal(err)
	}
	var c Slice
	if err := c.DecodeUnstructured(&unstructured.Unstructured{Object: m}); err != nil {
		t.Fatal(err)
	}
	if got := c.Expand(); !equality.Semantic.DeepEqual(got, s) {
		t.Fatalf("got %+v\nwant %+v", got, s)
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "bad"}, "spec": "not an object"}}
	if err := c.DecodeUnstructured(bad); err == nil {
		t.Fatal("a malformed slice decoded without error")
	}
}

// TestSmallerThanTyped: the point of the package. The bench task reports the controller's whole
// cache cost per slice; this checks the slices alone, published 8-device nvidia-gpu slices.
func TestSmallerThanTyped(t *testing.T) {
	var typed []*resourcev1.ResourceSlice
	var uuid resourcev1.QualifiedName
	for _, s := range published(t) {
		if s.Labels[simdevice.LabelSDPName] == "p"+string(simdevice.ProfileNvidiaGPU) {
			typed, uuid = append(typed, s), "uuid"
		}
	}
	if len(typed) == 0 {
		t.Fatal("no nvidia-gpu slice published")
	}
	const n = 500
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	r := rand.New(rand.NewPCG(1, 2))
	measure := func(keep func(*resourcev1.ResourceSlice) any) float64 {
		objs := make([]any, 0, n)
		before := heap()
		for range n {
			// Each copy gets its own UIDs, as slices on different nodes do.
			s := typed[r.IntN(len(typed))].DeepCopy()
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].Attributes[uuid] = resourcev1.DeviceAttribute{StringValue: new(fmt.Sprintf("GPU-%x", r.Uint64()))}
			}
			objs = append(objs, keep(s))
		}
		after := heap()
		runtime.KeepAlive(objs)
		return float64(after-before) / n
	}
	full := measure(func(s *resourcev1.ResourceSlice) any { return s })
	compact := measure(func(s *resourcev1.ResourceSlice) any { return From(s) })
	t.Logf("8-device nvidia-gpu slice: typed %.0f B, compact %.0f B", full, compact)
	if compact*5 > full {
		t.Errorf("compact form %.0f B is not a fifth of the typed %.0f B", compact, full)
	}
}

// BenchmarkSlice measures the conversions of a published 8-device nvidia-gpu slice, against a
// DeepCopy of the typed slice as the reference cost of building one.
func BenchmarkSlice(b *testing.B) {
	var s *resourcev1.ResourceSlice
	for _, p := range published(b) {
		if p.Labels[simdevice.LabelSDPName] == "p"+string(simdevice.ProfileNvidiaGPU) {
			s = p
			break
		}
	}
	c := From(s)
	b.Run("From", func(b *testing.B) {
		for b.Loop() {
			From(s)
		}
	})
	b.Run("Expand", func(b *testing.B) {
		for b.Loop() {
			c.Expand()
		}
	})
	b.Run("DeepCopy", func(b *testing.B) {
		for b.Loop() {
			s.DeepCopy()
		}
	})
}
