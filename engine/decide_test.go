package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/util/workqueue"

	"github.com/draforge/draforge/engine/machine"
)

// lifecycle is a CUE-only machine exercising every test kind, timers, templates and outcomes.
const lifecycle = `package machines

import "github.com/draforge/draforge/schemas"

machine: [string]: schemas.#Machine

machine: job: {
	resource: {group: "example.io", version: "v1", resource: "jobs"}
	namespaced: true
	status: conditions: true
	related: lease: {
		resource: {group: "coordination.k8s.io", version: "v1", resource: "leases"}
		namespace: "leases"
		name:      "{{.object.metadata.name}}"
	}
	states: {
		pending: {
			requeueAfter: "1m"
			conditions: [
				{type: "Ready", status: "False", reason: "Pending", message: "waiting for {{.object.metadata.name}}"},
				{type: "Quota", status: "True", reason: "Big", when: {field: "spec.size", atLeast: 10}},
				{type: "Quota", status: "False", reason: "Small"},
			]
			on: [
				{event: "start", when: {all: [
					{label: "example.io/go", equals: "yes"},
					{any: [{annotation: "example.io/fast"}, {age: {over: "1h"}}]},
				]}, to: "running", actions: ["work"]},
				{event: "bad", when: {field: "spec.mode", in: ["broken", "wrong"]}, to: "pending", actions: ["fail"]},
				{event: "claim", when: {field: "spec.mode", equals: "claim"}, to: "running", actions: ["claim"]},
			]
		}
		running: {
			conditions: [{type: "Ready", status: "True", reason: "Running", message: "{{.facts.Message \"load\"}}"}]
			on: [
				{event: "heartbeat", when: {field: "status.conditions[type=Ready].status", equals: "True"},
					after: {duration: "10s", since: "related.lease.spec.renewTime", annotation: "example.io/every"},
					to: "running", actions: ["beat"]},
				{event: "finish", when: {observe: "load", not: true},
					after: {duration: "30s", since: "status.startTime", jitter: "5s"}, to: "done"},
			]
		}
		taken: conditions: [{type: "Ready", status: "False", reason: "Taken", message: "{{.outcome.message}}"}]
		done: {terminal: true, conditions: [{type: "Ready", status: "True", reason: "Done"}]}
		failed: {terminal: true, conditions: [{type: "Ready", status: "False", reason: "Failed"}]}
	}
	initial: "pending"
	derive: [
		{state: "failed", when: condition: {type: "Ready", status: "False", reason: "Failed", current: true}},
		{state: "done", when: condition: {type: "Ready", status: "True", reason: "Done"}},
		{state: "taken", when: condition: {type: "Ready", status: "False", reason: "Taken"}},
		{state: "running", when: {field: "status.conditions[type=Ready].reason", equals: "Running"}},
	]
	anyState: [{event: "gone", to: "pending",
		when: all: [{exists: "lease", not: true}, {field: "spec.mode", equals: "orphan"}]}]
	outcomes: Taken: to: "taken"
	terminalState: "failed"
	backoff: {base: "1s", cap: "8s", maxRetries: 2,
		retry: ["Conflict", "AlreadyExists", "Timeout", "TooManyRequests", "ServiceUnavailable", "InternalError", "NotFound"],
		terminal: ["Unknown", "Forbidden", "Unauthorized", "Invalid", "BadRequest", "MethodNotSupported", "RequestEntityTooLarge"]}
}
`

var t0 = time.Date(2026, 7, 2, 12, 0, 0, 0, time.UTC)

type fakeFacts struct {
	facts   map[string]Fact
	errs    map[string]error
	related map[string]map[string]any
	calls   map[string]int
}

func (f *fakeFacts) Observe(name string) (Fact, error) {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
	return f.facts[name], f.errs[name]
}

func (f *fakeFacts) Related(name string) map[string]any { return f.related[name] }

