package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/draforge/draforge/engine/machine"
)

const readerMachines = `package machines

machine: lamp: {
	resource: {group: "example.io", version: "v1", resource: "lamps"}
	namespaced: true
	related: {
		// read by derive: the reader watches it
		toggle: {resource: {group: "example.io", version: "v1", resource: "toggles"}, namespace: "{{.object.metadata.namespace}}", name: "{{.object.metadata.name}}"}
		// read only by a transition: the reader does not watch it
		power: {resource: {group: "", version: "v1", resource: "configmaps"}, namespace: "kube-system", name: "power"}
	}
	states: {
		off: on: [{event: "flip", when: exists: "power", to: "on"}]
		on: {}
		failed: terminal: true
	}
	initial: "off"
	derive: [{state: "on", when: {of: "toggle", field: "spec.on", equals: true}}]
	terminalState: "failed"
}

machine: gauge: {
	resource: {group: "example.io", version: "v1", resource: "gauges"}
	namespaced: false
	states: {
		low: on: [{event: "rise", when: observe: "gaugeHigh", to: "high"}]
		high: {}
		failed: terminal: true
	}
	initial: "low"
	derive: [{state: "high", when: observe: "gaugeHigh"}]
	terminalState: "failed"
}
`

// TestReaderDerivesWithoutDrivers: the read-only Reader derives states from the caches with
// the pure step; it lists and watches only the machines' objects and the related objects
// their derive rules read, and never sends anything but list and watch.
func TestReaderDerivesWithoutDrivers(t *testing.T) {
	ms, err := machine.Load(fstest.MapFS{"m.cue": {Data: []byte(readerMachines)}}, machine.Names{Observations: []string{"gaugeHigh"}})
	if err != nil {
		t.Fatal(err)
	}
	obj := func(apiVersion, kind, ns, name string, fields map[string]any) runtime.Object {
		u := &unstructured.Unstructured{Object: fields}
		if u.Object == nil {
			u.Object = map[string]any{}
		}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	g := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: r}
	}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		g("lamps"): "LampList", g("toggles"): "ToggleList", g("gauges"): "GaugeList", configmaps: "ConfigMapList",
	},
		obj("example.io/v1", "Lamp", "ns", "l1", nil), obj("example.io/v1", "Lamp", "ns", "l2", nil),
		obj("example.io/v1", "Lamp", "ns", "l3", nil),
		obj("example.io/v1", "Toggle", "ns", "l1", map[string]any{"spec": map[string]any{"on": true}}),
		obj("example.io/v1", "Toggle", "ns", "l2", map[string]any{"spec": map[string]any{"on": false}}),
		obj("example.io/v1", "Gauge", "", "g1", nil),
		obj("v1", "ConfigMap", "kube-system", "power", nil),
	)
	inf := NewInformers(dyn)
	r, err := NewReader(inf, ms)
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.Start(t.Context()); err != nil {
		t.Fatal(err)
	}

	for key, want := range map[string]string{"ns/l1": "on", "ns/l2": "off", "ns/l3": "off"} {
		if got, err := r.State(t.Context(), "lamp", key); err != nil || got != want {
			t.Errorf("lamp %s: %q, %v; want %q", key, got, err, want)
		}
	}
	if _, err := r.State(t.Context(), "lamp", "ns/none"); !errors.Is(err, ErrObjectNotFound) {
		t.Errorf("missing object: %v", err)
	}
	if _, err := r.State(t.Context(), "nope", "ns/l1"); !errors.Is(err, ErrUnknownMachine) {
		t.Errorf("unknown machine: %v", err)
	}
	// A derive rule that needs a driver's observation cannot be answered without drivers.
	if _, err := r.State(t.Context(), "gauge", "g1"); err == nil || !strings.Contains(err.Error(), `observation "gaugeHigh" needs the controller's drivers`) {
		t.Errorf("gauge: %v", err)
	}
	var watched []string
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("reader sent %s %s", a.GetVerb(), a.GetResource().Resource)
		}
		if a.GetVerb() == "list" {
			watched = append(watched, a.GetResource().Resource)
		}
	}
	slices.Sort(watched)
	if want := []string{"gauges", "lamps", "toggles"}; !slices.Equal(watched, want) {
		t.Errorf("listed %v, want %v (configmaps are read only by a transition)", watched, want)
	}
}
