package bench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// scaleSides are a DRAForge and a KWOK side of 10,000 nodes: DRAForge creates them in 100 s
// against KWOK's 80 s (0.80×), renews its Leases at the same cadence and takes its pods to
// Running at 200 against 160 pods/s.
func scaleSides() (*ScaleSide, *ScaleSide) {
	side := func(agent string, held time.Duration, renewals int, pods time.Duration) *ScaleSide {
		return &ScaleSide{Agent: agent, Ready: held / 2, Held: held, CreateWrites: 10000,
			Steady:   NodeWindow{Nodes: 10000, Window: time.Minute, CPU: 30 * time.Second, OldestLease: 12 * time.Second},
			Requests: Counts{"patch leases": renewals, "watch pods": 2},
			Memory:   ProcMemory{RSS: 100 << 20, Heap: 60 << 20},
			Pods:     PreboundPods{Pods: 10000, Running: pods, Deleted: 30 * time.Second, Requests: Counts{"patch pods/status": 10000}, CPU: 10 * time.Second},
		}
	}
	return side(agentDRAForge, 100*time.Second, 50000, 50*time.Second), side(agentKwok, 80*time.Second, 50000, 62500*time.Millisecond)
}

func TestScaleNodeRows(t *testing.T) {
	r, k := scaleSides()
	rows := scaleNodeRows(DefaultScaleConfig(), r, k)
	byMetric := func(prefix string) Row {
		for _, row := range rows {
			if strings.HasPrefix(row.Metric, prefix) {
				return row
			}
		}
		t.Fatalf("no row %q in %+v", prefix, rows)
		return Row{}
	}
	create := byMetric("creation:")
	if create.OK || create.Ratio != "0.80" || !strings.HasPrefix(create.Value, "100 nodes/s") || !strings.Contains(create.Baseline, "KWOK's CI: 5,000 nodes within 1m0s (83/s)") {
		t.Errorf("creation at 0.80× KWOK met its 0.9× target: %+v", create)
	}
	if w := byMetric("steady state: writes"); !w.OK || w.Value != "5.00 (patch leases 50000)" {
		t.Errorf("writes row %+v", w)
	}
	if p := byMetric("pre-bound pods: pods/s"); !p.OK || p.Value != "200 pods/s (50.00 s)" || p.Ratio != "1.25" {
		t.Errorf("pods row %+v", p)
	}
	if m := byMetric("process memory"); !strings.Contains(m.Value, "100.0 MiB (10.2 KiB per node; heap in use 60.0 MiB)") {
		t.Errorf("memory row %+v", m)
	}
	// A side whose pods failed keeps the other rows; one failed row stands for the pod rows.
	k.PodsErr = errors.New("delete pods: timeout")
	failed := scaleNodeRows(DefaultScaleConfig(), r, k)
	if len(failed) != len(rows)-2 || !failed[len(failed)-1].Failed || !strings.Contains(failed[len(failed)-1].Value, "delete pods: timeout") ||
		!strings.HasPrefix(failed[0].Metric, "creation:") {
		t.Errorf("rows with KWOK's pods failed: %+v", failed)
	}
	k.PodsErr = nil
	// The oldest Lease: as fresh as KWOK keeps its own on the same control plane (within 10%),
	// never expired (40 s), every node Ready.
	oldest := func(ours, kwoks time.Duration, notReady int) bool {
		r.Steady.OldestLease, k.Steady.OldestLease, r.Steady.NotReady = ours, kwoks, notReady
		for _, row := range scaleNodeRows(DefaultScaleConfig(), r, k) {
			if strings.HasPrefix(row.Metric, "steady state: oldest") {
				return row.OK
			}
		}
		t.Fatal("no oldest Lease row")
		return false
	}
	for _, c := range []struct {
		ours, kwoks time.Duration
		notReady    int
		ok          bool
	}{
		{26 * time.Second, 29 * time.Second, 0, true},  // both late on a saturated control plane
		{12 * time.Second, 11 * time.Second, 0, true},  // within 10% of KWOK's
		{14 * time.Second, 11 * time.Second, 0, false}, // staler than KWOK's
		{41 * time.Second, 45 * time.Second, 0, false}, // expired, whatever KWOK does
		{12 * time.Second, 12 * time.Second, 3, false}, // nodes not Ready
	} {
		if got := oldest(c.ours, c.kwoks, c.notReady); got != c.ok {
			t.Errorf("oldest Lease %s beside KWOK's %s, %d not Ready: met %v, want %v", c.ours, c.kwoks, c.notReady, got, c.ok)
		}
	}
}