func job(mutate func(o map[string]any)) *unstructured.Unstructured {
	o := map[string]any{
		"apiVersion": "example.io/v1", "kind": "Job",
		"metadata": map[string]any{"name": "j", "namespace": "ns", "uid": "uid-1", "generation": int64(3),
			"creationTimestamp": t0.Add(-2 * time.Hour).Format(time.RFC3339),
			"labels":            map[string]any{"example.io/go": "yes"}},
		"spec": map[string]any{"size": int64(4)},
	}
	if mutate != nil {
		mutate(o)
	}
	return &unstructured.Unstructured{Object: o}
}

func withReady(reason string, gen int64) func(map[string]any) {
	return func(o map[string]any) {
		o["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready",
			"status": map[bool]string{true: "True", false: "False"}[reason == "Running" || reason == "Done"],
			"reason": reason, "observedGeneration": gen}}}
	}
}

type jobActions struct {
	calls []string
	err   map[string]error
}

func (a *jobActions) registry() *Registry {
	reg := NewRegistry()
	reg.Observation("load", func(context.Context, *unstructured.Unstructured) (Fact, error) { return Fact{}, nil })
	for _, n := range []string{"work", "fail", "claim", "beat"} {
		reg.Action(n, func(context.Context, *unstructured.Unstructured) error {
			a.calls = append(a.calls, n)
			return a.err[n]
		})
	}
	return reg
}

func loadJob(t *testing.T) *machine.Machine {
	t.Helper()
	return testRunner(t, lifecycle, (&jobActions{}).registry(), t0).m
}

func decide(m *machine.Machine, obj *unstructured.Unstructured, f *fakeFacts) Step {
	if f == nil {
		f = &fakeFacts{}
	}
	return Decide(m, Input{Object: obj, Facts: f, Now: t0})
}

func TestDecideDerive(t *testing.T) {
	m := loadJob(t)
	for _, tc := range []struct {
		name   string
		obj    *unstructured.Unstructured
		marked bool
		want   string
	}{
		{"no status: initial", job(nil), false, "pending"},
		{"field path with list selection", job(withReady("Running", 1)), false, "running"},
		{"current condition", job(withReady("Failed", 3)), false, "failed"},
		{"stale condition does not count", job(withReady("Failed", 2)), false, "pending"},
		{"order: first rule wins", job(withReady("Done", 1)), false, "done"},
		{"terminal mark wins", job(nil), true, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Decide(m, Input{Object: tc.obj, Facts: &fakeFacts{}, Now: t0, TerminalMarked: tc.marked})
			if st.From != tc.want {
				t.Errorf("derived %s, want %s", st.From, tc.want)
			}
		})
	}
}

func TestDecideChoosesTransition(t *testing.T) {
	m := loadJob(t)
	lease := map[string]map[string]any{"lease": {"spec": map[string]any{"renewTime": t0.Format(time.RFC3339)}}}
	for _, tc := range []struct {
		name      string
		obj       *unstructured.Unstructured
		facts     *fakeFacts
		event, to string
	}{
		// all + any: label equals and (annotation present or age over 1h): created 2h ago.
		{"all/any/label/age", job(nil), &fakeFacts{related: lease}, "start", "running"},
		{"age not over", job(func(o map[string]any) {
			o["metadata"].(map[string]any)["creationTimestamp"] = t0.Add(-time.Minute).Format(time.RFC3339)
		}), &fakeFacts{related: lease}, "", "pending"},
		{"annotation presence", job(func(o map[string]any) {
			md := o["metadata"].(map[string]any)
			md["creationTimestamp"] = t0.Format(time.RFC3339)
			md["annotations"] = map[string]any{"example.io/fast": ""}
		}), &fakeFacts{related: lease}, "start", "running"},
		{"label mismatch, in list", job(func(o map[string]any) {
			o["metadata"].(map[string]any)["labels"] = map[string]any{"example.io/go": "no"}
			o["spec"].(map[string]any)["mode"] = "wrong"
		}), &fakeFacts{related: lease}, "bad", "pending"},
		// anyState is tried first: a missing related object and mode orphan.
		{"anyState first, exists not", job(func(o map[string]any) { o["spec"].(map[string]any)["mode"] = "orphan" }),
			&fakeFacts{}, "gone", "pending"},
		{"exists holds", job(func(o map[string]any) { o["spec"].(map[string]any)["mode"] = "orphan" }),
			&fakeFacts{related: lease}, "start", "running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := decide(m, tc.obj, tc.facts)
			if st.Err != nil || st.Event != tc.event || st.To != tc.to {
				t.Errorf("event %q to %s (err %v), want %q to %s", st.Event, st.To, st.Err, tc.event, tc.to)
			}
		})
	}
}

