package engine

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

func podAt(rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: rv}}
}

// TestWritesLagUntilTheCacheCatchesUp: a cached object older than our write lags, one at or
// past it does not and the write is forgotten; a delete lags while the object is cached; a
// resourceVersion that is not a number is never waited for; LaggingBy keeps to its tag.
func TestWritesLagUntilTheCacheCatchesUp(t *testing.T) {
	var w Writes
	w.Wrote(podsGVR, "ns/p", "10", "")
	if !w.Lags(podsGVR, "ns/p", podAt("9")) {
		t.Error("an older cached object does not lag")
	}
	if !w.Lags(podsGVR, "ns/p", nil) {
		t.Error("a written object the cache does not hold yet does not lag")
	}
	if w.Lags(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "ns/p", podAt("9")) {
		t.Error("a write of one resource makes another lag")
	}
	if w.Lags(podsGVR, "ns/p", cache.DeletedFinalStateUnknown{Obj: podAt("11")}) {
		t.Error("a newer cached object lags")
	}
	if w.Lags(podsGVR, "ns/p", podAt("9")) {
		t.Error("the caught-up write was kept")
	}

	w.Wrote(podsGVR, "ns/gone", "", "pool-a")
	if key, ok := w.LaggingBy(podsGVR, "pool-a", func(string) any { return podAt("5") }); !ok || key != "ns/gone" {
		t.Errorf("a delete the cache still shows: LaggingBy = %q, %v", key, ok)
	}
	if _, ok := w.LaggingBy(podsGVR, "pool-b", func(string) any { return podAt("5") }); ok {
		t.Error("another tag's write lags")
	}
	if _, ok := w.LaggingBy(podsGVR, "pool-a", func(string) any { return nil }); ok {
		t.Error("a delete the cache shows lags")
	}

	w.Wrote(podsGVR, "ns/p", "not-a-number", "")
	if w.Lags(podsGVR, "ns/p", podAt("1")) {
		t.Error("a write whose resourceVersion is not a number is waited for")
	}
	w.Wrote(podsGVR, "ns/p", "20", "")
	w.Forget(podsGVR, "ns/p")
	if w.Lags(podsGVR, "ns/p", podAt("1")) {
		t.Error("a forgotten write lags")
	}
}

// TestExpectIgnoresAnEmptyResourceVersion: a write whose answer carried no resourceVersion is
// not remembered (for Writes "" means deleted, and the object would lag while it is cached).
func TestExpectIgnoresAnEmptyResourceVersion(t *testing.T) {
	r := testRunner(t, selectingMachine, NewRegistry(), time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC))
	u := widget("w", true)
	u.SetResourceVersion("5")
	r.expect(u, "")
	if r.stale(u) {
		t.Error("an answer without a resourceVersion made the cached object stale")
	}
	r.expect(u, "6")
	if !r.stale(u) {
		t.Error("an answer with a newer resourceVersion did not")
	}
}

// TestWritesEchoOfAWrittenObject: while the cache lags a written object, Object hands out the
// object as written; the event carrying exactly that write is its echo for the watcher that
// wrote it and news for any other; an older event arriving first, or a pass that did not
// finish (PassOnEcho), makes the echo news; a delete is always news. Events that arrive while
// the write is under way are held until its answer tells whether they were its echo.
func TestWritesEchoOfAWrittenObject(t *testing.T) {
	written := map[string]any{"spec": map[string]any{"renewTime": "2026-07-02T00:00:10.000000Z"}}
	var w Writes
	w.WroteObject(podsGVR, "ns/p", "10", "node", written)
	if got, ok := w.Object(podsGVR, "ns/p", podAt("9")); !ok || got["spec"] == nil {
		t.Fatalf("Object over an older cached object = %v, %v; want the written one", got, ok)
	}
	if got, ok := w.Object(podsGVR, "ns/p", nil); !ok || got == nil {
		t.Error("Object before the cache holds the object at all: not the written one")
	}
	// The informer's cache shows the write before its handlers hear of it.
	if _, ok := w.Object(podsGVR, "ns/p", podAt("10")); ok {
		t.Error("Object over a cache that caught up: the written one")
	}
	if w.Echo(podsGVR, "ns/p", "other-machine", podAt("10")) {
		t.Error("another watcher's event counted as its own echo")
	}
	if !w.Echo(podsGVR, "ns/p", "node", podAt("10")) {
		t.Error("the write's own echo is news")
	}
	if w.Echo(podsGVR, "ns/p", "node", podAt("10")) {
		t.Error("an echo counted twice")
	}
	if _, ok := w.Object(podsGVR, "ns/p", podAt("9")); ok {
		t.Error("the written object outlived its echo")
	}

	w.WroteObject(podsGVR, "ns/p", "20", "node", written)
	if w.Echo(podsGVR, "ns/p", "node", podAt("15")) {
		t.Error("an event older than the write counted as its echo")
	}
	if w.Echo(podsGVR, "ns/p", "node", podAt("20")) {
		t.Error("the echo after an interleaved event is not news")
	}

	w.WroteObject(podsGVR, "ns/p", "30", "node", written)
	if w.Echo(podsGVR, "ns/p", "node", podAt("31")) {
		t.Error("a newer event than the write counted as its echo")
	}
	w.WroteObject(podsGVR, "ns/p", "40", "node", written)
	w.PassOnEcho(podsGVR, "ns/p")
	if w.Echo(podsGVR, "ns/p", "node", podAt("40")) {
		t.Error("the echo of an unfinished pass's write is not news")
	}
	w.WroteObject(podsGVR, "ns/p", "50", "node", written)
	if w.Echo(podsGVR, "ns/p", "node", nil) {
		t.Error("a delete counted as an echo")
	}
	if _, ok := w.Object(podsGVR, "ns/p", podAt("1")); ok {
		t.Error("a delete left the written object behind")
	}

	w.Writing(podsGVR, "ns/p", "node")
	if !w.Echo(podsGVR, "ns/p", "node", podAt("60")) {
		t.Error("an event during the write was not held")
	}
	if w.WroteObject(podsGVR, "ns/p", "60", "node", written) {
		t.Error("the write's own echo, heard before its answer, was news")
	}
	w.Writing(podsGVR, "ns/p", "node")
	w.Echo(podsGVR, "ns/p", "node", podAt("65"))
	w.Echo(podsGVR, "ns/p", "node", podAt("70"))
	if !w.WroteObject(podsGVR, "ns/p", "70", "node", written) {
		t.Error("another change heard during the write was not news")
	}
	w.Writing(podsGVR, "ns/p", "node")
	if !w.Lags(podsGVR, "ns/p", podAt("1")) || w.Lags(podsGVR, "ns/p", podAt("70")) {
		t.Error("during a write, the cache is not compared with the earlier write it has not shown")
	}
	w.Writing(podsGVR, "ns/q", "node")
	if w.Lags(podsGVR, "ns/q", podAt("1")) {
		t.Error("a first write under way lags")
	}
	w.Echo(podsGVR, "ns/p", "node", podAt("75"))
	if !w.NotWritten(podsGVR, "ns/p") {
		t.Error("a change heard during a failed write was not news")
	}
	if w.NotWritten(podsGVR, "ns/p") {
		t.Error("a failed write reported news twice")
	}
}
