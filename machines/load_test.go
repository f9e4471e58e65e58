package machines_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/looplab/fsm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/drivers/pods"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/machines"
	"github.com/draforge/draforge/machines/machinestest"
)

// known are the names the real drivers register, as the controller and machines vet load with.
func known(t *testing.T) machine.Names {
	t.Helper()
	n, err := drivers.Names()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDefault(t *testing.T) {
	ms, err := machines.Load(known(t))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*machine.Machine{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	pool, claim := byName["pool"], byName["claim"]
	if len(ms) != 6 || pool == nil || claim == nil || byName["node"] == nil || byName["pod"] == nil || byName["computedomain"] == nil || byName["gpuclique"] == nil {
		t.Fatalf("want machines claim, computedomain, gpuclique, node, pod and pool, got %d", len(ms))
	}
	if got := strings.Join(pool.StateOrder, ","); got != "pending,synced,blocked,invalid,finalizing,terminal-error" {
		t.Errorf("pool state order %s", got)
	}
	// anyState comes first in every non-terminal state; terminal states have no transitions.
	if ts := pool.TransitionsOf("synced"); len(ts) != 3 || ts[0].Event != "delete" || ts[1].Event != "invalid" || ts[2].Event != "drift" {
		t.Errorf("synced transitions = %+v", ts)
	}
	if len(pool.TransitionsOf("terminal-error")) != 0 {
		t.Errorf("terminal state has transitions")
	}
	if pool.Source != "machines/pool.cue" || !pool.Status.Conditions || pool.Triggers[0].NamespaceLabel != "draforge.oaslananka/sdp-namespace" {
		t.Errorf("pool decoded wrong: %+v", pool)
	}
	if c := pool.Derive[1].When.Condition; c == nil || c.Reason != "TerminalError" || !c.Current {
		t.Errorf("pool derive[1] = %+v", pool.Derive[1])
	}
	fixed := pool.States["invalid"].On[0]
	if fixed.Event != "fixed" || !fixed.When.Not || fixed.When.Observe != "poolSpecInvalid" || fixed.Actions[0].Finalizer.Add != "draforge.oaslananka/resourceslice-cleanup" || fixed.Actions[1].Driver != "publishPoolSlices" {
		t.Errorf("pool fixed transition = %+v", fixed)
	}
	if pool.Outcomes["PoolNameTaken"] != "blocked" || pool.Related["crd"].Resource.Resource != "customresourcedefinitions" {
		t.Errorf("pool outcomes %v related %v", pool.Outcomes, pool.Related)
	}
	deg := pool.States["synced"].Conditions[2]
	if deg.Type != "Degraded" || deg.When == nil || deg.When.Of != "crd" || deg.When.AtLeast == nil || *deg.When.AtLeast != 5 {
		t.Errorf("pool Degraded condition = %+v", deg)
	}
	b := pool.Backoff
	if b.Base.String() != "100ms" || b.Cap.String() != "30s" || b.MaxRetries != 8 || !b.IsTerminal(machine.NotFound) || b.IsTerminal(machine.Conflict) {
		t.Errorf("pool backoff = %+v", b)
	}
	if pool.Workers != 1 || pool.HistoryLimit != 20 {
		t.Errorf("workers %d, historyLimit %d", pool.Workers, pool.HistoryLimit)
	}
	if claim.States["pending"].RequeueAfter.String() != "30s" || claim.Derive[1].When.Field.Text != "status.allocation" || claim.Status.Conditions {
		t.Errorf("claim decoded wrong: %+v", claim)
	}
	// Nodes enqueue every pool only when they come, go or change labels.
	if nt := pool.Triggers[1]; nt.Resource.Resource != "nodes" || len(nt.Fields) != 1 || nt.Fields[0].Text != "metadata.labels" || len(nt.On) != 0 {
		t.Errorf("pool node trigger = %+v", nt)
	}
	if claim.Triggers[2].Map != "driver:podClaims" || claim.Triggers[2].Resource.Resource != "pods" {
		t.Errorf("claim pod trigger = %+v", claim.Triggers[2])
	}
	// Only the pod machine, standing for a kubelet, and gpuclique, standing for GPU Feature
	// Discovery, record no Transition Events.
	for _, m := range ms {
		if m.NoTransitionEvents != (m.Name == "pod" || m.Name == "gpuclique") {
			t.Errorf("machine %s: NoTransitionEvents %v", m.Name, m.NoTransitionEvents)
		}
	}
}

// TestDefaultIsEveryRequiredMachine: machines.Names, what a --machines directory must declare,
// is exactly the embedded machines.
func TestDefaultIsEveryRequiredMachine(t *testing.T) {
	ms, err := machines.Load(known(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name)
	}
	if !slices.Equal(got, machines.Names) {
		t.Errorf("embedded machines %v, machines.Names %v", got, machines.Names)
	}
	if miss := machine.Missing(ms, machines.Names); miss != nil {
		t.Errorf("machine.Missing(Default) = %v", miss)
	}
	if miss := machine.Missing(ms[3:5], machines.Names); !slices.Equal(miss, []string{"claim", "computedomain", "gpuclique", "pool"}) {
		t.Errorf("machine.Missing(node, pod) = %v, want [claim computedomain gpuclique pool]", miss)
	}
}

func TestDefaultNeedsKnownNames(t *testing.T) {
	_, err := machines.Load(machine.Names{})
	if err == nil || !strings.Contains(err.Error(), `machines/pool.cue:`) || !strings.Contains(err.Error(), `unknown action "publishPoolSlices"`) {
		t.Fatalf("want unknown names in pool.cue, got %v", err)
	}
}

// builtin is the built-in machine of that name, loaded with the real drivers' names.
func builtin(t *testing.T, name string) *machine.Machine {
	t.Helper()
	return machinestest.Machine(t, known(t), name)
}

// TestMutations breaks the real pool machine one way at a time.
func TestMutations(t *testing.T) {
	names := known(t)
	src, err := fs.ReadFile(machines.FS, "pool.cue")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"remove state", "\t\tinvalid: {", "\t\tgone: {",
			`machine pool: states.pending.on[0].to: undeclared state "invalid"`},
		{"exit from terminal state", "\t\t\tterminal: true\n", "\t\t\tterminal: true\n\t\t\ton: [{event: \"retry\", to: \"pending\"}]\n",
			`terminal state "terminal-error" cannot have outgoing transitions`},
		{"terminal state not terminal", "\t\t\tterminal: true\n", "",
			`terminalState: state "terminal-error" must be marked terminal: true`},
		{"unknown action", `"recordPoolStatus"`, `"recordPoolStats"`, `unknown action "recordPoolStats"`},
		{"overlapping classes", "\tterminalState:", "\tbackoff: retry: [\"Conflict\", \"AlreadyExists\", \"Timeout\", \"TooManyRequests\", \"ServiceUnavailable\", \"InternalError\", \"Unknown\", \"NotFound\"]\n\tterminalState:",
			`machine pool: backoff.retry[7]: error class NotFound is in both retry and terminal`},
		{"typo", "namespaced: true", "namespaced: true\n\tworkres: 2", `workres: field not allowed`},
		{"underivable target", `{state: "blocked", when:`, `{state: "blockedx", when:`,
			`state "blocked" is not recognised by any derive rule (nor initial)`},
		{"unknown related", `of: "crd"`, `of: "crds"`, `unknown related object "crds"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mutated := strings.Replace(string(src), tc.old, tc.new, 1)
			if mutated == string(src) {
				t.Fatalf("mutation %q did not apply", tc.old)
			}
			_, err := machine.Load(fstest.MapFS{"pool.cue": {Data: []byte(mutated)}}, names)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got:\n%v", tc.want, err)
			}
		})
	}
}

// TestFSMEvents drives looplab/fsm with the pool machine's events: every transition is
// one event from its state, anyState events leave every non-terminal state.
func TestFSMEvents(t *testing.T) {
	pool := builtin(t, "pool")
	f := fsm.NewFSM("pending", pool.FSMEvents(), nil)
	ctx := context.Background()
	if err := f.Event(ctx, "invalid"); err != nil || f.Current() != "invalid" {
		t.Fatalf("invalid: %v, now %s", err, f.Current())
	}
	if err := f.Event(ctx, "fixed"); err != nil || f.Current() != "synced" {
		t.Fatalf("fixed: %v, now %s", err, f.Current())
	}
	// drift from synced to synced: looplab reports a self-transition as NoTransitionError{nil}.
	var nt fsm.NoTransitionError
	if err := f.Event(ctx, "drift"); !errors.As(err, &nt) || nt.Err != nil {
		t.Fatalf("drift from synced: %v", err)
	}
	if err := f.Event(ctx, "delete"); err != nil || f.Current() != "finalizing" {
		t.Fatalf("delete: %v, now %s", err, f.Current())
	}
	var inv fsm.InvalidEventError
	if err := fsm.NewFSM("terminal-error", pool.FSMEvents(), nil).Event(ctx, "delete"); !errors.As(err, &inv) {
		t.Fatalf("delete from terminal-error: want InvalidEventError, got %v", err)
	}
}

// TestPodMachineDecodes: the pod machine's field selector, its grace-0 delete and its
// templates over the pod driver's typed facts come through the loader.
func TestPodMachineDecodes(t *testing.T) {
	pod := builtin(t, "pod")
	if pod.FieldSelector != "spec.nodeName!=" || len(pod.Selector) != 0 {
		t.Fatalf("pod machine selector: %+v", pod)
	}
	// Allocation pods never run: the pod machine lists and watches without them.
	if got := pod.LabelSelector().String(); got != "!draforge.oaslananka/allocation-pod" {
		t.Errorf("pod machine label selector %q", got)
	}
	release := pod.AnyState[0]
	del := release.Actions[len(release.Actions)-1]
	if !del.Delete || del.GracePeriodSeconds == nil || *del.GracePeriodSeconds != 0 {
		t.Errorf("release ends with %+v, want delete with grace period 0", del)
	}
	// The running patch reads the drivers' typed facts as values: the addresses, and each
	// container's device health.
	start := pod.States["pending"].On[0]
	patch := start.Actions[len(start.Actions)-1].Patch
	if start.Event != "start" || patch == nil || patch.Status == nil {
		t.Fatalf("pending's start transition = %+v", start)
	}
	health := pods.Health{"main": {{Name: "claim:gpu", Resources: []corev1.ResourceHealth{
		{ResourceID: "sim/p/gpu-0", Health: corev1.ResourceHealthStatusUnhealthy}}}}}
	facts := podFacts{"podNetwork": {Holds: true, Value: pods.Network{HostIP: "172.16.0.9", PodIP: "10.244.0.7"}},
		"podDeviceHealth": {Holds: true, Value: health}}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "w", "namespace": "ns", "uid": "u1"},
		"spec":     map[string]any{"nodeName": "n", "containers": []any{map[string]any{"name": "main", "image": "i"}, map[string]any{"name": "side", "image": "j"}}},
	}}
	now := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	got, err := patch.Status.Render(engine.TemplateData(pod, engine.Input{Object: obj, Facts: facts, Now: now}, nil))
	if err != nil {
		t.Fatal(err)
	}
	st := got.(map[string]any)
	b, _ := json.Marshal([]any{st["hostIP"], st["hostIPs"], st["podIP"], st["podIPs"]})
	if string(b) != `["172.16.0.9",[{"ip":"172.16.0.9"}],"10.244.0.7",[{"ip":"10.244.0.7"}]]` {
		t.Errorf("addresses %s", b)
	}
	cs, _ := st["containerStatuses"].([]any)
	if len(cs) != 2 {
		t.Fatalf("containerStatuses %v", st["containerStatuses"])
	}
	b, _ = json.Marshal(cs[0].(map[string]any)["allocatedResourcesStatus"])
	if string(b) != `[{"name":"claim:gpu","resources":[{"health":"Unhealthy","resourceID":"sim/p/gpu-0"}]}]` {
		t.Errorf("main's allocatedResourcesStatus %s", b)
	}
	if _, ok := cs[1].(map[string]any)["allocatedResourcesStatus"]; ok {
		t.Errorf("side has no devices, got %v", cs[1])
	}
}

// podFacts are the pod driver's observations as a pass would answer them.
type podFacts map[string]engine.Fact

func (f podFacts) Observe(name string) (engine.Fact, error) { return f[name], nil }
func (f podFacts) Related(string) map[string]any            { return nil }

// TestPodMachineReadsOnlyWhatTheCacheKeeps: the pod machine's pods are cached pruned
// (drivers/clusterview.MachinePod): an edited pod.cue that reads a field the cache drops fails to load,
// naming the field and where it is read, instead of silently seeing it missing.
func TestPodMachineReadsOnlyWhatTheCacheKeeps(t *testing.T) {
	src, err := fs.ReadFile(machines.FS, "pod.cue")
	if err != nil {
		t.Fatal(err)
	}
	names := known(t)
	for _, tc := range []struct{ name, old, new, want string }{
		{"derive on initContainers", `		{state: "terminating", when: deleting: true},`,
			`		{state: "terminating", when: deleting: true},
		{state: "failed", when: field: "spec.initContainers"},`,
			`machine pod: derive[1].when.field: reads spec.initContainers of pods, which the cache of pods prunes ` +
				`(drivers/clusterview.MachinePod keeps only apiVersion, kind, metadata, status, spec.nodeName, spec.resourceClaims, spec.schedulingGroup, spec.containers.name, spec.containers.image, spec.containers.resources)`},
		{"container env in a template", `{{toJSON $c.image}},`, `{{toJSON $c.image}},\"env\":{{toJSON $c.env}},`,
			`patch.status.containerStatuses: reads spec.containers.env of pods`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mutated := strings.Replace(string(src), tc.old, tc.new, 1)
			if mutated == string(src) {
				t.Fatalf("mutation %q did not apply", tc.old)
			}
			_, err := machine.LoadFS(fstest.MapFS{"pod.cue": {Data: []byte(mutated)}}, "machines", names)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got:\n%v", tc.want, err)
			}
			// At the line of the mutation. (A template in a hidden field is reported where the
			// machine uses it.)
			line := strings.Count(mutated[:strings.Index(mutated, tc.new)+len(tc.new)], "\n") + 1
			if tc.name == "derive on initContainers" && !strings.HasPrefix(err.Error(), fmt.Sprintf("machines/pod.cue:%d:", line)) {
				t.Errorf("want the error at machines/pod.cue:%d, got %v", line, err)
			}
		})
	}
}
