package machine

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	things  = schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "things"}
	widgets = schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "widgets"}
)

// prunedNames prune things (own informer of a machine with a selector: spec.a and spec.list.x
// kept; shared informer: metadata.name and status.conditions[type=Ready]) and widgets (shared:
// metadata only).
var prunedNames = Names{
	Observations: []string{"ok"},
	Pruned: []Pruned{
		{Resource: things, Cache: CacheSelected, By: "thingPrune", Keep: []string{"metadata", "status", "spec.a", "spec.list.x"}},
		{Resource: things, Cache: CacheShared, By: "compactThing", Keep: []string{"metadata.name", "status.conditions[type=Ready]"}},
		{Resource: widgets, Cache: CacheShared, By: "widgetPrune", Keep: []string{"metadata"}},
	},
}

const prunedMachine = `package machines

import "github.com/draforge/draforge/schemas"

machine: [string]: schemas.#Machine
machine: sel: {
	resource: {group: "example.io", version: "v1", resource: "things"}
	namespaced: true
	selector: labels: "example.io/mine": "yes"
	triggers: [{resource: {group: "example.io", version: "v1", resource: "things"}, map: "all",
		fields: ["metadata.name", "status.conditions[type=Ready].status", "status.conditions[type=Gone]", "spec.a"]}]
	related: other: {
		resource: {group: "example.io", version: "v1", resource: "things"}
		name: "{{.object.spec.a}}-{{.object.spec.b}}"
	}
	states: {
		a: on: [{
			event: "go", to: "b"
			when: all: [{field: "spec.a"}, {field: "spec.list[x=1].x"}, {label: "l"}, {annotation: "example.io/n"},
				{field: "spec.list.y"}, {any: [{of: "other", field: "metadata.name"}, {of: "other", annotation: "n"}]}]
			after: {duration: "1s", since: "related.other.status.startTime", annotation: "example.io/d"}
			actions: [{patch: status: {
				kept: "{{range $i, $e := .object.spec.list}}{{$e.x}}{{end}}{{with .object.status}}{{.phase}}{{end}}"
				dropped: "json:[{{range .object.spec.list}}{{toJSON .z}}{{end}}]"
				fn: "{{field .object \"spec.c\"}}{{index .object.spec \"d\"}}{{(index .related.other \"spec\").e}}"
				facts: "{{$x := .facts.Message \"ok\"}}{{$x}}{{(.facts.Value \"ok\").spec}}"
			}}]
		}]
		b: {}
		failed: terminal: true
	}
	initial: "a"
	derive: [{state: "b", when: {condition: {type: "Done", status: "True"}, of: "other"}}]
	terminalState: "failed"
}
machine: nosel: {
	resource: {group: "example.io", version: "v1", resource: "things"}
	namespaced: true
	// A test on events, not a server-side selector: the shared cache still serves it.
	selector: when: any: [{field: "metadata.name"}, {field: "status.conditions[*].reason"}]
	triggers: [{resource: {group: "example.io", version: "v1", resource: "widgets"}, map: "all", fields: ["metadata.labels", "spec.size"]}]
	states: {a: {}, failed: terminal: true}
	initial: "a"
	derive: [{state: "a", when: {condition: {type: "Ready", status: "True"}}}, {state: "a", when: age: {field: "status.since", over: "1h"}}]
	terminalState: "failed"
}
`

// TestPrunedReads: every way a machine reads an object (tests, of, timers, trigger fields,
// templates through range, with, field and index) is checked against the cache it reads from:
// a selector's own informer, the shared one for related objects, triggers and machines without
// a selector. Reads of kept fields, of ancestors of kept fields and of facts pass.
func TestPrunedReads(t *testing.T) {
	_, err := Load(fstest.MapFS{"m.cue": {Data: []byte(prunedMachine)}}, prunedNames)
	var list Errors
	if !errors.As(err, &list) {
		t.Fatalf("want Errors, got %v", err)
	}
	var got []string
	for _, e := range list {
		i := strings.Index(e.Msg, ": reads ")
		j := strings.Index(e.Msg, ", which the cache of ")
		if i < 0 || j < 0 || e.File != "m.cue" || e.Line < 1 {
			t.Fatalf("unexpected error %q", e)
		}
		got = append(got, e.Msg[:i]+": "+e.Msg[i+len(": reads "):j])
	}
	want := []string{
		`machine sel: triggers[0].fields[2]: status.conditions[type=Gone] of things (trigger)`,
		`machine sel: triggers[0].fields[3]: spec.a of things (trigger)`,
		`machine sel: related.other.name: spec.b of things`,
		`machine sel: states.a.on[0].when.all[4].field: spec.list.y of things`,
		`machine sel: states.a.on[0].when.all[5].any[1].annotation: metadata.annotations.n of related other (things)`,
		`machine sel: states.a.on[0].after.since: status.startTime of related other (things)`,
		`machine sel: states.a.on[0].actions[0].patch.status.dropped: spec.list.z of things`,
		`machine sel: states.a.on[0].actions[0].patch.status.fn: spec.c of things`,
		`machine sel: states.a.on[0].actions[0].patch.status.fn: spec.d of things`,
		`machine sel: states.a.on[0].actions[0].patch.status.fn: spec.e of related other (things)`,
		`machine sel: states.a.on[0].actions[0].patch.status.fn: spec of related other (things)`,
		`machine sel: derive[0].when.condition: status.conditions[type=Done] of related other (things)`,
		`machine nosel: triggers[0].fields[1]: spec.size of widgets (trigger)`,
		`machine nosel: selector.when.any[1].field: status.conditions[*].reason of things`,
		`machine nosel: derive[1].when.age.field: status.since of things`,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("pruned reads:\n got %q\nwant %q\nall:\n%v", got, want, err)
	}
	if !strings.Contains(err.Error(), "(thingPrune keeps only metadata, status, spec.a, spec.list.x)") {
		t.Errorf("the message names the pruner and what it keeps:\n%v", err)
	}
	// Without the declarations the same machines load: the engine knows no resource.
	if _, err := Load(fstest.MapFS{"m.cue": {Data: []byte(prunedMachine)}}, Names{Observations: []string{"ok"}}); err != nil {
		t.Errorf("without Pruned: %v", err)
	}
	// A declaration the loader cannot read is the declaring code's error, not the machine's.
	bad := Names{Pruned: []Pruned{{Resource: things, By: "x", Keep: []string{"spec..a"}}}}
	if _, err := Load(fstest.MapFS{"m.cue": {Data: []byte(prunedMachine)}}, bad); err == nil || !strings.Contains(err.Error(), "pruned cache of example.io/v1, Resource=things (x)") {
		t.Errorf("bad Keep path: %v", err)
	}
}
