package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const selectingMachine = `package machines

machine: widget: {
	resource: {group: "example.io", version: "v1", resource: "widgets"}
	namespaced: true
	selector: when: {field: "spec.ours", equals: true}
	states: {
		a: {requeueAfter: "1m"}
		failed: terminal: true
	}
	initial: "a"
	terminalState: "failed"
}
`

type countingObserver struct {
	nopObserver
	syncs int
}

func (o *countingObserver) SyncStarted(string) { o.syncs++ }

func widget(name string, ours bool) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "ns", "uid": name},
		"spec":     map[string]any{"ours": ours},
	}}
}

// TestSelectorWhenSkipsObjects: an object the machine's selector.when rejects is neither
// queued by its events nor passed over when a trigger or timer queues its key; a selected
// one is.
func TestSelectorWhenSkipsObjects(t *testing.T) {
	r := testRunner(t, selectingMachine, NewRegistry(), time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC))
	obs := &countingObserver{}
	r.e.o.Observer = obs
	r.queue = workqueue.NewTypedRateLimitingQueue[string](workqueue.DefaultTypedControllerRateLimiter[string]())
	defer r.queue.ShutDown()
	r.own = &own{inf: cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})}

	theirs, ours := widget("theirs", false), widget("ours", true)
	if Selects(r.m, theirs.Object) || !Selects(r.m, ours.Object) {
		t.Fatal("Selects disagrees with spec.ours")
	}
	r.enqueueObj(theirs)
	if n := r.queue.Len(); n != 0 {
		t.Fatalf("an event of a rejected object queued %d keys", n)
	}
	if !r.whenHolds(cache.DeletedFinalStateUnknown{Key: "ns/theirs"}) || !r.whenHolds(cache.DeletedFinalStateUnknown{Key: "ns/theirs", Obj: theirs}) {
		t.Error("a deletion the informer saw only as a tombstone must be passed on")
	}
	r.enqueueObj(ours)
	if n := r.queue.Len(); n != 1 {
		t.Fatalf("an event of a selected object queued %d keys, want 1", n)
	}
	r.queue.Get() // drop it: this test passes over no selected object
	r.queue.Done("ns/ours")

	// A trigger queues the rejected object's key: the cached object decides, no pass runs.
	if err := r.own.inf.GetStore().Add(theirs); err != nil {
		t.Fatal(err)
	}
	r.queue.Add("ns/theirs")
	if !r.processNext(t.Context()) {
		t.Fatal("queue shut down")
	}
	if obs.syncs != 0 || r.queue.Len() != 0 {
		t.Errorf("rejected object: %d passes, %d keys queued; want none", obs.syncs, r.queue.Len())
	}
}
