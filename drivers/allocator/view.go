package allocator

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/draforge/draforge/drivers/compactslice"
)

// view is the cached slices and nodes in the order and with the indexes allocation reads them:
// sorted by name, slices grouped by node and by pool. It is built from the store's maps by
// newView and never modified afterwards, except that replaceNode swaps in an updated Node
// under the same name (see Allocator.view for who may call what).
type view struct {
	slices []*compactslice.Slice // all, by name
	nodes  []*corev1.Node        // all observed nodes, by name
	// candidates are the nodes a claim can be allocated on (see candidateNodes), by name.
	candidates []*corev1.Node
	// byNode and byPool hold each node's node-local slices and each pool's slices, by name.
	byNode map[string][]*compactslice.Slice
	byPool map[poolID][]*compactslice.Slice
	// nonLocal are the slices not bound to a single node, by name.
	nonLocal []*compactslice.Slice
	// free are the device counts of the candidates, index by index, when there are no nonLocal
	// slices (set by Allocator.allocationSnapshotLocked; nil in other views).
	free []*nodeDevices
}

// newView builds a view of the given slices and nodes (the store's maps, or copies of them).
func newView(sliceMap map[string]*compactslice.Slice, nodeMap map[string]*corev1.Node) *view {
	v := &view{
		slices: make([]*compactslice.Slice, 0, len(sliceMap)),
		nodes:  make([]*corev1.Node, 0, len(nodeMap)),
		byNode: map[string][]*compactslice.Slice{},
		byPool: map[poolID][]*compactslice.Slice{},
	}
	for _, sl := range sliceMap {
		v.slices = append(v.slices, sl)
	}
	sort.Slice(v.slices, func(i, j int) bool { return v.slices[i].Name < v.slices[j].Name })
	for _, n := range nodeMap {
		v.nodes = append(v.nodes, n)
	}
	sort.Slice(v.nodes, func(i, j int) bool { return v.nodes[i].Name < v.nodes[j].Name })
	for _, sl := range v.slices {
		if n := sl.NodeName(); n != "" {
			v.byNode[n] = append(v.byNode[n], sl)
		} else {
			v.nonLocal = append(v.nonLocal, sl)
		}
		id := poolID{sl.Driver(), sl.Pool().Name}
		v.byPool[id] = append(v.byPool[id], sl)
	}
	// Nodes with node-local slices, or every node when some slice is not bound to one node.
	if len(v.nonLocal) > 0 {
		v.candidates = v.nodes
	} else {
		for _, n := range v.nodes {
			if len(v.byNode[n.Name]) > 0 {
				v.candidates = append(v.candidates, n)
			}
		}
	}
	return v
}

// replaceNode swaps in node for the node of the same name and reports whether there was one.
// The order and the indexes depend on names only, so nothing else changes.
func (v *view) replaceNode(node *corev1.Node) bool {
	replace := func(list []*corev1.Node) bool {
		i, found := slices.BinarySearchFunc(list, node.Name, func(n *corev1.Node, name string) int { return strings.Compare(n.Name, name) })
		if found {
			list[i] = node
		}
		return found
	}
	if !replace(v.nodes) {
		return false
	}
	if len(v.nonLocal) == 0 { // otherwise candidates is nodes
		replace(v.candidates)
	}
	return true
}

// slicesFor returns what the structured allocator reads when it allocates on node, in name
// order: the node's own slices, the slices not bound to one node and, for a pool that these do
// not show complete, the pool's other slices (the allocator then checks completeness over them).
// Any superset gives the same result; this one expands a few slices per node instead of all.
func (v *view) slicesFor(node string) []*compactslice.Slice {
	out := v.byNode[node]
	if len(v.nonLocal) > 0 {
		out = mergeByName(out, v.nonLocal)
	}
	// A pool is incomplete here when the slices found do not number its resourceSliceCount
	// (counted over all generations, as the allocator finds them).
	var incomplete []poolID
	if len(out) == 1 {
		if sl := out[0]; sl.Pool().ResourceSliceCount != 1 {
			incomplete = append(incomplete, poolID{sl.Driver(), sl.Pool().Name})
		}
	} else if len(out) > 1 {
		found := make(map[poolID]int64, len(out))
		for _, sl := range out {
			found[poolID{sl.Driver(), sl.Pool().Name}]++
		}
		for _, sl := range out {
			id := poolID{sl.Driver(), sl.Pool().Name}
			if found[id] != sl.Pool().ResourceSliceCount && !slices.Contains(incomplete, id) {
				incomplete = append(incomplete, id)
			}
		}
	}
	for _, id := range incomplete {
		out = mergeByName(out, v.byPool[id])
	}
	return out
}

// mergeByName merges two lists sorted by name into a new one, keeping a slice in both once.
func mergeByName(x, y []*compactslice.Slice) []*compactslice.Slice {
	out := make([]*compactslice.Slice, 0, len(x)+len(y))
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch c := strings.Compare(x[i].Name, y[j].Name); {
		case c < 0:
			out = append(out, x[i])
			i++
		case c > 0:
			out = append(out, y[j])
			j++
		default:
			out = append(out, x[i])
			i, j = i+1, j+1
		}
	}
	out = append(out, x[i:]...)
	return append(out, y[j:]...)
}
