// Package compactslice is the form in which DRAForge caches ResourceSlices: the same content as
// a resourcev1.ResourceSlice, without a Go map per device. A typed slice spends about 2.5 KiB
// per device on its attribute and capacity maps; here a device's attributes and capacities are
// short sorted lists of interned names and values, so a cache of thousands of slices costs a
// fraction of that. Readers that need the API type call Expand, which rebuilds an equal object
// (equality.Semantic: nil and empty lists and maps are the same).
package compactslice

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"unique"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Slice is a ResourceSlice in compact form. It is immutable: the spec is only reachable through
// accessors that return copies or values, and Expand returns a new object each time.
type Slice struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// spec is the slice's spec without its devices and driver.
	spec    resourcev1.ResourceSliceSpec
	driver  unique.Handle[string]
	devices []device
	// text holds the slice's distinct string and version attribute values, each once.
	// Values are kept per slice rather than interned globally because many are unique to a
	// device (UUIDs, PCI addresses), and a global intern entry costs several times the text.
	text string
}

// device is one device. Attributes with one scalar value and capacities without a request
// policy, which is what drivers publish, are stored compactly; anything else the device has
// is kept as is in rest. Names repeat across slices and are interned.
type device struct {
	name  unique.Handle[string]
	attrs []attribute // sorted by name
	caps  []capacity  // sorted by name
	// rest holds the device's other fields, and the attributes and capacities that have no
	// compact form; nil for a plain device.
	rest *resourcev1.Device
}

// attribute is one scalar attribute in 24 bytes. kindLen holds the kind of value in its top two
// bits and, for a string or version, the value's length in the others: the value is
// Slice.text[off:off+length]. num is an int's value, or a bool's as 0 or 1.
type attribute struct {
	name    unique.Handle[resourcev1.QualifiedName]
	off     uint32
	kindLen uint32
	num     int64
}

const (
	kindInt uint32 = iota << 30
	kindBool
	kindString
	kindVersion

	kindMask = 3 << 30
	maxLen   = 1<<30 - 1
)

func (a attribute) kind() uint32 { return a.kindLen & kindMask }

func (a attribute) text(text string) string {
	return text[a.off : a.off+a.kindLen&^kindMask]
}

type capacity struct {
	name  unique.Handle[resourcev1.QualifiedName]
	value unique.Handle[resource.Quantity]
}

// From returns the compact form of s. It keeps no reference to s.
func From(s *resourcev1.ResourceSlice) *Slice {
	out := &Slice{TypeMeta: s.TypeMeta, ObjectMeta: *s.ObjectMeta.DeepCopy(), driver: unique.Make(s.Spec.Driver)}
	spec := s.Spec
	spec.Devices, spec.Driver = nil, ""
	spec.DeepCopyInto(&out.spec)
	if len(s.Spec.Devices) > 0 {
		t := &textBuilder{at: map[string]uint32{}}
		out.devices = make([]device, len(s.Spec.Devices))
		for i := range s.Spec.Devices {
			out.devices[i] = compactDevice(&s.Spec.Devices[i], t)
		}
		out.text = strings.Clone(t.b.String()) // without the builder's spare capacity
	}
	return out
}

// textBuilder collects a slice's distinct attribute values.
type textBuilder struct {
	b  strings.Builder
	at map[string]uint32
}

// add returns the offset of v in the text, or false when the text would outgrow its offsets.
func (t *textBuilder) add(v string) (uint32, bool) {
	if off, ok := t.at[v]; ok {
		return off, true
	}
	if len(v) > maxLen || t.b.Len()+len(v) > math.MaxUint32 {
		return 0, false
	}
	off := uint32(t.b.Len())
	t.b.WriteString(v)
	t.at[v] = off
	return off, true
}

func compactDevice(d *resourcev1.Device, t *textBuilder) device {
	out := device{name: unique.Make(d.Name), attrs: make([]attribute, 0, len(d.Attributes)), caps: make([]capacity, 0, len(d.Capacity))}
	shell := *d
	shell.Name, shell.Attributes, shell.Capacity = "", nil, nil
	rest := shell.DeepCopy()
	for name, a := range d.Attributes {
		if c, ok := compactAttribute(name, a, t); ok {
			out.attrs = append(out.attrs, c)
			continue
		}
		if rest.Attributes == nil {
			rest.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
		}
		rest.Attributes[name] = *a.DeepCopy()
	}
	for name, c := range d.Capacity {
		if c.RequestPolicy == nil {
			out.caps = append(out.caps, capacity{name: unique.Make(name), value: unique.Make(c.Value)})
			continue
		}
		if rest.Capacity == nil {
			rest.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
		}
		rest.Capacity[name] = *c.DeepCopy()
	}
	slices.SortFunc(out.attrs, func(x, y attribute) int { return cmp.Compare(x.name.Value(), y.name.Value()) })
	slices.SortFunc(out.caps, func(x, y capacity) int { return cmp.Compare(x.name.Value(), y.name.Value()) })
	out.attrs, out.caps = fit(out.attrs), fit(out.caps)
	if !isZero(rest) {
		out.rest = rest
	}
	return out
}

// fit returns s in an allocation of its own length, nil when empty: a device's lists are sized
// for all of its attributes and capacities, and some may have gone to rest.
func fit[S ~[]E, E any](s S) S {
	switch {
	case len(s) == 0:
		return nil
	case len(s) < cap(s):
		return slices.Clone(s)
	}
	return s
}

func isZero(d *resourcev1.Device) bool {
	return d.Attributes == nil && d.Capacity == nil && d.ConsumesCounters == nil && d.NodeName == nil &&
		d.NodeSelector == nil && d.AllNodes == nil && d.Taints == nil && d.BindsToNode == nil &&
		d.BindingConditions == nil && d.BindingFailureConditions == nil && d.AllowMultipleAllocations == nil &&
		d.NodeAllocatableResources == nil
}

