package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/inventory"
	it "github.com/draforge/draforge/drivers/inventory/inventorytest"
	"github.com/draforge/draforge/drivers/simdevice"
)

func press(m *Model, keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "pgdown":
			msg = tea.KeyPressMsg{Code: tea.KeyPgDown}
		case "backspace":
			msg = tea.KeyPressMsg{Code: tea.KeyBackspace}
		default:
			r := []rune(k)[0]
			msg = tea.KeyPressMsg{Code: r, Text: k}
		}
		_, cmd = m.Update(msg)
	}
	return cmd
}

// thousand is 1,000 nodes with 4 GPUs each (20 pools of 50 nodes), gpu-0 allocated on node 7.
func thousand() *inventory.Snapshot {
	var nodes []*corev1.Node
	var names []string
	for i := range 1000 {
		nodes = append(nodes, it.Node(fmt.Sprintf("n-%04d", i)))
		names = append(names, nodes[i].Name)
	}
	s := &inventory.Snapshot{Nodes: nodes, Classes: []*resourcev1.DeviceClass{it.Class("gpu")}}
	for g := range 20 {
		p := it.Pool("demo", fmt.Sprintf("p%02d", g), 4, names[g*50:(g+1)*50]...)
		s.Pools = append(s.Pools, p)
		s.Slices = append(s.Slices, it.Slices(p, nodes[g*50:(g+1)*50])...)
	}
	c := it.Claim("demo", "held", "gpu")
	it.Allocate(c, "demo", "p00", "n-0007", "gpu-0")
	s.Claims = append(s.Claims, c)
	return s.Sort()
}

func TestWaitsForSnapshotThenShowsOverview(t *testing.T) {
	m := New()
	if out := m.Render(); !strings.Contains(out, "waiting for the informer caches") || !strings.Contains(out, "/ filter") {
		t.Fatalf("before snapshot:\n%s", out)
	}
	m.Update(SnapshotMsg{Snapshot: it.Healthy(), Version: 1})
	out := m.Render()
	for _, want := range []string{"[1 Overview]", "Devices 4   allocated 1   tainted 0   free 3", "Claims 2   pending 1", "snapshot 1", "read-only"} {
		if !strings.Contains(out, want) {
			t.Errorf("overview lacks %q:\n%s", want, out)
		}
	}
}

func TestTabsAndCursor(t *testing.T) {
	m := New()
	m.Update(SnapshotMsg{Snapshot: it.Healthy(), Version: 1})
	press(m, "tab")
	if m.Tab() != TabPools {
		t.Fatalf("tab %d", m.Tab())
	}
	press(m, "4")
	if m.Tab() != TabClaims || m.Cursor().Key != "claim:demo/used" {
		t.Fatalf("tab %d cursor %+v", m.Tab(), m.Cursor())
	}
	press(m, "down", "down", "down") // clamps at the last row
	if m.Cursor().Key != "claim:demo/waiting" || !m.Cursor().Pending {
		t.Fatalf("cursor %+v", m.Cursor())
	}
	if out := m.Render(); !strings.Contains(out, "> ! demo/waiting") {
		t.Errorf("cursor not drawn:\n%s", out)
	}
	press(m, "h")
	if m.Tab() != TabNodes {
		t.Errorf("h: tab %d", m.Tab())
	}
}

// Enter on a pending claim explains it off the update loop; the result lands only for the
// row it was asked for; esc closes it.
func TestExplainPendingClaim(t *testing.T) {
	m := New()
	m.Update(SnapshotMsg{Snapshot: it.Healthy(), Version: 1})
	press(m, "4", "down")
	cmd := press(m, "enter")
	if cmd == nil {
		t.Fatal("no explain command")
	}
	if out := m.Render(); !strings.Contains(out, "explaining claim:demo/waiting") {
		t.Errorf("no progress line:\n%s", out)
	}
	m.Update(ExplainMsg{Key: "claim:demo/other", Lines: []string{"stale"}})
	m.Update(cmd())
	out := m.Render()
	if !strings.Contains(out, "Summary:  claim fits on node node-a") || strings.Contains(out, "stale") {
		t.Errorf("explain not shown:\n%s", out)
	}
	press(m, "esc")
	if strings.Contains(m.Render(), "Summary:") {
		t.Error("esc did not close the explanation")
	}
}

// A pending pod is explained with its claims and the scheduler's message.
func TestExplainPod(t *testing.T) {
	s := it.Healthy()
	p := it.Pod("demo", "stuck", "waiting", "")
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available: 2 Insufficient cpu."}}
	s.Pods = append(s.Pods, p)
	s.Sort()
	m := New()
	m.Update(SnapshotMsg{Snapshot: s, Version: 1})
	press(m, "5")
	if m.Cursor().Key != "pod:demo/stuck" {
		t.Fatalf("cursor %+v", m.Cursor())
	}
	m.Update(press(m, "enter")())
	if out := m.Render(); !strings.Contains(out, "Scheduler: Unschedulable: 0/2 nodes are available") {
		t.Errorf("pod explain:\n%s", out)
	}
}

