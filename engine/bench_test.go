package engine

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/engine/machine"
)

const benchMachine = `package machines

machine: widget: {
	resource: {group: "e2e.draforge.oaslananka", version: "v1", resource: "widgets"}
	namespaced: true
	status: conditions: true
	states: {
		pending: {
			conditions: [{type: "Ready", status: "False", reason: "Pending"}]
			on: [
				{event: "make", when: observe: "needsWork", to: "ready", actions: ["work"]},
				{event: "settle", to: "ready"},
			]
		}
		ready: {
			conditions: [{type: "Ready", status: "True", reason: "ConfigMapReady"}]
			on: [{event: "make", when: observe: "needsWork", to: "ready", actions: ["work"]}]
		}
		"terminal-error": {terminal: true, conditions: [{type: "Ready", status: "False", reason: "TerminalError"}]}
	}
	initial: "pending"
	derive: [
		{state: "ready", when: condition: {type: "Ready", status: "True", current: true}},
		{state: "terminal-error", when: condition: {type: "Ready", status: "False", reason: "TerminalError", current: true}},
	]
	terminalState: "terminal-error"
}
`

func benchObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.draforge.oaslananka/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns", "generation": int64(2), "uid": "u"},
		"spec":     map[string]any{"payload": "v2"},
		"status": map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "ConfigMapReady", "message": "",
			"lastTransitionTime": "2026-07-01T12:00:00Z", "observedGeneration": int64(1)}}},
	}}
}

// needsWork and work stand for a driver's observation and action: the same code runs in
// both benchmarks, so only the engine's own overhead differs.
func needsWork(obj *unstructured.Unstructured) bool {
	p, _, _ := unstructured.NestedString(obj.Object, "spec", "payload")
	return p != "v1"
}

func work(*unstructured.Unstructured) error { return nil }

// testRunner builds a runner for src with no API server: drivers from reg, a fixed clock.
func testRunner(tb testing.TB, src string, reg *Registry, now time.Time) *runner {
	tb.Helper()
	ms, err := machine.Load(fstest.MapFS{"m.cue": {Data: []byte(src)}}, reg.Names())
	if err != nil {
		tb.Fatal(err)
	}
	e := &Engine{o: Options{Registry: reg, Informers: NewInformers(nil), Observer: nopObserver{}, Now: func() time.Time { return now }}}
	return &runner{e: e, m: ms[0], hist: newHistory(20), events: ms[0].FSMEvents(), related: map[string]relatedRef{}}
}

func benchRunner(tb testing.TB) *runner {
	reg := NewRegistry()
	reg.Observation("needsWork", func(_ context.Context, o *unstructured.Unstructured) (Fact, error) { return Holds(needsWork(o)), nil })
	reg.Action("work", func(_ context.Context, o *unstructured.Unstructured) error { return work(o) })
	return testRunner(tb, benchMachine, reg, time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC))
}

// engineStep is what sync does without the cache and the API: run the real step (Decide,
// looplab/fsm with the actions in its callback, conditions) and diff the status. It returns the
// state reached and whether a status write is due.
func engineStep(ctx context.Context, r *runner, cached *unstructured.Unstructured) (string, bool, error) {
	in := Input{Object: cached, Facts: r.newFacts(ctx, cached), Now: r.e.o.Now()}
	st := r.step(ctx, &in)
	if st.Outcome != Done {
		return st.To, false, st.Err
	}
	return st.To, in.Object != cached && !sameStatus(statusView(cached), statusView(in.Object)), nil
}

// handWritten is what a controller without the engine would do for the same machine.
func handWritten(cached *unstructured.Unstructured, now time.Time) (string, bool, error) {
	obj := cached.DeepCopy()
	gen := obj.GetGeneration()
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var ready map[string]any
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			ready = m
		}
	}
	og, _, _ := unstructured.NestedInt64(ready, "observedGeneration")
	current := ready != nil && og == gen
	state := "pending"
	switch {
	case current && ready["status"] == "True":
		state = "ready"
	case current && ready["status"] == "False" && ready["reason"] == "TerminalError":
		return "terminal-error", false, nil
	}
	switch {
	case needsWork(obj):
		if err := work(obj); err != nil {
			return state, false, err
		}
		state = "ready"
	case state == "pending":
		state = "ready"
	}
	status, reason := "False", "Pending"
	if state == "ready" {
		status, reason = "True", "ConfigMapReady"
	}
	ltt := now.UTC().Format("2006-01-02T15:04:05Z")
	if ready != nil && ready["status"] == status {
		ltt, _ = ready["lastTransitionTime"].(string)
	}
	changed := ready == nil || ready["status"] != status || ready["reason"] != reason || og != gen
	_ = unstructured.SetNestedSlice(obj.Object, []any{map[string]any{"type": "Ready", "status": status, "reason": reason,
		"message": "", "lastTransitionTime": ltt, "observedGeneration": gen}}, "status", "conditions")
	_ = unstructured.SetNestedField(obj.Object, gen, "status", "observedGeneration")
	return state, changed, nil
}

func TestStepMatchesHandWritten(t *testing.T) {
	r := benchRunner(t)
	for _, obj := range []*unstructured.Unstructured{benchObject(), func() *unstructured.Unstructured {
		o := benchObject()
		o.SetGeneration(1)
		return o
	}()} {
		es, ew, err := engineStep(t.Context(), r, obj)
		if err != nil {
			t.Fatal(err)
		}
		hs, hw, _ := handWritten(obj, time.Now())
		if es != hs || ew != hw {
			t.Errorf("generation %d: engine (%s, write=%v) != hand-written (%s, write=%v)", obj.GetGeneration(), es, ew, hs, hw)
		}
	}
}

// BenchmarkTransition compares the engine's real step (runner.step: Decide, the looplab/fsm
// transition running the action in its callback, conditions; no API I/O) with a hand-written
// switch doing the same work: a ready widget whose spec changed fires make.
func BenchmarkTransition(b *testing.B) {
	obj := benchObject()
	var engineNs float64
	b.Run("engine", func(b *testing.B) {
		r := benchRunner(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if to, write, err := engineStep(ctx, r, obj); err != nil || to != "ready" || !write {
				b.Fatalf("step = %s %v %v", to, write, err)
			}
		}
		engineNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("hand-written", func(b *testing.B) {
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			if to, write, err := handWritten(obj, now); err != nil || to != "ready" || !write {
				b.Fatalf("handWritten = %s %v %v", to, write, err)
			}
		}
		hand := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if engineNs > 0 && hand > 0 {
			b.ReportMetric(engineNs/hand, "engine/hand-ratio")
		}
	})
}
