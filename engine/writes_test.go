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
