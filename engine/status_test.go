package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// startingMachine writes status on start (as the pod machine does going Running) and has a
// timer in the state it enters (the pod's run-for).
const startingMachine = `package machines

machine: widget: {
	resource: {group: "example.io", version: "v1", resource: "widgets"}
	namespaced: true
	status: conditions: false
	states: {
		pending: on: [{event: "start", to: "running", actions: [{patch: status: {phase: "Running", startTime: "{{.now}}"}}]}]
		running: on: [{event: "finish", after: {duration: "30s", since: "status.startTime"}, to: "done", actions: [{patch: status: phase: "Done"}]}]
		done: {}
		failed: terminal: true
	}
	initial: "pending"
	derive: [
		{state: "done", when: {field: "status.phase", equals: "Done"}},
		{state: "running", when: {field: "status.phase", equals: "Running"}},
	]
	terminalState: "failed"
}
`

// TestStatusWriteSetsTheNextTimer: the pass that writes an object's status decides again on
// what it wrote, so it learns the next timer without a second pass over its own write's echo;
// the echo enqueues nothing while any other change does; a pass that finds the cache behind
// the write (queued by something else meanwhile) lets the echo through, since that pass did
// not decide on its cause.
func TestStatusWriteSetsTheNextTimer(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "widgets"}
	now := time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC)
	r := testRunner(t, startingMachine, NewRegistry(), now)
	at := func(name, rv string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": "ns", "uid": name, "resourceVersion": rv}}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	running := map[string]any{"phase": "Running", "startTime": now.Format(time.RFC3339)}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgets: "WidgetList"})
	dyn.PrependReactor("patch", "widgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, at(a.(clienttesting.PatchAction).GetName(), "6", running), nil
	})
	r.e.o.Dynamic = dyn
	r.queue = workqueue.NewTypedRateLimitingQueue[string](workqueue.DefaultTypedControllerRateLimiter[string]())
	t.Cleanup(r.queue.ShutDown)
	r.own = &own{inf: cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})}
	for _, name := range []string{"a", "b"} {
		if err := r.own.inf.GetStore().Add(at(name, "5", nil)); err != nil {
			t.Fatal(err)
		}
	}

	st, _ := r.sync(t.Context(), "ns/a")
	if st.Event != "start" || st.Outcome != Done {
		t.Fatalf("first pass: event %q outcome %q err %v, want the start", st.Event, st.Outcome, st.Err)
	}
	if st.RequeueAfter != 30*time.Second {
		t.Errorf("after the start the object is requeued after %v, want 30s (the timer of the state it wrote)", st.RequeueAfter)
	}
	if n := len(patchActions(dyn.Actions())); n != 1 {
		t.Fatalf("%d patches, want 1", n)
	}
	r.updated(at("a", "5", nil), at("a", "6", running))
	if r.queue.Len() != 0 {
		t.Error("the status write's own echo enqueued the object")
	}
	r.updated(at("a", "6", running), at("a", "7", running))
	if r.queue.Len() != 1 {
		t.Error("another change of the object did not enqueue it")
	}

	if st, _ = r.sync(t.Context(), "ns/b"); st.Event != "start" {
		t.Fatalf("b: event %q, want the start", st.Event)
	}
	// Queued again (by a trigger) before the cache shows the write: no second write, and the
	// echo now brings the news this pass did not decide on.
	if st, _ = r.sync(t.Context(), "ns/b"); st.Transition != nil {
		t.Errorf("a pass before the cache caught up fired %q", st.Event)
	}
	if n := len(patchActions(dyn.Actions())); n != 2 {
		t.Errorf("%d patches, want 2", n)
	}
	before := r.queue.Len()
	r.updated(at("b", "5", nil), at("b", "6", running))
	if r.queue.Len() != before+1 {
		t.Error("the echo after a pass that found the cache behind did not enqueue the object")
	}
}