// `/` filters the active list as one types; enter keeps the filter, esc clears it.
func TestFilter(t *testing.T) {
	m := New()
	m.Update(SnapshotMsg{Snapshot: thousand(), Version: 1})
	press(m, "3", "/", "n", "-", "0", "9", "9")
	if got := len(m.Visible()); got != 10 { // n-0990 … n-0999
		t.Fatalf("%d rows match n-099", got)
	}
	press(m, "backspace")
	if got := len(m.Visible()); got != 100 {
		t.Fatalf("%d rows match n-09", got)
	}
	press(m, "enter", "j") // j moves once the filter is closed
	if m.Cursor().Key != "node:n-0901" {
		t.Errorf("cursor %+v", m.Cursor())
	}
	if out := m.Render(); !strings.Contains(out, "Nodes: 100 of 1000 matching /n-09") {
		t.Errorf("status:\n%s", out)
	}
	press(m, "esc")
	if len(m.Visible()) != 1000 {
		t.Errorf("esc kept the filter: %d rows", len(m.Visible()))
	}
}

// A gang member's explanation shows its PodGroup and why the group waits.
func TestExplainGangMember(t *testing.T) {
	s := it.Healthy()
	p := it.Pod("demo", "stuck", "waiting", "")
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("big")}
	s.Pods = append(s.Pods, p)
	s.PodGroups = []*schedulingv1beta1.PodGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "big"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
		Status: schedulingv1beta1.PodGroupStatus{Conditions: []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
			Reason: "Unschedulable", Message: "pod group is unschedulable, 0/1 placements are available"}}}}}
	s.PodGroupsRead = true
	s.Sort()
	m := New()
	m.Update(tea.WindowSizeMsg{Width: 140, Height: 40})
	m.Update(SnapshotMsg{Snapshot: s, Version: 1})
	press(m, "5")
	m.Update(press(m, "enter")())
	out := m.Render()
	for _, want := range []string{"Gang:      PodGroup big (gang, minCount 3)", "pod group is unschedulable, 0/1 placements are available"} {
		if !strings.Contains(out, want) {
			t.Errorf("pod explain lacks %q:\n%s", want, out)
		}
	}
}

// 1,000 nodes render as one screen of rows; paging moves the window, the cursor stays in it.
func TestVirtualisedAtThousandNodes(t *testing.T) {
	m := New()
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 24})
	m.Update(SnapshotMsg{Snapshot: thousand(), Version: 1})
	press(m, "3")
	out := m.Render()
	if lines := strings.Count(out, "\n") + 1; lines > 24 {
		t.Errorf("%d lines for a 24-line terminal", lines)
	}
	for i, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > 120 {
			t.Errorf("line %d has %d columns on a 120-column terminal: %q", i, n, l)
		}
	}
	if !strings.Contains(out, "rows 1–20 of 1000") || !strings.Contains(out, "n-0007") || !strings.Contains(out, "█···") || strings.Contains(out, "n-0020") {
		t.Errorf("first page:\n%s", out)
	}
	press(m, "pgdown", "pgdown")
	if out := m.Render(); !strings.Contains(out, "> ") || !strings.Contains(out, "n-0040") {
		t.Errorf("after paging:\n%s", out)
	}
	press(m, "G")
	if m.Cursor().Key != "node:n-0999" || !strings.Contains(m.Render(), "rows 981–1000 of 1000") {
		t.Errorf("end: %+v\n%s", m.Cursor(), m.Render())
	}
}

// A new snapshot keeps the cursor on the same object and updates the rows in place: the
// pending claim becomes allocated.
func TestLiveUpdateKeepsCursor(t *testing.T) {
	s := it.Healthy()
	m := New()
	m.Update(SnapshotMsg{Snapshot: s, Version: 1})
	press(m, "4", "down")
	next := it.Healthy()
	for _, c := range next.Claims {
		if c.Name == "waiting" {
			it.Allocate(c, "demo", "gpus", "node-b", "gpu-1")
		}
	}
	extra := it.Claim("demo", "aaa-first", "gpu")
	next.Claims = append(next.Claims, extra)
	next.Sort()
	m.Update(SnapshotMsg{Snapshot: next, Version: 2})
	c := m.Cursor()
	if c.Key != "claim:demo/waiting" || c.Pending {
		t.Fatalf("cursor %+v", c)
	}
	want := "demo/waiting                             Allocated node-b           " + simdevice.PoolNameFor("demo", "gpus", "node-b") + "/gpu-1"
	if !strings.Contains(m.Render(), want) {
		t.Errorf("row not updated, want %q:\n%s", want, m.Render())
	}
}

func TestQuit(t *testing.T) {
	m := New()
	if cmd := press(m, "q"); cmd == nil {
		t.Fatal("q does not quit")
	}
	press(m, "/")
	if cmd := press(m, "q"); cmd != nil || m.filter != "q" {
		t.Errorf("q while filtering should type: filter %q", m.filter)
	}
}

