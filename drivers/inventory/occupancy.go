package inventory

import (
	"cmp"
	"slices"
	"strings"
)

// Occupancy cell states, one character per device in NodeOccupancy.Strip.
const (
	CellFree             = 'f' // untainted, not allocated
	CellAllocated        = 'a' // allocated, untainted
	CellTainted          = 't' // NoSchedule/NoExecute taint, not allocated
	CellAllocatedTainted = 'x' // allocated and tainted (its consumers may be evicted)
)

// NodeOccupancy is one node's devices at a glance: counts and a strip of one cell per device
// (in the node's device order), so a dashboard can draw a thousand nodes as a thousand rows
// instead of listing every device.
type NodeOccupancy struct {
	// Node is the node name; "" holds devices not bound to one node.
	Node      string            `json:"node"`
	Labels    map[string]string `json:"labels,omitempty"`
	Known     bool              `json:"known"` // a Node object exists
	Pools     []string          `json:"pools,omitempty"`
	Devices   int               `json:"devices"`
	Allocated int               `json:"allocated"`
	Tainted   int               `json:"tainted"`
	Free      int               `json:"free"`
	Strip     string            `json:"strip"`
}

// Occupancy groups devices by node; every Node of the snapshot gets a row, even without
// devices. Rows are sorted by node name (natural order: node-2 before node-10), "" last.
func Occupancy(s *Snapshot, devices []DeviceView) []NodeOccupancy {
	rows := map[string]*NodeOccupancy{}
	for _, n := range s.Nodes {
		rows[n.Name] = &NodeOccupancy{Node: n.Name, Labels: n.Labels, Known: true}
	}
	strips := map[string]*strings.Builder{}
	for _, d := range devices {
		r := rows[d.Node]
		if r == nil {
			r = &NodeOccupancy{Node: d.Node}
			rows[d.Node] = r
		}
		pool := d.Driver + "/" + d.Pool
		if !slices.Contains(r.Pools, pool) {
			r.Pools = append(r.Pools, pool)
		}
		r.Devices++
		allocated := len(d.AllocatedTo) > 0
		cell := CellFree
		switch {
		case allocated && !d.Healthy:
			cell = CellAllocatedTainted
		case allocated:
			cell = CellAllocated
		case !d.Healthy:
			cell = CellTainted
		}
		if allocated {
			r.Allocated++
		}
		if !d.Healthy {
			r.Tainted++
		}
		if cell == CellFree {
			r.Free++
		}
		b := strips[d.Node]
		if b == nil {
			b = &strings.Builder{}
			strips[d.Node] = b
		}
		b.WriteRune(cell)
	}
	out := make([]NodeOccupancy, 0, len(rows))
	for name, r := range rows {
		if b := strips[name]; b != nil {
			r.Strip = b.String()
		}
		slices.Sort(r.Pools)
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b NodeOccupancy) int {
		if (a.Node == "") != (b.Node == "") {
			return cmp.Compare(b.Node, a.Node) // "" last
		}
		return compareNatural(a.Node, b.Node)
	})
	return out
}
