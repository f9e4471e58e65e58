package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/metrics"
)

const (
	widgetMachine = "widget"
	maxRetries    = 3 // testdata/machines/widget.cue backoff.maxRetries
)

// TestWidgetMachine runs the engine in-process over the widget machine against the real API
// server: event-driven reconciliation, retries with backoff, terminal errors, and idempotence
// across an engine restart. The steps share one namespace and run in order; no other test
// in this package reconciles widgets.
func TestWidgetMachine(t *testing.T) {
	e := newEnv(t)
	applyCRDs(t, e, []byte(widgetCRD))
	ctx := t.Context()
	widgets := e.Dynamic.Resource(widgetGVR).Namespace(e.Namespace)
	t.Cleanup(func() {
		// Without kube-controller-manager a namespace is never emptied: delete our widgets.
		_ = widgets.DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	d := &widgetDriver{kube: e.Kube, conflictsBeforeOK: 2, injected: map[types.UID]int{}}
	run := startWidgetEngine(t, e, d)
	m := run.Metrics
	labels := func(kv ...string) map[string]string {
		out := map[string]string{"pipeline": widgetMachine}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	retries := func(class string) float64 {
		return metric(t, m, "draforge_controller_reconcile_retries_total", labels("class", class))
	}
	terminals := func(class string) float64 {
		return metric(t, m, "draforge_controller_terminal_errors_total", labels("class", class))
	}
	create := func(name, mode, payload string) *unstructured.Unstructured {
		t.Helper()
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.draforge.oaslananka/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"mode": mode, "payload": payload},
		}}
		w, err := widgets.Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create widget %s: %v", name, err)
		}
		return w
	}
	// waitCondition waits until the widget's Ready condition has status/reason for generation gen.
	waitCondition := func(name, status, reason string, gen int64) *unstructured.Unstructured {
		t.Helper()
		var w *unstructured.Unstructured
		eventually(t, 15*time.Second, func() (bool, string) {
			var err error
			if w, err = widgets.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, err.Error()
			}
			c := readyCondition(w)
			og, _, _ := unstructured.NestedInt64(w.Object, "status", "observedGeneration")
			cg, _, _ := unstructured.NestedInt64(c, "observedGeneration")
			if w.GetGeneration() != gen || c["status"] != status || c["reason"] != reason || cg != gen || og != gen {
				return false, fmt.Sprintf("widget %s generation %d status.observedGeneration %d Ready=%v", name, w.GetGeneration(), og, c)
			}
			return true, ""
		})
		return w
	}
	configMapPayload := func(name string) (string, bool) {
		cm, err := e.Kube.CoreV1().ConfigMaps(e.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", false
		} else if err != nil {
			t.Fatal(err)
		}
		if cm.Labels[widgetLabel] != name || cm.Labels[widgetNSLabel] != e.Namespace {
			t.Errorf("ConfigMap %s labels %v", name, cm.Labels)
		}
		return cm.Data["payload"], true
	}
	waitConfigMap := func(name, payload string) {
		t.Helper()
		eventually(t, 15*time.Second, func() (bool, string) {
			got, ok := configMapPayload(name)
			return ok && got == payload, fmt.Sprintf("ConfigMap %s exists=%v payload=%q, want %q", name, ok, got, payload)
		})
	}
	key := func(name string) string { return e.Namespace + "/" + name }

	t.Run("event-driven", func(t *testing.T) {
		start := time.Now()
		create("plain", "", "v1")
		waitConfigMap("plain", "v1")
		waitCondition("plain", "True", "ConfigMapReady", 1)
		t.Logf("create → ConfigMap + Ready=True: %s", time.Since(start).Round(time.Millisecond))

		// There is no resync (informers have period 0) and "ready" has no requeueAfter: only
		// the update event can bring the ConfigMap in line.
		start = time.Now()
		if _, err := widgets.Patch(ctx, "plain", types.MergePatchType, []byte(`{"spec":{"payload":"v2"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitConfigMap("plain", "v2")
		waitCondition("plain", "True", "ConfigMapReady", 2)
		took := time.Since(start)
		t.Logf("edit spec.payload → ConfigMap updated + observedGeneration 2: %s", took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("update took %s: not event-driven", took)
		}
		h := historyOf(run, key("plain"), 2)
		if len(h) < 2 || h[0].Outcome != "ok" || h[0].From != "pending" || h[0].To != "ready" || h[0].Event != "make" ||
			strings.Join(h[0].Actions, ",") != "injectFault,makeConfigMap" {
			t.Errorf("history of plain starts %+v, want ok pending→ready on make", h)
		}
		if retries("Conflict") != 0 || terminals("") != 0 {
			t.Errorf("retries %v terminals %v on a clean widget", retries("Conflict"), terminals(""))
		}
	})

	t.Run("retry-with-backoff", func(t *testing.T) {
		before := retries("Conflict")
		w := create("flaky", "conflict-then-ok", "p")
		waitConfigMap("flaky", "p")
		waitCondition("flaky", "True", "ConfigMapReady", 1)
		if got := d.faults(w.GetUID()); got != d.conflictsBeforeOK {
			t.Errorf("injected conflicts = %d, want %d", got, d.conflictsBeforeOK)
		}
		if got := retries("Conflict") - before; got != float64(d.conflictsBeforeOK) {
			t.Errorf("reconcile_retries_total{class=Conflict} rose by %v, want %d", got, d.conflictsBeforeOK)
		}
		if got := terminals("Conflict"); got != 0 {
			t.Errorf("terminal_errors_total{class=Conflict} = %v, want 0", got)
		}
		h := historyOf(run, key("flaky"), 3)
		if len(h) < 3 {
			t.Fatalf("history %+v, want 2 retries then ok", h)
		}
		for i := range 2 {
			if h[i].Outcome != "retry" || h[i].ErrorClass != "Conflict" || h[i].From != "pending" || h[i].Event != "make" ||
				!strings.Contains(h[i].Error, fmt.Sprintf("injected conflict %d", i+1)) {
				t.Errorf("history[%d] = %+v, want retry Conflict", i, h[i])
			}
		}
		if h[2].Outcome != "ok" || h[2].From != "pending" || h[2].To != "ready" {
			t.Errorf("history[2] = %+v, want ok pending→ready", h[2])
		}
		// Backoff: 10ms then 20ms between the attempts.
		if gap := h[2].Time.Sub(h[0].Time); gap < 30*time.Millisecond {
			t.Errorf("3 attempts within %s: no backoff (want ≥ 10ms+20ms)", gap)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		forbiddenBefore := terminals("Forbidden")
		w := create("denied", "forbidden", "p")
		got := waitCondition("denied", "False", "TerminalError", 1)
		if msg, _ := readyCondition(got)["message"].(string); !strings.HasPrefix(msg, "Forbidden: ") || !strings.Contains(msg, "injected forbidden") {
			t.Errorf("terminal message %q", msg)
		}
		if n := terminals("Forbidden") - forbiddenBefore; n != 1 {
			t.Errorf("terminal_errors_total{class=Forbidden} rose by %v, want 1", n)
		}
		waitWarning(t, e, "denied", "Forbidden")
		if _, ok := configMapPayload("denied"); ok {
			t.Error("a ConfigMap was made for a forbidden widget")
		}
		// 10× the backoff cap: nothing may run again.
		time.Sleep(time.Second)
		if n := d.faults(w.GetUID()); n != 1 {
			t.Errorf("forbidden action ran %d times, want 1 (terminal at once)", n)
		}
		h := run.Engine.History(widgetMachine, key("denied"))
		if len(h) != 1 || h[0].Outcome != "terminal" || h[0].ErrorClass != "Forbidden" || h[0].From != "pending" {
			t.Errorf("history of denied = %+v, want exactly one terminal Forbidden", h)
		}

		retriesBefore, conflictBefore := retries("Conflict"), terminals("Conflict")
		w = create("stubborn", "always-conflict", "p")
		waitCondition("stubborn", "False", "TerminalError", 1)
		if n := retries("Conflict") - retriesBefore; n != maxRetries {
			t.Errorf("retries rose by %v, want maxRetries=%d", n, maxRetries)
		}
		if n := terminals("Conflict") - conflictBefore; n != 1 {
			t.Errorf("terminal_errors_total{class=Conflict} rose by %v, want 1", n)
		}
		waitWarning(t, e, "stubborn", "Conflict")
		time.Sleep(time.Second)
		if n := d.faults(w.GetUID()); n != maxRetries+1 {
			t.Errorf("always-conflict action ran %d times, want %d", n, maxRetries+1)
		}
		h = run.Engine.History(widgetMachine, key("stubborn"))
		var outcomes []string
		for _, r := range h {
			outcomes = append(outcomes, r.Outcome+"/"+r.ErrorClass)
		}
		if got, want := strings.Join(outcomes, " "), "retry/Conflict retry/Conflict retry/Conflict terminal/Conflict"; got != want {
			t.Errorf("history of stubborn = %s, want %s", got, want)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("idempotent-restart", func(t *testing.T) {
		faultsBefore := map[string]int{}
		uids := map[string]types.UID{}
		for _, n := range []string{"plain", "flaky", "denied", "stubborn"} {
			w, err := widgets.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			uids[n] = w.GetUID()
			faultsBefore[n] = d.faults(w.GetUID())
		}
		run.stop()
		// Let the first engine's event sink finish: the write count must be still.
		w0 := stableWrites(t, m)
		start := time.Now()
		run2 := startWidgetEngine(t, e, d)
		m2 := run2.Metrics
		eventually(t, 15*time.Second, func() (bool, string) {
			attempts := metric(t, m2, "draforge_controller_sync_attempts_total", labels())
			busy := metric(t, m2, "draforge_controller_sync_in_flight", labels()) + metric(t, m2, "draforge_controller_queue_depth", labels())
			return attempts >= 4 && busy == 0, fmt.Sprintf("sync attempts %v, in flight + queued %v", attempts, busy)
		})
		// Long enough for any retry (cap 100ms) or follow-up event to show.
		time.Sleep(time.Second)
		t.Logf("restart re-synced %v times in %s", metric(t, m2, "draforge_controller_sync_attempts_total", labels()), time.Since(start).Round(time.Millisecond))
		if n := writes(t, m) - w0; n != 0 { // m keeps counting: client-go metrics are per process
			t.Errorf("restart over converged objects made %v write requests, want 0", n)
		}
		for _, name := range []string{"draforge_controller_reconcile_retries_total", "draforge_controller_terminal_errors_total",
			"draforge_controller_reconcile_errors_total", "draforge_controller_transitions_total"} {
			if v := metric(t, m2, name, nil); v != 0 {
				t.Errorf("%s after restart = %v, want 0", name, v)
			}
		}
		for n, uid := range uids {
			if got := d.faults(uid); got != faultsBefore[n] {
				t.Errorf("%s: actions ran again after restart (%d → %d faults)", n, faultsBefore[n], got)
			}
			if h := run2.Engine.History(widgetMachine, key(n)); len(h) != 0 {
				t.Errorf("%s: history after restart %+v, want none", n, h)
			}
		}
		state := func(n, want string) {
			if s, err := run2.Engine.State(ctx, widgetMachine, key(n)); err != nil || s != want {
				t.Errorf("State(%s) = %q, %v; want %q", n, s, err, want)
			}
		}
		state("plain", "ready")
		state("flaky", "ready")
		state("denied", "terminal-error")
		state("stubborn", "terminal-error")
	})
}

func readyCondition(w *unstructured.Unstructured) map[string]any {
	conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m
		}
	}
	return nil
}

// waitWarning waits for the engine's Warning TerminalError Event on the widget.
func waitWarning(t *testing.T, e *env, name, class string) {
	t.Helper()
	eventually(t, 15*time.Second, func() (bool, string) {
		evs, err := e.Kube.CoreV1().Events(e.Namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.Type == "Warning" && ev.Reason == "TerminalError" && ev.InvolvedObject.Kind == "Widget" &&
				strings.HasPrefix(ev.Message, class+": ") && ev.Source.Component == "draforge-e2e" {
				return true, ""
			}
			seen = append(seen, ev.Type+"/"+ev.Reason+": "+ev.Message)
		}
		return false, fmt.Sprintf("no Warning TerminalError event for %s; events: %v", name, seen)
	})
}

// stableWrites waits until no write request was made for half a second and returns the count.
func stableWrites(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	last := writes(t, m)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		cur := writes(t, m)
		if cur == last {
			return cur
		}
		last = cur
	}
	t.Fatalf("write requests did not stop: %v", last)
	return 0
}

// historyOf returns key's history once it holds at least n records (or after 2s): a pass records
// its transition after writing the status the tests wait for.
func historyOf(run *runningEngine, key string, n int) []engine.Record {
	h := run.Engine.History(widgetMachine, key)
	for deadline := time.Now().Add(2 * time.Second); len(h) < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		h = run.Engine.History(widgetMachine, key)
	}
	return h
}