// Read-only by default: F only says how to enable faults.
func TestFaultsReadOnlyByDefault(t *testing.T) {
	m := New()
	m.Update(SnapshotMsg{Snapshot: it.Healthy(), Version: 1})
	press(m, "4")
	if cmd := press(m, "F"); cmd != nil {
		t.Fatal("F returned a command in read-only mode")
	}
	if out := m.Render(); !strings.Contains(out, "read-only: start draforge tui with --allow-faults") || !strings.Contains(out, "· read-only") {
		t.Errorf("no read-only notice:\n%s", out)
	}
}

// With faults enabled, F on an allocated claim asks first; anything but y cancels; y injects
// exactly the claim's device on its node.
func TestFaultNeedsConfirmation(t *testing.T) {
	var got []FaultTarget
	m := New().WithFaults(func(_ context.Context, f FaultTarget) error { got = append(got, f); return nil })
	m.Update(SnapshotMsg{Snapshot: it.Healthy(), Version: 1})
	press(m, "4") // cursor on demo/used, allocated gpu-0 on node-a
	press(m, "F")
	if out := m.Render(); !strings.Contains(out, "Mark device gpu-0 of SimulatedDevicePool demo/gpus on node node-a unhealthy? y to confirm") {
		t.Fatalf("no confirmation:\n%s", out)
	}
	if cmd := press(m, "n"); cmd != nil || len(got) != 0 || !strings.Contains(m.Render(), "fault injection cancelled") {
		t.Fatalf("n did not cancel (%v)", got)
	}
	press(m, "F")
	cmd := press(m, "y")
	if cmd == nil {
		t.Fatal("y did not inject")
	}
	m.Update(cmd())
	want := FaultTarget{Namespace: "demo", Pool: "gpus", Device: "gpu-0", Node: "node-a"}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("injected %+v, want %+v", got, want)
	}
	if !strings.Contains(m.Render(), "marked unhealthy: device gpu-0") {
		t.Errorf("outcome not shown:\n%s", m.Render())
	}
	// A pending claim holds no device.
	press(m, "down", "F")
	if m.confirm != nil || !strings.Contains(m.Render(), "select an allocated claim") {
		t.Errorf("pending claim offered a fault:\n%s", m.Render())
	}
}

// While an explanation is open, new snapshots re-explain it one at a time: no second explain
// starts while one runs, and an answer for an older snapshot starts one more.
func TestExplainFollowsSnapshotsOneAtATime(t *testing.T) {
	m := New()
	m.Update(SnapshotMsg{Snapshot: it.Healthy(), Version: 1})
	press(m, "4", "down")
	first := press(m, "enter")
	if _, cmd := m.Update(SnapshotMsg{Snapshot: it.Healthy(), Version: 2}); cmd != nil {
		t.Fatal("a second explain started while one runs")
	}
	msg := first().(ExplainMsg)
	if msg.Version != 1 {
		t.Fatalf("explained version %d", msg.Version)
	}
	_, again := m.Update(msg)
	if again == nil {
		t.Fatal("an answer for snapshot 1 did not start one for snapshot 2")
	}
	if _, cmd := m.Update(again()); cmd != nil {
		t.Error("an up-to-date answer started another explain")
	}
	if !strings.Contains(m.Render(), "Summary:  claim fits on node node-a") {
		t.Errorf("explanation not shown:\n%s", m.Render())
	}
}

// t on the nodes view groups the nodes by each topology key they carry in turn, a header line
// with each domain's totals before its nodes, then back to no grouping.
func TestGroupNodesByTopology(t *testing.T) {
	s := thousand()
	for i, n := range s.Nodes {
		n.Labels["topology.kubernetes.io/zone"] = fmt.Sprintf("zone-%d", i/500)
		n.Labels["topology.kubernetes.io/rack"] = fmt.Sprintf("rack-%d", i/100)
	}
	m := New()
	m.Update(tea.WindowSizeMsg{Width: 140, Height: 30})
	m.Update(SnapshotMsg{Snapshot: s, Version: 1})
	press(m, "3", "t")
	if !strings.Contains(m.Render(), "t group by topology") {
		t.Errorf("the nodes view does not offer t:\n%s", m.Render())
	}
	rows := m.Visible()
	if len(rows) != 1010 || rows[0].Key != "domain:rack-0" || rows[1].Key != "node:n-0000" || rows[101].Key != "domain:rack-1" {
		t.Fatalf("%d rows, first %+v, 101st %+v", len(rows), rows[0], rows[101])
	}
	if want := "── topology.kubernetes.io/rack = rack-0: 100 nodes, 400 dev 1 alloc 399 free 0 tainted"; rows[0].Text != want {
		t.Errorf("header %q, want %q", rows[0].Text, want)
	}
	press(m, "t")
	if rows := m.Visible(); len(rows) != 1002 || rows[0].Key != "domain:zone-0" || rows[501].Key != "domain:zone-1" {
		t.Errorf("by zone: %d rows, %+v", len(rows), rows[0])
	}
	press(m, "t")
	if rows := m.Visible(); len(rows) != 1000 || rows[0].Key != "node:n-0000" {
		t.Errorf("ungrouped: %d rows", len(rows))
	}
}
