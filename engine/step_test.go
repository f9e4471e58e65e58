package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// heartbeat writes status only through its actions (conditions false), like the node and pod
// machines: a pass whose timer is not due fires nothing.
const heartbeat = `package machines

import "github.com/draforge/draforge/schemas"

machine: [string]: schemas.#Machine

machine: beat: {
	resource: {group: "example.io", version: "v1", resource: "beats"}
	namespaced: false
	status: conditions: false
	states: {
		alive: on: [{
			event: "beat"
			after: {duration: "10s", since: "status.lastBeat"}
			to: "alive"
			actions: [{patch: status: lastBeat: "{{.now}}"}]
		}]
		failed: terminal: true
	}
	initial:       "alive"
	terminalState: "failed"
}
`

// TestStepLeavesTheCachedObjectAlone: step decides on the caller's object (the informer's
// cached copy) without copying it when nothing fires, and works on a private copy when an
// action changes the object, so the cache never sees a pass's unwritten changes.
func TestStepLeavesTheCachedObjectAlone(t *testing.T) {
	r := testRunner(t, heartbeat, NewRegistry(), t0)
	cached := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.io/v1", "kind": "Beat",
		"metadata": map[string]any{"name": "b", "resourceVersion": "7"},
		"status":   map[string]any{"lastBeat": t0.Add(-3 * time.Second).Format(time.RFC3339)},
	}}
	snapshot := cached.DeepCopy()

	in := Input{Object: cached, Facts: r.newFacts(t.Context(), cached), Now: t0}
	st := r.step(t.Context(), &in)
	if st.Outcome != Done || st.Transition != nil || in.Object != cached || st.RequeueAfter != 7*time.Second {
		t.Fatalf("not due: outcome %s transition %v requeue %s, copied %v", st.Outcome, st.Transition, st.RequeueAfter, in.Object != cached)
	}

	in = Input{Object: cached, Facts: r.newFacts(t.Context(), cached), Now: t0.Add(8 * time.Second)}
	st = r.step(t.Context(), &in)
	if st.Outcome != Done || st.Event != "beat" || in.Object == cached {
		t.Fatalf("due: outcome %s event %q, copied %v", st.Outcome, st.Event, in.Object != cached)
	}
	if got, _, _ := unstructured.NestedString(in.Object.Object, "status", "lastBeat"); got != t0.Add(8*time.Second).Format(time.RFC3339) {
		t.Fatalf("the pass's copy shows lastBeat %q", got)
	}
	if !equality.Semantic.DeepEqual(cached.Object, snapshot.Object) {
		t.Fatalf("the cached object changed: %v", cached.Object)
	}
}

// TestStepApplyOnlyWorksOnTheCachedObject: a transition whose only action applies another
// object (a Lease renewal) fires on the cached object itself: nothing of it can change, so it
// is neither copied nor, in sync, compared for a status write.
func TestStepApplyOnlyWorksOnTheCachedObject(t *testing.T) {
	r := testRunner(t, renewMachine, NewRegistry(), t0)
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	lease := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": "n1", "namespace": "kube-node-lease"}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{leases: "LeaseList"}, lease)
	r.e.o.Dynamic = dyn
	cached := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "n1", "uid": "u1", "resourceVersion": "3"}}}
	snapshot := cached.DeepCopy()

	in := Input{Object: cached, Facts: r.newFacts(t.Context(), cached), Now: t0}
	st := r.step(t.Context(), &in)
	if st.Outcome != Done || st.Event != "renew" || in.Object != cached {
		t.Fatalf("outcome %s event %q err %v, copied %v; want renew fired on the cached object", st.Outcome, st.Event, st.Err, in.Object != cached)
	}
	if st.Transition.MayChangeStatus() || st.Transition.ChangesObject() {
		t.Fatalf("an apply-only transition may change the object or its status: %+v", st.Transition)
	}
	if patches := patchActions(dyn.Actions()); len(patches) != 1 || patches[0].GetResource() != leases {
		t.Fatalf("requests %+v, want one patch of the Lease", dyn.Actions())
	}
	if !equality.Semantic.DeepEqual(cached.Object, snapshot.Object) {
		t.Fatalf("the cached object changed: %v", cached.Object)
	}
}
