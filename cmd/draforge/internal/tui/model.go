// Package tui is `draforge tui`: a read-only terminal view of the same snapshot `draforge serve`
// builds from informer caches (overview, pools, node × device occupancy, claims, pods,
// doctor). The model is pure: snapshots arrive as SnapshotMsg, keys as tea.KeyPressMsg, and
// only the visible window of each list is rendered, so 1,000 nodes cost one screen of rows.
package tui

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/draforge/draforge/drivers/doctor"
	"github.com/draforge/draforge/drivers/explain"
	"github.com/draforge/draforge/drivers/inventory"
)

// Tabs, in order.
const (
	TabOverview = iota
	TabPools
	TabNodes
	TabClaims
	TabPods
	TabDoctor
	numTabs
)

var tabNames = [numTabs]string{"Overview", "Pools", "Nodes", "Claims", "Pods", "Doctor"}

// SnapshotMsg delivers a new snapshot (sorted, not modified afterwards).
type SnapshotMsg struct {
	Snapshot *inventory.Snapshot
	Version  uint64
}

// ExplainMsg is the explain summary of one claim or pod, computed off the update loop.
type ExplainMsg struct {
	Key   string
	Lines []string
	// Version is the snapshot version explained.
	Version uint64
}

// Row is one list line; Key identifies the object ("claim:ns/name", "pod:ns/name", ...).
type Row struct {
	Key     string
	Text    string
	Pending bool // a claim or pod that explain can say something about
	// Fault is the simulated device an allocated claim holds (its first one), the target of
	// fault injection; nil when the device is not from a SimulatedDevicePool.
	Fault *FaultTarget
}

// FaultTarget is one device of a SimulatedDevicePool on one node.
type FaultTarget struct {
	Namespace, Pool, Device, Node string
}

func (f FaultTarget) String() string {
	return fmt.Sprintf("device %s of SimulatedDevicePool %s/%s on node %s", f.Device, f.Namespace, f.Pool, f.Node)
}

// Injector marks a device unhealthy (spec.faults of its SimulatedDevicePool).
type Injector func(context.Context, FaultTarget) error

// FaultMsg reports the outcome of an injection.
type FaultMsg struct {
	Target FaultTarget
	Err    error
}

// Model is the TUI state.
type Model struct {
	snap    *inventory.Snapshot
	version uint64
	rows    [numTabs][]Row
	tab     int
	cursor  [numTabs]int // index into the filtered rows
	offset  [numTabs]int // first visible filtered row
	width   int
	height  int

	filter    string
	filtering bool

	detailKey   string
	detail      []string
	explainWait bool

	inject  Injector
	confirm *FaultTarget // a fault waiting for y
	message string       // one-line status (fault outcome, read-only notice)

	// groupBy is the topology label key the nodes view groups by ("" for none); t cycles it
	// through the keys the nodes carry.
	groupBy string
}

// New returns a read-only model waiting for its first snapshot.
func New() *Model { return &Model{width: 100, height: 30} }

// WithFaults enables fault injection (F on an allocated claim, then y to confirm).
func (m *Model) WithFaults(inject Injector) *Model {
	m.inject = inject
	return m
}

// Init implements tea.Model.
func (m *Model) Init() tea.Cmd { return nil }

// Tab returns the active tab.
func (m *Model) Tab() int { return m.tab }

// Visible returns the filtered rows of the active tab.
func (m *Model) Visible() []Row { return m.filtered(m.tab) }

// Cursor returns the selected row of the active tab, or nil.
func (m *Model) Cursor() *Row {
	rows := m.Visible()
	c := m.cursor[m.tab]
	if c < 0 || c >= len(rows) {
		return nil
	}
	return &rows[c]
}

func (m *Model) filtered(tab int) []Row {
	if m.filter == "" || tab == TabOverview {
		return m.rows[tab]
	}
	f := strings.ToLower(m.filter)
	var out []Row
	for _, r := range m.rows[tab] {
		if strings.Contains(strings.ToLower(r.Text), f) {
			out = append(out, r)
		}
	}
	return out
}

