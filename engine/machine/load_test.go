package machine

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/looplab/fsm"

	"github.com/draforge/draforge/machines"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// knownNames are the driver names the built-in machines use.
var knownNames = Names{
	Actions: []string{"deletePoolSlices", "removeFinalizer", "publishPoolSlices",
		"recordPoolStatus", "allocateClaim", "setBindingConditions", "deallocateClaim", "prepareClaims", "unprepareClaims",
		"createAllocationPod", "awaitAllocationPod", "completeAllocation", "deleteAllocationPod"},
	Observations: []string{"poolSpecInvalid", "poolSlicesOutOfDate", "claimNeedsSimulatedAllocation",
		"claimAwaitsBindingConditions", "claimBindingFailed", "claimNeedsAllocationPod", "claimReservedForAllocationPod",
		"podOnSimulatedNode", "podClaimsReserved", "podDeviceHealth", "podDeviceHealthChanged", "podNetwork"},
	Mappers: []string{"podClaims", "pendingClaims", "claimPods", "slicePods"},
}

// Every message must start with file:line:col of a line in the file at fault.
var posRE = regexp.MustCompile(`^([^:]+):(\d+):(\d+): `)

func TestBadMachines(t *testing.T) {
	cases, _ := filepath.Glob("testdata/*.cue")
	dirs, _ := filepath.Glob("testdata/*/*.cue") // multi-file cases, one directory each
	for _, d := range dirs {
		if !strings.Contains(d, "fuzz") {
			cases = append(cases, filepath.Dir(d))
		}
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c] {
			continue
		}
		seen[c] = true
		name := strings.TrimSuffix(filepath.Base(c), ".cue")
		t.Run(name, func(t *testing.T) {
			var err error
			if strings.HasSuffix(c, ".cue") {
				src, rerr := os.ReadFile(c)
				if rerr != nil {
					t.Fatal(rerr)
				}
				_, err = Load(fstest.MapFS{filepath.Base(c): {Data: src}}, knownNames)
			} else {
				_, err = LoadDir(c, knownNames)
			}
			var list Errors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("want Errors, got %v", err)
			}
			for _, e := range list {
				if !posRE.MatchString(e.Error()) || !inFile(e) {
					t.Errorf("position not in the file: %q", e)
				}
			}
			golden := filepath.Join("testdata", name+".golden")
			got := err.Error() + "\n"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, _ := os.ReadFile(golden)
			if got != string(want) {
				t.Errorf("errors differ from %s (run with -update):\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// inFile reports whether e's line exists in its file (relative to testdata for single-file
// cases). Columns are not checked: a syntax error may sit just past the end of a line.
func inFile(e *Error) bool {
	src, err := os.ReadFile(e.File)
	if err != nil {
		src, err = os.ReadFile(filepath.Join("testdata", e.File))
	}
	lines := strings.Split(string(src), "\n")
	return err == nil && e.Line >= 1 && e.Line <= len(lines) && e.Column >= 1
}

func TestDefault(t *testing.T) {
	ms, err := Default(knownNames)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Machine{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	pool, claim := byName["pool"], byName["claim"]
	if len(ms) != 4 || pool == nil || claim == nil || byName["node"] == nil || byName["pod"] == nil {
		t.Fatalf("want machines claim, node, pod and pool, got %d", len(ms))
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
	if deg.Type != "Degraded" || deg.When == nil || deg.When.Of != "crd" || deg.When.AtLeast == nil || *deg.When.AtLeast != 2 {
		t.Errorf("pool Degraded condition = %+v", deg)
	}
	b := pool.Backoff
	if b.Base.String() != "100ms" || b.Cap.String() != "30s" || b.MaxRetries != 8 || !b.IsTerminal(NotFound) || b.IsTerminal(Conflict) {
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
	// Only the pod machine, standing for a kubelet, records no Transition Events.
	for _, m := range ms {
		if m.NoTransitionEvents != (m.Name == "pod") {
			t.Errorf("machine %s: NoTransitionEvents %v", m.Name, m.NoTransitionEvents)
		}
	}
}

// TestDefaultIsEveryRequiredMachine: machines.Names, what a --machines directory must declare,
// is exactly the embedded machines.
func TestDefaultIsEveryRequiredMachine(t *testing.T) {
	ms, err := Default(knownNames)
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
	if miss := Missing(ms, machines.Names); miss != nil {
		t.Errorf("Missing(Default) = %v", miss)
	}
	if miss := Missing(ms[1:3], machines.Names); !slices.Equal(miss, []string{"claim", "pool"}) {
		t.Errorf("Missing(node, pod) = %v, want [claim pool]", miss)
	}
}

// TestLoadDirLoadsNothing: a directory that would load no machine is an error naming it,
// never an empty list.
func TestLoadDirLoadsNothing(t *testing.T) {
	empty := t.TempDir()
	onlyOther := t.TempDir()
	if err := os.WriteFile(filepath.Join(onlyOther, "README.md"), []byte("not a machine"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(onlyOther, "README.md")
	noMachine := t.TempDir()
	src := "package machines\n\nmachine: {}\n"
	if err := os.WriteFile(filepath.Join(noMachine, "x.cue"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(empty, "missing"), filepath.Join(empty, "missing") + ": no such directory"},
		{file, file + ": not a directory"},
		{empty, empty + ": no machine files (*.cue)"},
		{onlyOther, onlyOther + ": no machine files (*.cue)"},
		{noMachine, filepath.Join(noMachine, "x.cue") + ":1:1: no machine declared"},
	} {
		ms, err := LoadDir(c.dir, knownNames)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadDir(%s) = %d machines, %v; want an error containing %q", c.dir, len(ms), err, c.want)
		}
	}
	if _, err := Load(fstest.MapFS{}, knownNames); err == nil || !strings.Contains(err.Error(), "no machine files") {
		t.Errorf("Load of an empty FS: %v", err)
	}
}

func TestDefaultNeedsKnownNames(t *testing.T) {
	_, err := Default(Names{})
	if err == nil || !strings.Contains(err.Error(), `machines/pool.cue:`) || !strings.Contains(err.Error(), `unknown action "publishPoolSlices"`) {
		t.Fatalf("want unknown names in pool.cue, got %v", err)
	}
}

func TestLoadDir(t *testing.T) {
	ms, err := LoadDir("../../machines", knownNames)
	if err != nil || len(ms) != 4 || ms[0].Source != "../../machines/claim.cue" {
		t.Fatalf("LoadDir: %d machines, %v", len(ms), err)
	}
}

// TestMutations breaks the real pool machine one way at a time.
func TestMutations(t *testing.T) {
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
			_, err := Load(fstest.MapFS{"pool.cue": {Data: []byte(mutated)}}, knownNames)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got:\n%v", tc.want, err)
			}
		})
	}
}

// TestFSMEvents drives looplab/fsm with the pool machine's events: every transition is
// one event from its state, anyState events leave every non-terminal state.
func TestFSMEvents(t *testing.T) {
	ms, err := Default(knownNames)
	if err != nil {
		t.Fatal(err)
	}
	var pool *Machine
	for _, m := range ms {
		if m.Name == "pool" {
			pool = m
		}
	}
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

// TestStandardLibraryImport: machine files may use CUE's standard library beside the schemas.
func TestStandardLibraryImport(t *testing.T) {
	src := `package machines

import (
	"strings"
	"github.com/draforge/draforge/schemas"
)

machine: [string]: schemas.#Machine
machine: std: {
	resource: {group: "example.io", version: "v1", resource: "things"}
	namespaced: true
	states: {a: {}, failed: terminal: true}
	initial: "a"
	terminalState: strings.ToLower("FAILED")
}
`
	ms, err := Load(fstest.MapFS{"std.cue": {Data: []byte(src)}}, knownNames)
	if err != nil || len(ms) != 1 || ms[0].TerminalState != "failed" {
		t.Fatalf("std import: %v", err)
	}
}

// FuzzLoad feeds arbitrary bytes as a machine file (what a --machines directory or an edited
// machines ConfigMap holds). Seeds: every built-in machine and every testdata machine file
// (golden error cases), plus testdata/fuzz. Invariants: no panic; a rejection is Errors, each
// at f.cue:line:col; an accepted file loads the same machines again.
func FuzzLoad(f *testing.F) {
	builtin, _ := fs.Glob(machines.FS, "*.cue")
	for _, n := range builtin {
		src, _ := fs.ReadFile(machines.FS, n)
		f.Add(src)
	}
	golden, _ := filepath.Glob("testdata/*.cue")
	for _, p := range golden {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	if len(builtin) < 4 || len(golden) < 10 {
		f.Fatalf("seeds: %d built-in machines, %d testdata files", len(builtin), len(golden))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		ms, err := Load(fstest.MapFS{"f.cue": {Data: src}}, knownNames)
		if err == nil {
			again, err := Load(fstest.MapFS{"f.cue": {Data: src}}, knownNames)
			if err != nil || len(again) != len(ms) {
				t.Fatalf("loaded %d machines, then %d: %v", len(ms), len(again), err)
			}
			return
		}
		var list Errors
		if !errors.As(err, &list) {
			t.Fatalf("not Errors: %v", err)
		}
		for _, e := range list {
			if e.File != "f.cue" || e.Line < 1 || e.Column < 1 {
				t.Fatalf("bad position: %q", e)
			}
		}
	})
}

// TestPodMachineDecodes: the pod machine's field selector, its grace-0 delete and its
// templates (toJSON/fromJSON over a driver observation's message) come through the loader.
func TestPodMachineDecodes(t *testing.T) {
	ms, err := Default(knownNames)
	if err != nil {
		t.Fatal(err)
	}
	var pod *Machine
	for _, m := range ms {
		if m.Name == "pod" {
			pod = m
		}
	}
	if pod == nil || pod.FieldSelector != "spec.nodeName!=" || len(pod.Selector) != 0 {
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
	tpl, err := CompileString(`json:[{{range $i, $c := .containers}}{{if $i}},{{end}}{{toJSON (index (fromJSON $.health) $c)}}{{end}}]`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(map[string]any{"containers": []any{"a", "b"}, "health": `{"a":[1],"b":{"x":"y"}}`})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(got); string(b) != `[[1],{"x":"y"}]` {
		t.Errorf("rendered %s", b)
	}
	if _, err := tpl.Render(map[string]any{"containers": []any{"a"}, "health": `{not json`}); err == nil {
		t.Error("fromJSON of bad JSON must fail the render")
	}
}