func TestDecideConditions(t *testing.T) {
	m := loadJob(t)
	st := decide(m, job(func(o map[string]any) { o["metadata"].(map[string]any)["labels"] = nil }), &fakeFacts{})
	want := []Condition{
		{Type: "Ready", Status: "False", Reason: "Pending", Message: "waiting for j"},
		{Type: "Quota", Status: "False", Reason: "Small"},
	}
	if fmt.Sprint(st.Conditions) != fmt.Sprint(want) {
		t.Errorf("conditions %v, want %v", st.Conditions, want)
	}
	// when picks the first entry of a type that holds; atLeast reads numbers.
	big := job(func(o map[string]any) {
		o["spec"] = map[string]any{"size": int64(12)}
		o["metadata"].(map[string]any)["labels"] = nil
	})
	if c := decide(m, big, nil).Conditions; len(c) != 2 || c[1].Reason != "Big" {
		t.Errorf("big job conditions %v", c)
	}
	// An observation's message fills a template.
	f := &fakeFacts{facts: map[string]Fact{"load": {Holds: true, Message: "busy: 3 tasks"}},
		related: map[string]map[string]any{"lease": {"spec": map[string]any{"renewTime": t0.Format(time.RFC3339)}}}}
	st = decide(m, job(withReady("Running", 3)), f)
	if len(st.Conditions) != 1 || st.Conditions[0].Message != "busy: 3 tasks" {
		t.Errorf("running conditions %v", st.Conditions)
	}
}

// TestPassFactsMemoize: a pass calls each observation once however often tests and templates
// ask.
func TestPassFactsMemoize(t *testing.T) {
	calls := 0
	reg := NewRegistry()
	reg.Observation("load", func(context.Context, *unstructured.Unstructured) (Fact, error) {
		calls++
		return Fact{Holds: true, Message: "m"}, nil
	})
	for _, n := range []string{"work", "fail", "claim", "beat"} {
		reg.Action(n, func(context.Context, *unstructured.Unstructured) error { return nil })
	}
	r := testRunner(t, lifecycle, reg, t0)
	f := r.newFacts(t.Context(), job(nil))
	for range 3 {
		if fact, err := f.Observe("load"); err != nil || fact.Message != "m" {
			t.Fatal(fact, err)
		}
	}
	if calls != 1 {
		t.Errorf("observed %d times in one pass", calls)
	}
}

