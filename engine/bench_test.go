package engine

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/engine/machine"
)

const benchMachine = `package machines

machine: widget: {
	resource: {group: "e2e.draforge.oaslananka", version: "v1", resource: "widgets"}
	namespaced: true
	status: conditions: true
	states: {
		pending: conditions: [{type: "Ready", status: "False", reason: "Pending"}]
		ready: conditions: [{type: "Ready", status: "True", reason: "ConfigMapReady"}]
		"terminal-error": {terminal: true, conditions: [{type: "Ready", status: "False", reason: "TerminalError"}]}
	}
	initial: "pending"
	derive: [
		{state: "ready", when: condition: {type: "Ready", status: "True", current: true}},
		{state: "terminal-error", when: condition: {type: "Ready", status: "False", reason: "TerminalError", current: true}},
	]
	events: [
		{name: "make", when: observe: "needsWork"},
		{name: "settle", when: {observe: "needsWork", not: true}},
	]
	transitions: [
		{event: "make", from: ["pending", "ready"], to: "ready", actions: ["work"]},
		{event: "settle", from: ["pending"], to: "ready"},
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

func benchRunner(b testing.TB) *runner {
	reg := NewRegistry()
	reg.Observation("needsWork", func(_ context.Context, o *unstructured.Unstructured) (bool, error) { return needsWork(o), nil })
	reg.Action("work", func(_ context.Context, o *unstructured.Unstructured) error { return work(o) })
	ms, err := machine.Load(fstest.MapFS{"widget.cue": {Data: []byte(benchMachine)}}, reg.Names())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC)
	e := &Engine{o: Options{Registry: reg, Observer: nopObserver{}, Now: func() time.Time { return now }}}
	return &runner{e: e, m: ms[0], hist: newHistory(20)}
}

// decide is sync without I/O: copy, derive, pick the event, fire it through looplab/fsm,
// run the actions, set conditions and diff the status. It returns whether a write is due.
func (r *runner) decide(ctx context.Context, cached *unstructured.Unstructured) (string, bool, error) {
	obj := cached.DeepCopy()
	from, err := r.derive(ctx, obj)
	if err != nil || r.m.States[from].Terminal {
		return from, false, err
	}
	f := r.m.NewFSM(from)
	ev, err := r.pickEvent(ctx, obj, func(name string) bool { return f.Can(name) })
	if err != nil {
		return from, false, err
	}
	before := statusOf(obj)
	to := from
	if ev != "" {
		for _, name := range r.transition(ev, from).Actions {
			if err := r.e.o.Registry.actions[name](ctx, obj); err != nil {
				return from, false, err
			}
		}
		if err := f.Event(ctx, ev); err != nil && !isNoTransition(err) {
			return from, false, err
		}
		to = f.Current()
	}
	r.setConditions(obj, to, "")
	return to, !equality.Semantic.DeepEqual(normalize(before), normalize(statusOf(obj))), nil
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

func TestDecideMatchesHandWritten(t *testing.T) {
	r := benchRunner(t)
	for _, obj := range []*unstructured.Unstructured{benchObject(), func() *unstructured.Unstructured {
		o := benchObject()
		o.SetGeneration(1)
		return o
	}()} {
		es, ew, err := r.decide(t.Context(), obj)
		if err != nil {
			t.Fatal(err)
		}
		hs, hw, _ := handWritten(obj, time.Now())
		if es != hs || ew != hw {
			t.Errorf("generation %d: engine (%s, write=%v) != hand-written (%s, write=%v)", obj.GetGeneration(), es, ew, hs, hw)
		}
	}
}

// BenchmarkTransition compares the engine's per-transition overhead with a hand-written
// switch doing the same work (no API I/O): a ready widget whose spec changed fires make.
func BenchmarkTransition(b *testing.B) {
	obj := benchObject()
	var engineNs float64
	b.Run("engine", func(b *testing.B) {
		r := benchRunner(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if to, write, err := r.decide(ctx, obj); err != nil || to != "ready" || !write {
				b.Fatalf("decide = %s %v %v", to, write, err)
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