// listHeight is how many rows fit between the header and the footer (and the detail pane).
func (m *Model) listHeight() int {
	h := m.height - 4 // tabs, column line, status, keys
	if len(m.detail) > 0 {
		h -= min(len(m.detail), m.height/2) + 1
	}
	if m.confirm != nil || m.message != "" {
		h--
	}
	return max(h, 1)
}

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.clamp()
	case SnapshotMsg:
		m.setSnapshot(msg.Snapshot, msg.Version)
		// Keep the open explanation current, one explain at a time: at 1,000 nodes one takes
		// seconds and snapshots come every 250ms; the answer's arrival starts the next one.
		if m.detailKey != "" && !m.explainWait {
			m.explainWait = true
			return m, m.explainCmd(m.detailKey)
		}
	case FaultMsg:
		if msg.Err != nil {
			m.message = "fault injection failed: " + msg.Err.Error()
		} else {
			m.message = "marked unhealthy: " + msg.Target.String()
		}
	case ExplainMsg:
		if msg.Key == m.detailKey {
			m.detail, m.explainWait = msg.Lines, false
			if msg.Version != m.version { // the snapshot moved on while explaining
				m.explainWait = true
				return m, m.explainCmd(m.detailKey)
			}
		}
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	return m, nil
}

func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	if m.confirm != nil {
		t := *m.confirm
		m.confirm = nil
		if s != "y" {
			m.message = "fault injection cancelled"
			return nil
		}
		m.message = "injecting: " + t.String() + " …"
		inject := m.inject
		return func() tea.Msg { return FaultMsg{Target: t, Err: inject(context.Background(), t)} }
	}
	if m.filtering {
		switch s {
		case "enter":
			m.filtering = false
		case "esc":
			m.filtering, m.filter = false, ""
		case "backspace":
			if r := []rune(m.filter); len(r) > 0 {
				m.filter = string(r[:len(r)-1])
			}
		case "ctrl+c":
			return tea.Quit
		default:
			if k.Text != "" {
				m.filter += k.Text
			}
		}
		m.cursor[m.tab], m.offset[m.tab] = 0, 0
		return nil
	}
	switch s {
	case "q", "ctrl+c":
		return tea.Quit
	case "tab", "right", "l":
		m.switchTab((m.tab + 1) % numTabs)
	case "shift+tab", "left", "h":
		m.switchTab((m.tab + numTabs - 1) % numTabs)
	case "1", "2", "3", "4", "5", "6":
		m.switchTab(int(s[0] - '1'))
	case "down", "j":
		m.move(1)
	case "up", "k":
		m.move(-1)
	case "pgdown", "space":
		m.move(m.listHeight())
	case "pgup":
		m.move(-m.listHeight())
	case "home", "g":
		m.move(-len(m.rows[m.tab]))
	case "end", "G":
		m.move(len(m.rows[m.tab]))
	case "/":
		m.filtering = true
	case "t":
		if m.tab == TabNodes {
			m.cycleGroup()
		}
	case "esc":
		switch {
		case len(m.detail) > 0 || m.detailKey != "":
			m.detail, m.detailKey, m.explainWait = nil, "", false
		default:
			m.filter = ""
		}
		m.clamp()
	case "F":
		r := m.Cursor()
		switch {
		case m.inject == nil:
			m.message = "read-only: start draforge tui with --allow-faults to inject faults"
		case r == nil || r.Fault == nil:
			m.message = "select an allocated claim holding a simulated device to inject a fault"
		default:
			t := *r.Fault
			m.confirm = &t
			m.message = ""
		}
	case "enter", "e":
		if r := m.Cursor(); r != nil && (strings.HasPrefix(r.Key, "claim:") || strings.HasPrefix(r.Key, "pod:")) {
			m.detailKey, m.explainWait = r.Key, true
			m.detail = []string{"explaining " + r.Key + " …"}
			return m.explainCmd(r.Key)
		}
	}
	return nil
}

func (m *Model) switchTab(t int) {
	m.tab = t
	m.detail, m.detailKey, m.explainWait = nil, "", false
	m.clamp()
}

func (m *Model) move(d int) {
	m.cursor[m.tab] += d
	m.clamp()
}

// clamp keeps the cursor inside the list and the window around the cursor.
func (m *Model) clamp() {
	n := len(m.filtered(m.tab))
	c := &m.cursor[m.tab]
	o := &m.offset[m.tab]
	*c = max(0, min(*c, n-1))
	h := m.listHeight()
	if *c < *o {
		*o = *c
	}
	if *c >= *o+h {
		*o = *c - h + 1
	}
	*o = max(0, min(*o, max(n-h, 0)))
}