func TestDecideTimers(t *testing.T) {
	m := loadJob(t)
	running := func(mutate func(map[string]any)) *unstructured.Unstructured {
		return job(func(o map[string]any) {
			withReady("Running", 3)(o)
			if mutate != nil {
				mutate(o)
			}
		})
	}
	renewed := func(ago time.Duration) *fakeFacts {
		return &fakeFacts{facts: map[string]Fact{"load": {Holds: true}},
			related: map[string]map[string]any{"lease": {"spec": map[string]any{"renewTime": t0.Add(-ago).Format("2006-01-02T15:04:05.000000Z07:00")}}}}
	}
	// Not due: requeue for the rest, nothing fires.
	st := decide(m, running(nil), renewed(4*time.Second))
	if st.Transition != nil || st.RequeueAfter != 6*time.Second {
		t.Errorf("renewed 4s ago: event %q, requeue %s; want none, 6s", st.Event, st.RequeueAfter)
	}
	// Due: the heartbeat self-transition fires.
	if st := decide(m, running(nil), renewed(10*time.Second)); st.Event != "heartbeat" || st.To != "running" {
		t.Errorf("renewed 10s ago: event %q", st.Event)
	}
	// The annotation overrides the duration.
	ann := running(func(o map[string]any) {
		o["metadata"].(map[string]any)["annotations"] = map[string]any{"example.io/every": "2s"}
	})
	if st := decide(m, ann, renewed(3*time.Second)); st.Event != "heartbeat" {
		t.Errorf("annotation 2s, renewed 3s ago: event %q", st.Event)
	}
	// A missing timestamp is due now.
	if st := decide(m, running(nil), &fakeFacts{facts: map[string]Fact{"load": {Holds: true}}}); st.Event != "heartbeat" {
		t.Errorf("no lease: event %q", st.Event)
	}
	// Jitter is fixed per UID and below its bound.
	j := Jitter("uid-1", 5*time.Second)
	if j != Jitter("uid-1", 5*time.Second) || j < 0 || j >= 5*time.Second || j == Jitter("uid-2", 5*time.Second) {
		t.Errorf("jitter %s not deterministic per uid or out of bounds", j)
	}
	started := func(ago time.Duration) *unstructured.Unstructured {
		return running(func(o map[string]any) {
			o["status"].(map[string]any)["startTime"] = t0.Add(-ago).Format(time.RFC3339)
		})
	}
	idle := func() *fakeFacts {
		f := renewed(time.Second)
		f.facts = nil
		return f
	}
	st = decide(m, started(30*time.Second), idle())
	if st.Transition != nil || st.RequeueAfter != j {
		t.Errorf("finish 30s after start with jitter %s: event %q, requeue %s", j, st.Event, st.RequeueAfter)
	}
	if st := decide(m, started(30*time.Second+j), idle()); st.Event != "finish" || st.To != "done" || len(st.Conditions) != 1 || st.Conditions[0].Reason != "Done" {
		t.Errorf("finish due: event %q to %s conditions %v", st.Event, st.To, st.Conditions)
	}
}

func TestErrorStepPolicy(t *testing.T) {
	m := loadJob(t)
	base := Step{From: "pending", To: "running", Event: "start"}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "jobs"}, "j", errors.New("x"))
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "j")
	for _, tc := range []struct {
		name    string
		err     error
		retries int
		want    Outcome
		to      string
		requeue time.Duration
	}{
		{"pending uses its requeue time", Pending("NoFit", "no device", 5*time.Second), 0, Wait, "pending", 5 * time.Second},
		{"pending falls back to the state's requeueAfter", Pending("NoFit", "no device", 0), 7, Wait, "pending", time.Minute},
		{"retry class", conflict, 0, Retry, "running", 0},
		{"retry list honoured (NotFound is retry here)", notFound, 1, Retry, "running", 0},
		{"maxRetries exhausted", conflict, 2, Terminal, "failed", 0},
		{"terminal list (Unknown is terminal here)", errors.New("boom"), 0, Terminal, "failed", 0},
		{"unmapped blocked waits", Blocked("Other", "x"), 0, Wait, "pending", time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ErrorStep(m, base, tc.err, tc.retries)
			if st.Outcome != tc.want || st.To != tc.to || st.RequeueAfter != tc.requeue || st.Conditions != nil {
				t.Errorf("outcome %s to %s requeue %s conditions %v; want %s to %s requeue %s", st.Outcome, st.To, st.RequeueAfter, st.Conditions, tc.want, tc.to, tc.requeue)
			}
		})
	}
}

