package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
)

const renewMachine = `package machines

machine: holder: {
	resource: {group: "", version: "v1", resource: "nodes"}
	namespaced: false
	states: {
		ready: on: [{event: "renew", to: "ready", actions: [{apply: {
			resource: {group: "coordination.k8s.io", version: "v1", resource: "leases"}
			namespace: "kube-node-lease"
			name:      "{{.object.metadata.name}}"
			object: {
				apiVersion: "coordination.k8s.io/v1"
				kind:       "Lease"
				spec: {holderIdentity: "{{.object.metadata.name}}", leaseDurationSeconds: 40, renewTime: "{{.nowMicro}}"}
			}
			patch: spec: {holderIdentity: "{{.object.metadata.name}}", renewTime: "{{.nowMicro}}"}
		}}]}]
		failed: terminal: true
	}
	initial: "ready"
	terminalState: "failed"
}
`

// TestApplyWithPatch: an apply action with a patch template merge-patches an existing object
// (only the patch's fields) and falls back to applying the whole object when it is missing.
func TestApplyWithPatch(t *testing.T) {
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	now := time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC)
	r := testRunner(t, renewMachine, NewRegistry(), now)
	a := r.m.States["ready"].On[0].Actions[0].Apply
	if a == nil || a.Patch == nil {
		t.Fatalf("apply action %+v, want one with a patch template", r.m.States["ready"].On[0].Actions[0])
	}
	node := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "n1", "uid": "u1"}}}
	existing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": "n1", "namespace": "kube-node-lease"},
		"spec":     map[string]any{"holderIdentity": "someone-else", "leaseDurationSeconds": int64(40)}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{leases: "LeaseList"}, existing)
	r.e.o.Dynamic = dyn
	data := TemplateData(r.m, Input{Object: node, Now: now}, nil)

	if err := r.apply(context.Background(), a, data, nil, nil); err != nil {
		t.Fatal(err)
	}
	patches := patchActions(dyn.Actions())
	if len(patches) != 1 || patches[0].GetPatchType() != types.MergePatchType || patches[0].GetName() != "n1" {
		t.Fatalf("patches %+v, want one merge patch of n1", patches)
	}
	var body map[string]any
	if err := json.Unmarshal(patches[0].GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	spec, _ := body["spec"].(map[string]any)
	if len(body) != 1 || len(spec) != 2 || spec["holderIdentity"] != "n1" || spec["renewTime"] != "2026-07-02T00:00:00.000000Z" {
		t.Errorf("merge patch %s, want only spec.holderIdentity n1 and spec.renewTime", patches[0].GetPatch())
	}
	got, err := dyn.Resource(leases).Namespace("kube-node-lease").Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := unstructured.NestedString(got.Object, "spec", "holderIdentity"); h != "n1" {
		t.Errorf("holder %q after the renewal, want n1", h)
	}

	// Missing: the patch finds nothing, the whole object is applied.
	if err := dyn.Resource(leases).Namespace("kube-node-lease").Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn.ClearActions()
	_ = r.apply(context.Background(), a, data, nil, nil) // the fake may not implement apply; the request is what counts
	patches = patchActions(dyn.Actions())
	if len(patches) != 2 || patches[0].GetPatchType() != types.MergePatchType || patches[1].GetPatchType() != types.ApplyPatchType {
		t.Fatalf("patches %+v, want a merge patch then an apply", patches)
	}
	if err := json.Unmarshal(patches[1].GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if spec, _ := body["spec"].(map[string]any); spec["leaseDurationSeconds"] != float64(40) || body["kind"] != "Lease" {
		t.Errorf("apply %s, want the whole Lease", patches[1].GetPatch())
	}
}

func patchActions(actions []clienttesting.Action) []clienttesting.PatchAction {
	var out []clienttesting.PatchAction
	for _, a := range actions {
		if p, ok := a.(clienttesting.PatchAction); ok {
			out = append(out, p)
		}
	}
	return out
}

// sameStatus decides whether a pass writes status: equal maps, and the same JSON with other
// Go number types, are the same; any changed value is not.
func TestSameStatus(t *testing.T) {
	cached := map[string]any{"phase": "Running", "observedGeneration": int64(2), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	same := map[string]any{"phase": "Running", "observedGeneration": float64(2), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	changed := map[string]any{"phase": "Running", "observedGeneration": int64(2), "conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}
	switch {
	case !sameStatus(cached, cached) || !sameStatus(nil, nil):
		t.Error("a status differs from itself")
	case !sameStatus(cached, same):
		t.Error("int64 2 and float64 2 differ")
	case sameStatus(cached, changed) || sameStatus(nil, cached):
		t.Error("a changed condition is the same status")
	}
}

// statusPatch carries only the fields that changed (as JSON compares them) and the dropped ones
// as null.
func TestStatusPatch(t *testing.T) {
	before := map[string]any{"phase": "Pending", "observedGeneration": int64(2), "hostIP": "10.0.0.1", "message": "waiting"}
	after := map[string]any{"phase": "Running", "observedGeneration": float64(2), "hostIP": "10.0.0.1", "podIP": "10.0.0.2"}
	got := statusPatch(before, after)
	want := map[string]any{"phase": "Running", "podIP": "10.0.0.2", "message": nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("statusPatch = %v, want %v", got, want)
	}
}

const timedRenewMachine = `package machines

machine: holder: {
	resource: {group: "", version: "v1", resource: "nodes"}
	namespaced: false
	related: lease: {
		resource: {group: "coordination.k8s.io", version: "v1", resource: "leases"}
		namespace: "kube-node-lease"
		name:      "{{.object.metadata.name}}"
	}
	states: {
		ready: on: [{
			event: "renew"
			after: {duration: "10s", since: "related.lease.spec.renewTime"}
			to: "ready"
			actions: [{apply: {
				resource: {group: "coordination.k8s.io", version: "v1", resource: "leases"}
				namespace: "kube-node-lease"
				name:      "{{.object.metadata.name}}"
				object: {apiVersion: "coordination.k8s.io/v1", kind: "Lease", spec: renewTime: "{{.nowMicro}}"}
				patch: spec: renewTime: "{{.nowMicro}}"
			}}]
		}]
		failed: terminal: true
	}
	initial: "ready"
	terminalState: "failed"
}
`

// TestRelatedWriteSetsTheNextTimer: the pass that renews a related Lease learns from its own
// write when the next renewal is due (no second pass over the node for the Lease's echo); a
// pass before the cache shows the write does not renew again; the write's echo does not
// enqueue the node, while any other change of the Lease does.
func TestRelatedWriteSetsTheNextTimer(t *testing.T) {
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	now := time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC)
	r := testRunner(t, timedRenewMachine, NewRegistry(), now)
	leaseAt := func(rv, renewed string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
			"metadata": map[string]any{"name": "n1", "namespace": "kube-node-lease", "resourceVersion": rv},
			"spec":     map[string]any{"holderIdentity": "n1", "renewTime": renewed}}}
	}
	old := leaseAt("10", "2026-07-01T23:59:45.000000Z") // renewed 15s ago: due
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{leases: "LeaseList"}, old)
	dyn.PrependReactor("patch", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, leaseAt("11", "2026-07-02T00:00:00.000000Z"), nil
	})
	r.e.o.Dynamic = dyn
	r.queue = workqueue.NewTypedRateLimitingQueue[string](workqueue.DefaultTypedControllerRateLimiter[string]())
	t.Cleanup(r.queue.ShutDown)
	rel := r.m.Related["lease"]
	r.related["lease"] = relatedRef{spec: rel, inf: RelatedInformer(r.e.o.Informers, rel)}
	if err := r.related["lease"].inf.GetStore().Add(old); err != nil {
		t.Fatal(err)
	}
	node := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "n1", "uid": "u1", "resourceVersion": "3"}}}

	pass := func() Step {
		in := r.input(t.Context(), node, node)
		st := r.step(t.Context(), &in)
		r.decideAgain(t.Context(), "n1", &st, in.Object, in.Facts, false)
		return st
	}
	st := pass()
	if st.Event != "renew" || st.Outcome != Done {
		t.Fatalf("first pass: event %q outcome %q err %v, want the renewal", st.Event, st.Outcome, st.Err)
	}
	if st.RequeueAfter != 10*time.Second {
		t.Errorf("after the renewal the node is requeued after %v, want 10s (from the renewal it wrote)", st.RequeueAfter)
	}
	if n := len(patchActions(dyn.Actions())); n != 1 {
		t.Fatalf("%d patches, want 1", n)
	}

	// The cache still shows the old Lease: a pass now must not renew again.
	st = pass()
	if st.Transition != nil || st.RequeueAfter != 10*time.Second {
		t.Errorf("a pass before the cache caught up: event %q, requeue after %v; want none, 10s", st.Event, st.RequeueAfter)
	}
	if n := len(patchActions(dyn.Actions())); n != 1 {
		t.Errorf("%d patches, want still 1", n)
	}

	r.relIndex.link(leases, "kube-node-lease/n1", "n1")
	r.relatedChanged(leases, leaseAt("11", "2026-07-02T00:00:00.000000Z"), false)
	if r.queue.Len() != 0 {
		t.Error("the renewal's own echo enqueued the node")
	}
	r.relatedChanged(leases, leaseAt("12", "2026-07-02T00:00:01.000000Z"), false)
	if r.queue.Len() != 1 {
		t.Error("another change of the Lease did not enqueue the node")
	}
}

// TestMergePatch follows RFC 7386: maps merge, null removes, anything else replaces, and
// the target is left as it was.
func TestMergePatch(t *testing.T) {
	target := map[string]any{"a": "x", "m": map[string]any{"keep": int64(1), "drop": "y", "set": "old"}, "l": []any{"1"}}
	got := mergePatch(target, map[string]any{"m": map[string]any{"drop": nil, "set": "new", "add": true}, "l": []any{"2"}, "n": map[string]any{"k": "v"}})
	want := map[string]any{"a": "x", "m": map[string]any{"keep": int64(1), "set": "new", "add": true}, "l": []any{"2"}, "n": map[string]any{"k": "v"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged %v, want %v", got, want)
	}
	if m := target["m"].(map[string]any); m["set"] != "old" || m["drop"] != "y" || len(m) != 3 {
		t.Errorf("the target changed: %v", target)
	}
}