// compactAttribute stores an attribute with exactly one scalar value.
func compactAttribute(name resourcev1.QualifiedName, a resourcev1.DeviceAttribute, t *textBuilder) (attribute, bool) {
	if a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil {
		return attribute{}, false
	}
	out := attribute{name: unique.Make(name)}
	text := func(kind uint32, v string) bool {
		off, ok := t.add(v)
		out.off, out.kindLen = off, kind|uint32(len(v))
		return ok
	}
	switch {
	case a.IntValue != nil && a.BoolValue == nil && a.StringValue == nil && a.VersionValue == nil:
		out.kindLen, out.num = kindInt, *a.IntValue
	case a.BoolValue != nil && a.StringValue == nil && a.VersionValue == nil && a.IntValue == nil:
		out.kindLen = kindBool
		if *a.BoolValue {
			out.num = 1
		}
	case a.StringValue != nil && a.VersionValue == nil && a.IntValue == nil && a.BoolValue == nil:
		return out, text(kindString, *a.StringValue)
	case a.VersionValue != nil && a.StringValue == nil && a.IntValue == nil && a.BoolValue == nil:
		return out, text(kindVersion, *a.VersionValue)
	default:
		return attribute{}, false
	}
	return out, true
}

// Expand returns the slice as the API type, a new object the caller owns.
func (s *Slice) Expand() *resourcev1.ResourceSlice {
	out := &resourcev1.ResourceSlice{TypeMeta: s.TypeMeta, ObjectMeta: *s.ObjectMeta.DeepCopy()}
	s.spec.DeepCopyInto(&out.Spec)
	out.Spec.Driver = s.driver.Value()
	if s.devices != nil {
		out.Spec.Devices = make([]resourcev1.Device, len(s.devices))
		for i := range s.devices {
			s.devices[i].expandInto(&out.Spec.Devices[i], s.text)
		}
	}
	return out
}

func (d *device) expandInto(out *resourcev1.Device, text string) {
	if d.rest != nil {
		d.rest.DeepCopyInto(out)
	}
	out.Name = d.name.Value()
	if len(d.attrs) > 0 && out.Attributes == nil {
		out.Attributes = make(map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, len(d.attrs))
	}
	for _, a := range d.attrs {
		out.Attributes[a.name.Value()] = a.expand(text)
	}
	if len(d.caps) > 0 && out.Capacity == nil {
		out.Capacity = make(map[resourcev1.QualifiedName]resourcev1.DeviceCapacity, len(d.caps))
	}
	for _, c := range d.caps {
		out.Capacity[c.name.Value()] = resourcev1.DeviceCapacity{Value: c.value.Value().DeepCopy()}
	}
}

func (a attribute) expand(text string) resourcev1.DeviceAttribute {
	switch a.kind() {
	case kindInt:
		return resourcev1.DeviceAttribute{IntValue: new(a.num)}
	case kindBool:
		return resourcev1.DeviceAttribute{BoolValue: new(a.num == 1)}
	case kindString:
		return resourcev1.DeviceAttribute{StringValue: new(a.text(text))}
	default:
		return resourcev1.DeviceAttribute{VersionValue: new(a.text(text))}
	}
}

// Device returns device i as the API type, a new object the caller owns: what one device's
// check needs without expanding the whole slice.
func (s *Slice) Device(i int) *resourcev1.Device {
	out := &resourcev1.Device{}
	s.devices[i].expandInto(out, s.text)
	return out
}

// Driver is spec.driver.
func (s *Slice) Driver() string { return s.driver.Value() }

// Pool is spec.pool.
func (s *Slice) Pool() resourcev1.ResourcePool { return s.spec.Pool }

// NodeName is spec.nodeName, "" when the slice is not bound to one node.
func (s *Slice) NodeName() string {
	if s.spec.NodeName == nil {
		return ""
	}
	return *s.spec.NodeName
}

// Len is the number of devices.
func (s *Slice) Len() int { return len(s.devices) }

// DeviceName is the name of device i.
func (s *Slice) DeviceName(i int) string { return s.devices[i].name.Value() }

// Taints are device i's taints (a copy).
func (s *Slice) Taints(i int) []resourcev1.DeviceTaint {
	r := s.devices[i].rest
	if r == nil || len(r.Taints) == 0 {
		return nil
	}
	out := make([]resourcev1.DeviceTaint, len(r.Taints))
	for j := range r.Taints {
		r.Taints[j].DeepCopyInto(&out[j])
	}
	return out
}

// AllowsMultipleAllocations reports device i's allowMultipleAllocations.
func (s *Slice) AllowsMultipleAllocations(i int) bool {
	r := s.devices[i].rest
	return r != nil && r.AllowMultipleAllocations != nil && *r.AllowMultipleAllocations
}

// GetObjectKind implements runtime.Object.
func (s *Slice) GetObjectKind() schema.ObjectKind { return &s.TypeMeta }

// DeepCopyObject implements runtime.Object. The spec and devices are immutable and shared.
func (s *Slice) DeepCopyObject() runtime.Object {
	out := *s
	out.ObjectMeta = *s.ObjectMeta.DeepCopy()
	return &out
}

// ExpandObject implements engine.Compact.
func (s *Slice) ExpandObject() runtime.Object { return s.Expand() }

// DecodeUnstructured sets s to the compact form of u, a ResourceSlice as the API serves it.
func (s *Slice) DecodeUnstructured(u *unstructured.Unstructured) error {
	var typed resourcev1.ResourceSlice
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &typed); err != nil {
		return fmt.Errorf("ResourceSlice %s: %w", u.GetName(), err)
	}
	*s = *From(&typed)
	return nil
}