func TestBackoffDelays(t *testing.T) {
	m := loadJob(t)
	l := newBackoffLimiter[string](m.Backoff)
	var got []string
	for range 6 {
		got = append(got, l.When("k").String())
	}
	if strings.Join(got, " ") != "1s 2s 4s 8s 8s 8s" || l.NumRequeues("k") != 6 {
		t.Errorf("delays %v (requeues %d), want base 1s doubling to cap 8s", got, l.NumRequeues("k"))
	}
	l.Forget("k")
	if l.When("k") != time.Second {
		t.Error("Forget did not reset the backoff")
	}
}

// TestStepFiresThroughFSM runs the real step: the transition fires through looplab/fsm, whose
// callback runs the actions; errors cancel it, blocked outcomes go where CUE maps them.
func TestStepFiresThroughFSM(t *testing.T) {
	lease := map[string]map[string]any{"lease": {"spec": map[string]any{"renewTime": t0.Add(-time.Minute).Format(time.RFC3339)}}}
	run := func(obj *unstructured.Unstructured, errs map[string]error, f *fakeFacts) (Step, *jobActions) {
		a := &jobActions{err: errs}
		r := testRunner(t, lifecycle, a.registry(), t0)
		in := Input{Object: obj, Facts: f, Now: t0}
		st := r.step(t.Context(), &in)
		obj.Object = in.Object.Object // what the pass made of the object (step works on a copy)
		return st, a
	}
	obj := job(nil)
	st, a := run(obj, nil, &fakeFacts{related: lease})
	if st.Outcome != Done || st.To != "running" || strings.Join(a.calls, ",") != "work" {
		t.Fatalf("start: outcome %s to %s actions %v", st.Outcome, st.To, a.calls)
	}
	if c := readyOf(obj); c["reason"] != "Running" || c["observedGeneration"] != int64(3) {
		t.Errorf("conditions not set for running: %v", c)
	}
	// A self-transition: looplab/fsm answers NoTransitionError, the action still ran.
	st, a = run(job(withReady("Running", 3)), nil, &fakeFacts{facts: map[string]Fact{"load": {Holds: true}}, related: lease})
	if st.Outcome != Done || st.Event != "heartbeat" || st.To != "running" || strings.Join(a.calls, ",") != "beat" {
		t.Errorf("heartbeat: outcome %s event %s to %s actions %v (err %v)", st.Outcome, st.Event, st.To, a.calls, st.Err)
	}
	// An action error cancels the transition and is classified.
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "jobs"}, "j", errors.New("x"))
	obj = job(nil)
	st, _ = run(obj, map[string]error{"work": conflict}, &fakeFacts{related: lease})
	if st.Outcome != Retry || st.Class != machine.Conflict || st.To != "running" || readyOf(obj) != nil {
		t.Errorf("conflict: outcome %s class %s to %s, status %v", st.Outcome, st.Class, st.To, obj.Object["status"])
	}
	// Blocked with a mapped reason: the state outcomes names, its message from .outcome.
	obj = job(func(o map[string]any) {
		o["spec"].(map[string]any)["mode"] = "claim"
		o["metadata"].(map[string]any)["labels"] = nil
	})
	st, _ = run(obj, map[string]error{"claim": Blockedf("Taken", "held by %s", "other")}, &fakeFacts{related: lease})
	if st.Outcome != Done || st.To != "taken" || readyOf(obj)["message"] != "held by other" {
		t.Errorf("blocked: outcome %s to %s ready %v", st.Outcome, st.To, readyOf(obj))
	}
	// Pending from an action: stay, nothing written.
	obj = job(nil)
	st, _ = run(obj, map[string]error{"work": Pending("Wait", "not yet", 0)}, &fakeFacts{related: lease})
	if st.Outcome != Wait || st.To != "pending" || st.RequeueAfter != time.Minute || obj.Object["status"] != nil {
		t.Errorf("pending: outcome %s to %s requeue %s status %v", st.Outcome, st.To, st.RequeueAfter, obj.Object["status"])
	}
	// Entering a terminal state shows its conditions, so the next pass derives it.
	obj = job(func(o map[string]any) {
		withReady("Running", 3)(o)
		o["status"].(map[string]any)["startTime"] = t0.Add(-time.Hour).Format(time.RFC3339)
	})
	fresh := map[string]map[string]any{"lease": {"spec": map[string]any{"renewTime": t0.Format(time.RFC3339)}}}
	st, _ = run(obj, nil, &fakeFacts{related: fresh})
	if st.To != "done" || readyOf(obj)["reason"] != "Done" || Decide(loadJob(t), Input{Object: obj, Facts: &fakeFacts{}, Now: t0}).From != "done" {
		t.Errorf("finish: to %s, ready %v", st.To, readyOf(obj))
	}
	// Terminal states fire nothing and write nothing.
	obj = job(withReady("Done", 1))
	if st, a := run(obj, nil, &fakeFacts{}); st.To != "done" || st.Transition != nil || len(a.calls) != 0 {
		t.Errorf("done: %+v %v", st, a.calls)
	}
}