func (m *Model) setSnapshot(s *inventory.Snapshot, version uint64) {
	var keep [numTabs]string
	for t := range numTabs {
		rows := m.filtered(t)
		if c := m.cursor[t]; c >= 0 && c < len(rows) {
			keep[t] = rows[c].Key
		}
	}
	m.snap, m.version = s, version
	m.rows = buildRows(s, m.groupBy)
	for t := range numTabs {
		for i, r := range m.filtered(t) {
			if keep[t] != "" && r.Key == keep[t] {
				m.cursor[t] = i
				break
			}
		}
	}
	m.clamp()
}

// cycleGroup moves the nodes view's grouping to the next topology key the nodes carry, after
// the last back to none.
func (m *Model) cycleGroup() {
	if m.snap == nil {
		return
	}
	var rows []inventory.NodeOccupancy
	for _, n := range m.snap.Nodes {
		rows = append(rows, inventory.NodeOccupancy{Node: n.Name, Labels: n.Labels})
	}
	keys := append([]string{""}, inventory.TopologyKeys(rows)...)
	i := slices.Index(keys, m.groupBy)
	m.groupBy = keys[(i+1)%len(keys)]
	if m.groupBy == "" {
		m.message = "nodes not grouped"
	} else {
		m.message = "nodes grouped by " + m.groupBy + " (t: next)"
	}
	m.setSnapshot(m.snap, m.version)
}

func (m *Model) explainCmd(key string) tea.Cmd {
	s, v := m.snap, m.version
	if s == nil {
		return nil
	}
	return func() tea.Msg { return ExplainMsg{Key: key, Lines: explainLines(s, key), Version: v} }
}

// explainLines renders the explanation of "claim:ns/name" or "pod:ns/name" with the same
// code as `draforge explain`.
func explainLines(s *inventory.Snapshot, key string) []string {
	kind, ref, _ := strings.Cut(key, ":")
	ns, name, _ := strings.Cut(ref, "/")
	var b bytes.Buffer
	var err error
	switch kind {
	case "claim":
		var r *explain.Result
		if r, err = explain.Explain(context.Background(), s, ns, name); err == nil {
			err = explain.Render(&b, r, explain.RenderOptions{})
		}
	case "pod":
		var r *explain.PodResult
		if r, err = explain.ExplainPod(context.Background(), s, ns, name); err == nil {
			err = explain.RenderPod(&b, r, explain.RenderOptions{})
		}
	}
	if err != nil {
		return []string{"explain " + ref + ": " + err.Error()}
	}
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}

