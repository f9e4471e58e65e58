package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

func claimObj(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"devices": map[string]any{"requests": []any{map[string]any{
			"name": "gpu", "exactly": map[string]any{"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": int64(1)}}}}},
	}}
}

// TestWatcher: the first snapshot comes from the synced caches without a change list; later
// changes are coalesced into few rebuilds that list every changed object once.
func TestWatcher(t *testing.T) {
	node := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "node-a"}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvr.SimulatedDevicePools: simdevice.Kind + "List", gvr.ResourceSlices: "ResourceSliceList", gvr.DeviceClasses: "DeviceClassList", gvr.DeviceTaintRules: "DeviceTaintRuleList", gvr.PodGroups: "PodGroupList",
		gvr.ResourceClaims: "ResourceClaimList", gvr.Pods: "PodList", gvr.Nodes: "NodeList",
	}, node, claimObj("demo", "first"))
	inf := engine.NewInformers(dyn)
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := &Watcher{Informers: inf, Server: s, Interval: 300 * time.Millisecond}
	if err := w.Register(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _, _, _, _ := s.hub.subscribe(0, false)
	go func() { _ = inf.Plugin().Start(ctx) }()
	go func() { _ = w.Start(ctx) }()

	next := func() changeData {
		t.Helper()
		select {
		case ev := <-c.ch:
			var d changeData
			if err := json.Unmarshal(ev.data, &d); err != nil {
				t.Fatal(err)
			}
			return d
		case <-time.After(5 * time.Second):
			t.Fatal("no snapshot published")
		}
		return changeData{}
	}
	first := next()
	if first.Version != 1 || !first.Truncated || first.Counts.Claims != 1 || first.Counts.Nodes != 1 {
		t.Fatalf("first snapshot %+v", first)
	}
	api := dyn.Resource(gvr.ResourceClaims).Namespace("demo")
	for i := range 5 {
		if _, err := api.Create(ctx, claimObj("demo", fmt.Sprint("c", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := api.Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := map[Change]bool{}
	events := 0
	for len(seen) < 6 {
		d := next()
		events++
		for _, ch := range d.Changes {
			seen[ch] = true
		}
		if d.Truncated {
			t.Errorf("truncated: %+v", d)
		}
	}
	if !seen[Change{Kind: "ResourceClaim", Namespace: "demo", Name: "first", Op: OpDelete}] || !seen[Change{Kind: "ResourceClaim", Namespace: "demo", Name: "c4", Op: OpAdd}] {
		t.Errorf("changes %v", seen)
	}
	if events > 3 {
		t.Errorf("6 quick changes took %d rebuilds, want them coalesced", events)
	}
	g := s.store.current()
	if snap := g.view().snap; g.counts.Claims != 5 || snap.Claim("demo", "first") != nil || snap.Claim("demo", "c3") == nil {
		t.Errorf("final snapshot: %+v", g.counts)
	}
}

// TestCaptureKeepsItsObjects: a captured generation builds the objects the caches held when it
// was captured (compact slices expanded), each time it is built, whatever the caches see later.
func TestCaptureKeepsItsObjects(t *testing.T) {
	slice := func(name, label string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"v": label}},
			"spec": map[string]any{"driver": "d.example.com", "nodeName": "node-a",
				"pool":    map[string]any{"name": "p-" + name, "generation": int64(1), "resourceSliceCount": int64(1)},
				"devices": []any{map[string]any{"name": "gpu-0", "attributes": map[string]any{"d.example.com/index": map[string]any{"int": int64(0)}}}}},
		}}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvr.SimulatedDevicePools: simdevice.Kind + "List", gvr.ResourceSlices: "ResourceSliceList", gvr.DeviceClasses: "DeviceClassList", gvr.DeviceTaintRules: "DeviceTaintRuleList", gvr.PodGroups: "PodGroupList",
		gvr.ResourceClaims: "ResourceClaimList", gvr.Pods: "PodList", gvr.Nodes: "NodeList",
	}, slice("a", "1"), slice("b", "1"))
	inf := engine.NewInformers(dyn)
	clusterview.Forms(inf)
	w := &Watcher{Informers: inf}
	if err := w.Register(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := inf.Start(ctx); err != nil {
		t.Fatal(err)
	}
	labels := func(snap *inventory.Snapshot) map[string]string {
		out := map[string]string{}
		for _, sl := range snap.Slices {
			if sl.Spec.Devices[0].Attributes["d.example.com/index"].IntValue == nil {
				t.Fatalf("slice %s expanded without its attribute", sl.Name)
			}
			out[sl.Name] = sl.Labels["v"]
		}
		return out
	}
	first := w.capture()
	want := map[string]string{"a": "1", "b": "1"}
	if got := labels(first()); !maps.Equal(got, want) {
		t.Fatalf("first capture: %v", got)
	}

	slices := dyn.Resource(gvr.ResourceSlices)
	if _, err := slices.Update(ctx, slice("a", "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := slices.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !maps.Equal(labels(w.capture()()), map[string]string{"a": "2"}) {
		if time.Now().After(deadline) {
			t.Fatal("cache did not see the update and delete")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := labels(first()); !maps.Equal(got, want) {
		t.Errorf("first capture built again after the changes: %v", got)
	}
}