func readyOf(obj *unstructured.Unstructured) map[string]any {
	for _, c := range conditionsOf(obj.Object) {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			return m
		}
	}
	return nil
}

func TestMergeStatus(t *testing.T) {
	status := map[string]any{
		"phase": "Running",
		"conditions": []any{
			map[string]any{"type": "MemoryPressure", "status": "False"},
			map[string]any{"type": "Ready", "status": "False", "reason": "Old", "message": "m"},
		},
	}
	patch := map[string]any{"phase": nil, "conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady"},
		map[string]any{"type": "Disk", "status": "False"},
	}, "addresses": []any{"a"}}
	got := fmt.Sprint(MergeStatus(status, patch))
	want := "map[addresses:[a] conditions:[map[status:False type:MemoryPressure] map[message:m reason:KubeletReady status:True type:Ready] map[status:False type:Disk]]]"
	if got != want {
		t.Errorf("merged\n %s\nwant\n %s", got, want)
	}
	if _, ok := status["addresses"]; ok {
		t.Error("MergeStatus modified its input")
	}
}

func TestTemplatesRender(t *testing.T) {
	tmpl, err := machine.CompileTemplate(map[string]any{
		"holder":  "{{.object.metadata.name}}",
		"renew":   "{{.nowMicro}}",
		"count":   "json:{{len .object.spec}}",
		"version": `{{or (annotation .related.crd "v") "0"}}`,
		"fixed":   int64(40),
		"label":   `{{label .object "example.io/go"}}`,
		"path":    `{{field .object "metadata.labels[\"example.io/go\"]"}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := loadJob(t)
	data := TemplateData(m, Input{Object: job(nil), Facts: &fakeFacts{}, Now: t0.Add(1500 * time.Microsecond)}, nil)
	data["related"] = map[string]any{"crd": nil}
	v, err := tmpl.Render(data)
	if err != nil {
		t.Fatal(err)
	}
	want := "map[count:1 fixed:40 holder:j label:yes path:yes renew:2026-07-02T12:00:00.001500Z version:0]"
	if fmt.Sprint(v) != want {
		t.Errorf("rendered %v\nwant     %s", v, want)
	}
}

// TestHandleOutcomes applies steps' outcomes to a real queue: retry backs off and counts,
// terminal marks the object for its generation and writes the terminal state's conditions,
// pending forgets the key and requeues after its time.
func TestHandleOutcomes(t *testing.T) {
	obj := job(nil)
	gvr := schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "jobs"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "JobList"}, obj.DeepCopy())
	r := testRunner(t, lifecycle, (&jobActions{}).registry(), t0)
	r.e.o.Dynamic = dyn
	r.limiter = newBackoffLimiter[string](r.m.Backoff)
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig[string](r.limiter, workqueue.TypedRateLimitingQueueConfig[string]{})
	defer r.queue.ShutDown()
	key := "ns/j"
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "jobs"}, "j", errors.New("x"))

	for i := range 2 {
		st := ErrorStep(r.m, Step{From: "pending", To: "running", Event: "start"}, conflict, r.queue.NumRequeues(key))
		if st.Outcome != Retry {
			t.Fatalf("attempt %d: %s", i, st.Outcome)
		}
		r.handle(t.Context(), key, st, obj)
	}
	if n := r.queue.NumRequeues(key); n != 2 {
		t.Fatalf("requeues %d, want 2", n)
	}
	// maxRetries (2) reached: terminal.
	st := ErrorStep(r.m, Step{From: "pending", To: "running", Event: "start"}, conflict, r.queue.NumRequeues(key))
	if st.Outcome != Terminal || st.To != "failed" {
		t.Fatalf("third conflict: %s to %s", st.Outcome, st.To)
	}
	r.handle(t.Context(), key, st, obj)
	if r.queue.NumRequeues(key) != 0 || !r.terminalMarked(obj) {
		t.Errorf("terminal: requeues %d, marked %v", r.queue.NumRequeues(key), r.terminalMarked(obj))
	}
	if got := Decide(r.m, Input{Object: obj, Facts: &fakeFacts{}, Now: t0, TerminalMarked: r.terminalMarked(obj)}); got.From != "failed" {
		t.Errorf("marked object derives %s", got.From)
	}
	written, err := dyn.Resource(gvr).Namespace("ns").Get(t.Context(), "j", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := readyOf(written); c["reason"] != "Failed" || !strings.Contains(fmt.Sprint(c["message"]), "Conflict") {
		t.Errorf("terminal conditions written: %v", written.Object["status"])
	}
	// A new generation clears the mark.
	next := obj.DeepCopy()
	next.SetGeneration(4)
	if r.terminalMarked(next) || r.terminalMarked(obj) {
		t.Error("mark survived a spec change")
	}
	if h := r.hist.get(key); len(h) != 3 || h[0].Outcome != "retry" || h[2].Outcome != "terminal" || h[2].To != "failed" || h[2].ErrorClass != "Conflict" {
		t.Errorf("history %+v", h)
	}
}

// TestDecideFactRecheck: an observation that changes by itself (RecheckAfter) requeues the key
// no later than it says, below the state's timers, whether or not a transition fires.
func TestDecideFactRecheck(t *testing.T) {
	m := loadJob(t)
	lease := map[string]map[string]any{"lease": {"spec": map[string]any{"renewTime": t0.Format(time.RFC3339)}}}
	for _, tc := range []struct {
		name    string
		recheck time.Duration
		want    time.Duration
	}{
		{"sooner than the heartbeat timer", 4 * time.Second, 4 * time.Second},
		{"later than the heartbeat timer", time.Hour, 10 * time.Second},
		{"none", 0, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFacts{facts: map[string]Fact{"load": {Holds: true, RecheckAfter: tc.recheck}}, related: lease}
			st := decide(m, job(withReady("Running", 3)), f)
			if st.Err != nil || st.Transition != nil || st.RequeueAfter != tc.want {
				t.Errorf("requeue after %v (transition %v, err %v), want %v", st.RequeueAfter, st.Transition, st.Err, tc.want)
			}
		})
	}
	// A transition fires (finish: load does not hold, started long ago): the recheck stays.
	f := &fakeFacts{facts: map[string]Fact{"load": {RecheckAfter: 7 * time.Second}}, related: lease}
	st := decide(m, job(func(o map[string]any) {
		withReady("Running", 3)(o)
		o["status"].(map[string]any)["startTime"] = t0.Add(-time.Hour).Format(time.RFC3339)
	}), f)
	if st.Event != "finish" || st.RequeueAfter != 7*time.Second {
		t.Errorf("event %q requeue after %v, want finish after 7s", st.Event, st.RequeueAfter)
	}
}