// buildRows derives every tab's rows from the snapshot.
func buildRows(s *inventory.Snapshot, groupBy string) [numTabs][]Row {
	var rows [numTabs][]Row
	if s == nil {
		return rows
	}
	pools := inventory.Pools(s, true)
	sdpOf := map[inventory.PoolID]string{}
	for _, p := range pools {
		sdpOf[p.PoolID] = p.SDP
	}
	var devices []inventory.DeviceView
	allocated, tainted := 0, 0
	for _, p := range pools {
		devices = append(devices, p.DeviceList...)
		allocated += p.Allocated
		tainted += p.Tainted
		rows[TabPools] = append(rows[TabPools], Row{Key: "pool:" + p.PoolID.String(),
			Text: fmt.Sprintf("%-48s %-16s %4d dev %4d alloc %4d tainted  %s", p.PoolID.String(), orDash(p.Node), p.Devices, p.Allocated, p.Tainted, p.Health)})
	}
	occupancy := inventory.Occupancy(s, devices)
	var groups []inventory.OccupancyGroup
	if groupBy != "" {
		occupancy, groups = inventory.GroupOccupancy(occupancy, groupBy)
	}
	for i, n := range occupancy {
		// A header line before each topology domain's nodes, with the domain's totals.
		if groupBy != "" && (i == 0 || occupancy[i-1].Labels[groupBy] != n.Labels[groupBy]) {
			g := groups[0]
			groups = groups[1:]
			name := groupBy + " = " + g.Value
			if g.Value == "" {
				name = "without " + groupBy
			}
			rows[TabNodes] = append(rows[TabNodes], Row{Key: "domain:" + g.Value,
				Text: fmt.Sprintf("── %s: %d nodes, %d dev %d alloc %d free %d tainted", name, g.Nodes, g.Devices, g.Allocated, g.Free, g.Tainted)})
		}
		rows[TabNodes] = append(rows[TabNodes], Row{Key: "node:" + n.Node,
			Text: fmt.Sprintf("%-24s %4d dev %4d alloc %4d free %4d tainted  %s", orDefault(n.Node, "(no single node)"), n.Devices, n.Allocated, n.Free, n.Tainted, Strip(n.Strip, 48))})
	}
	claims := inventory.Claims(s)
	pending := 0
	for _, c := range claims {
		var devs []string
		for _, a := range c.Allocations {
			devs = append(devs, a.Pool+"/"+a.Device)
		}
		if c.State == inventory.ClaimPending {
			pending++
		}
		var fault *FaultTarget
		if len(c.Allocations) > 0 && c.Node != "" {
			a := c.Allocations[0]
			if ns, name, ok := strings.Cut(sdpOf[inventory.PoolID{Driver: a.Driver, Pool: a.Pool}], "/"); ok {
				fault = &FaultTarget{Namespace: ns, Pool: name, Device: a.Device, Node: c.Node}
			}
		}
		rows[TabClaims] = append(rows[TabClaims], Row{Key: "claim:" + c.Namespace + "/" + c.Name, Pending: c.State == inventory.ClaimPending, Fault: fault,
			Text: fmt.Sprintf("%-40s %-9s %-16s %s", c.Namespace+"/"+c.Name, c.State, orDash(c.Node), orDash(strings.Join(devs, ", ")))})
	}
	pods := inventory.Pods(s)
	for _, p := range pods {
		var devs []string
		for _, d := range p.Devices {
			devs = append(devs, d.Pool+"/"+d.Device)
		}
		rows[TabPods] = append(rows[TabPods], Row{Key: "pod:" + p.Namespace + "/" + p.Name, Pending: p.Node == "",
			Text: fmt.Sprintf("%-40s %-9s %-16s %s", p.Namespace+"/"+p.Name, p.Phase, orDash(p.Node), orDash(strings.Join(devs, ", ")))})
	}
	rep := doctor.Run(s, doctor.Facts{})
	for _, r := range rep.Results {
		rows[TabDoctor] = append(rows[TabDoctor], Row{Key: "check:" + r.ID, Text: fmt.Sprintf("%-4s %s %s: %s", r.Status, r.ID, r.Name, r.Message)})
	}
	for _, line := range []string{
		fmt.Sprintf("SimulatedDevicePools %d   DRA pools %d   ResourceSlices %d", len(s.Pools), len(pools), len(s.Slices)),
		fmt.Sprintf("Devices %d   allocated %d   tainted %d   free %d", len(devices), allocated, tainted, len(devices)-allocated-tainted),
		fmt.Sprintf("Claims %d   pending %d", len(claims), pending),
		fmt.Sprintf("Pods with claims %d   Nodes %d   DeviceClasses %d", len(pods), len(s.Nodes), len(s.Classes)),
		fmt.Sprintf("Doctor: %d pass, %d warn, %d fail, %d skip (without discovery facts)", rep.Summary[doctor.Pass], rep.Summary[doctor.Warn], rep.Summary[doctor.Fail], rep.Summary[doctor.Skip]),
	} {
		rows[TabOverview] = append(rows[TabOverview], Row{Key: "overview", Text: line})
	}
	for _, w := range s.Warnings {
		rows[TabOverview] = append(rows[TabOverview], Row{Key: "warning", Text: "warning: " + w})
	}
	return rows
}

// Strip draws an occupancy strip (inventory.Occupancy cells) with at most n characters:
// '·' free, '█' allocated, '▒' tainted, '▓' allocated and tainted.
func Strip(cells string, n int) string {
	var b strings.Builder
	i := 0
	for _, c := range cells {
		if i == n {
			fmt.Fprintf(&b, " +%d", len(cells)-n)
			break
		}
		switch c {
		case inventory.CellAllocated:
			b.WriteRune('█')
		case inventory.CellTainted:
			b.WriteRune('▒')
		case inventory.CellAllocatedTainted:
			b.WriteRune('▓')
		default:
			b.WriteRune('·')
		}
		i++
	}
	return b.String()
}

func orDash(s string) string { return orDefault(s, "–") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
