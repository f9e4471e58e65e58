package machine

import (
	"testing"
	"testing/fstest"
	"time"
)

// TestAnnotationOnlyTimer: a timer with an annotation and no duration loads with Duration 0
// and has a length only on objects whose annotation is a positive Go duration (the pod
// machine's run-for: machines/testdata/pod shows the decisions).
func TestAnnotationOnlyTimer(t *testing.T) {
	ms, err := Load(fstest.MapFS{"m.cue": {Data: []byte(`package machines

import "github.com/draforge/draforge/schemas"

machine: [string]: schemas.#Machine

machine: job: {
	resource: {group: "example.io", version: "v1", resource: "jobs"}
	namespaced: true
	states: {
		running: on: [
			{event: "finish", after: {since: "status.startTime", annotation: "example.io/run-for"}, to: "done"},
			{event: "beat", after: {duration: "10s", since: "status.lastBeat", annotation: "example.io/every"}, to: "running"},
		]
		done: {}
		failed: terminal: true
	}
	initial:       "running"
	derive: [{state: "done", when: {field: "status.phase", equals: "Done"}}]
	terminalState: "failed"
}
`)}}, Names{})
	if err != nil {
		t.Fatal(err)
	}
	on := ms[0].States["running"].On
	only, both := *on[0].After, *on[1].After
	if only.Duration != 0 || only.Annotation != "example.io/run-for" || only.String() != "example.io/run-for" {
		t.Errorf("annotation-only timer %+v (%s)", only, only)
	}
	if both.String() != "10s" {
		t.Errorf("timer with a duration reads %q", both)
	}
	for _, tc := range []struct {
		timer Timer
		ann   map[string]string
		want  time.Duration
		ok    bool
	}{
		{only, nil, 0, false},
		{only, map[string]string{"example.io/run-for": "90s"}, 90 * time.Second, true},
		{only, map[string]string{"example.io/run-for": "soon"}, 0, false},
		{only, map[string]string{"example.io/run-for": "0s"}, 0, false},
		{only, map[string]string{"example.io/run-for": "-5s"}, 0, false},
		{both, nil, 10 * time.Second, true},
		{both, map[string]string{"example.io/every": "3s"}, 3 * time.Second, true},
		{both, map[string]string{"example.io/every": "soon"}, 10 * time.Second, true},
	} {
		if d, ok := tc.timer.Length(tc.ann); d != tc.want || ok != tc.ok {
			t.Errorf("%s.Length(%v) = %s, %v; want %s, %v", tc.timer, tc.ann, d, ok, tc.want, tc.ok)
		}
	}
}
