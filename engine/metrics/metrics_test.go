package metrics

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/draforge/draforge/engine/machine"
)

func series(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			out[strings.Join(labels, ",")] = value(s)
		}
	}
	return out
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.GetCounter().GetValue()
	case s.Gauge != nil:
		return s.GetGauge().GetValue()
	}
	return -1
}

func TestInitMachinesExposesZeroSeries(t *testing.T) {
	m := New()
	if got := series(t, m, "draforge_controller_terminal_errors_total"); len(got) != 0 {
		t.Fatalf("series before InitMachines: %v", got)
	}
	mcs := []*machine.Machine{
		{Name: "pool", Backoff: machine.Backoff{Retry: []machine.ErrorClass{machine.Conflict, machine.Timeout}}},
		{Name: "claim", Backoff: machine.Backoff{Retry: []machine.ErrorClass{machine.Unknown}}},
	}
	m.InitMachines(mcs)
	for _, name := range []string{"draforge_controller_reconcile_errors_total", "draforge_controller_sync_attempts_total",
		"draforge_controller_sync_duration_seconds_total", "draforge_controller_sync_in_flight", "draforge_controller_queue_depth"} {
		got := series(t, m, name)
		if len(got) != 2 || got["pipeline=pool"] != 0 || got["pipeline=claim"] != 0 {
			t.Errorf("%s = %v, want pipeline=pool and pipeline=claim at 0", name, got)
		}
		if _, ok := got["pipeline=pool"]; !ok {
			t.Errorf("%s has no pool series", name)
		}
	}
	retries := series(t, m, "draforge_controller_reconcile_retries_total")
	want := []string{"class=Conflict,pipeline=pool", "class=Timeout,pipeline=pool", "class=Unknown,pipeline=claim"}
	if len(retries) != len(want) {
		t.Errorf("retries series = %v, want %v", retries, want)
	}
	for _, k := range want {
		if v, ok := retries[k]; !ok || v != 0 {
			t.Errorf("retries[%s] = %v (present %v), want 0", k, v, ok)
		}
	}
	terminal := series(t, m, "draforge_controller_terminal_errors_total")
	if len(terminal) != 2*len(machine.AllErrorClasses) {
		t.Errorf("terminal series = %d, want %d", len(terminal), 2*len(machine.AllErrorClasses))
	}
	for _, c := range machine.AllErrorClasses {
		for _, p := range []string{"pool", "claim"} {
			if v, ok := terminal["class="+string(c)+",pipeline="+p]; !ok || v != 0 {
				t.Errorf("terminal %s/%s = %v (present %v)", p, c, v, ok)
			}
		}
	}
	if got := series(t, m, "draforge_controller_leader"); got[""] != 0 || len(got) != 1 {
		t.Errorf("leader = %v, want one series at 0", got)
	}

	m.Retry("pool", machine.Conflict)
	m.Terminal("claim", machine.Forbidden)
	m.SyncStarted("pool")
	if got := series(t, m, "draforge_controller_reconcile_retries_total")["class=Conflict,pipeline=pool"]; got != 1 {
		t.Errorf("retry counter = %v", got)
	}
	if got := series(t, m, "draforge_controller_terminal_errors_total")["class=Forbidden,pipeline=claim"]; got != 1 {
		t.Errorf("terminal counter = %v", got)
	}
	if got := series(t, m, "draforge_controller_sync_in_flight")["pipeline=pool"]; got != 1 {
		t.Errorf("in flight = %v", got)
	}
}

// TestEverySeriesNamesTheMachineOneWay drives every Observer method for one machine and checks
// that each draforge_controller_* series naming it does so with the same label, "pipeline"
// (the operations guide's name), and that no series names it under another label.
func TestEverySeriesNamesTheMachineOneWay(t *testing.T) {
	const mc = "widget-machine"
	m := New()
	m.InitMachines([]*machine.Machine{{Name: mc, Backoff: machine.Backoff{Retry: []machine.ErrorClass{machine.Conflict}}}})
	m.SyncStarted(mc)
	m.SyncFinished(mc, time.Millisecond, errors.New("boom"))
	m.Retry(mc, machine.Conflict)
	m.Terminal(mc, machine.Forbidden)
	m.Transition(mc, "pending", "ready", "published")
	m.QueueDepth(mc, 3)

	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "draforge_controller_") {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				switch {
				case l.GetValue() == mc && l.GetName() != MachineLabel:
					t.Errorf("%s names the machine with label %q, want %q", mf.GetName(), l.GetName(), MachineLabel)
				case l.GetName() == "machine":
					t.Errorf("%s has a %q label", mf.GetName(), "machine")
				case l.GetName() == MachineLabel && l.GetValue() == mc:
					named[mf.GetName()] = true
				}
			}
		}
	}
	for _, name := range []string{"draforge_controller_reconcile_errors_total", "draforge_controller_reconcile_retries_total",
		"draforge_controller_terminal_errors_total", "draforge_controller_sync_attempts_total",
		"draforge_controller_sync_duration_seconds_total", "draforge_controller_sync_duration_seconds",
		"draforge_controller_sync_in_flight", "draforge_controller_queue_depth", "draforge_controller_transitions_total"} {
		if !named[name] {
			t.Errorf("%s has no series with %s=%q", name, MachineLabel, mc)
		}
	}
}
