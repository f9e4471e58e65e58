package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/featuregates"
)

// The incrementally maintained holdings and view equal a rebuild from scratch after every one
// of a long series of random events, and Allocate decides as the per-claim snapshot algorithm
// it replaced (oracleAllocate), with and without consumable capacity.
func TestIncrementalMatchesRebuild(t *testing.T) {
	for _, gates := range []string{"", "DRAConsumableCapacity=false,DRAFractionalCapacityRange=false"} {
		t.Run("gates="+gates, func(t *testing.T) {
			g, err := featuregates.Parse(gates)
			if err != nil {
				t.Fatal(err)
			}
			f := g.Allocator()
			for seed := range uint64(2) {
				w := newWorld(t, New(Options{Features: &f}), seed)
				for step := range 1000 {
					w.step(step)
				}
				t.Logf("seed %d: %d allocations, %d unsatisfiable, %d reserve conflicts", seed, w.allocations, w.unsatisfiable, w.conflicts)
				if w.allocations == 0 || w.unsatisfiable == 0 || w.conflicts == 0 {
					t.Errorf("seed %d: %d allocations, %d unsatisfiable, %d reserve conflicts: the events do not cover enough",
						seed, w.allocations, w.unsatisfiable, w.conflicts)
				}
			}
		})
	}
}

// world drives an Allocator with random events.
type world struct {
	t   *testing.T
	a   *Allocator
	rnd *rand.Rand
	// What was sent, so events can update or delete it.
	nodes  []string
	slices map[string]*resourcev1.ResourceSlice
	claims map[string]*resourcev1.ResourceClaim
	uids   []types.UID // claim and reservation UIDs used so far
	// observed and inFlight model which claim (by name) and reservations the store keeps.
	observed map[string]types.UID
	inFlight sets.Set[types.UID]

	allocations, unsatisfiable, conflicts int
}

func newWorld(t *testing.T, a *Allocator, seed uint64) *world {
	a.UpsertClass(newClass("gpu"))
	return &world{t: t, a: a, rnd: rand.New(rand.NewPCG(seed, 42)),
		slices: map[string]*resourcev1.ResourceSlice{}, claims: map[string]*resourcev1.ResourceClaim{},
		observed: map[string]types.UID{}, inFlight: sets.New[types.UID]()}
}

func (w *world) pick(n int) int { return w.rnd.IntN(n) }

func (w *world) nodeName() string { return fmt.Sprintf("node-%02d", w.pick(16)) }

// randomSlice publishes devices of a small pool: mostly node-local, sometimes for all nodes,
// sometimes one of two slices of a pool (complete or not), with shared and tainted devices.
func (w *world) randomSlice() *resourcev1.ResourceSlice {
	node := w.nodeName()
	pool := node
	if w.pick(4) == 0 {
		pool = fmt.Sprintf("pool-%d", w.pick(4))
	}
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", pool, w.pick(2))},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver,
			Pool: resourcev1.ResourcePool{Name: pool, Generation: int64(1 + w.pick(2)), ResourceSliceCount: int64(1 + w.pick(2))}},
	}
	if w.pick(12) == 0 {
		s.Spec.AllNodes = ptr.To(true)
	} else {
		s.Spec.NodeName = ptr.To(node)
	}
	for i := range w.pick(5) {
		d := resourcev1.Device{Name: fmt.Sprintf("dev-%d", i), Attributes: attrs{"index": num(int64(i))}}
		if w.pick(4) == 0 {
			d.AllowMultipleAllocations = ptr.To(true)
			d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"bandwidth": {Value: resource.MustParse("10")}}
		}
		if w.pick(10) == 0 {
			d.Taints = []resourcev1.DeviceTaint{{Key: "broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

// randomAllocation takes random devices of the published slices (or of none), some with admin
// access, some shared with or without consumed capacity.
func (w *world) randomAllocation() *resourcev1.AllocationResult {
	r := &resourcev1.AllocationResult{}
	var names []string
	for name := range w.slices {
		names = append(names, name)
	}
	sort.Strings(names)
	for range 1 + w.pick(3) {
		res := resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: "gone", Device: "dev-0"}
		if len(names) > 0 && w.pick(10) > 0 {
			s := w.slices[names[w.pick(len(names))]]
			res.Pool = s.Spec.Pool.Name
			if len(s.Spec.Devices) > 0 {
				res.Device = s.Spec.Devices[w.pick(len(s.Spec.Devices))].Name
			}
		}
		switch w.pick(8) {
		case 0:
			res.AdminAccess = ptr.To(true)
		case 1, 2:
			res.ShareID = ptr.To(types.UID(fmt.Sprintf("share-%d", w.pick(4))))
			switch w.pick(3) {
			case 0:
				res.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": *resource.NewQuantity(int64(1+w.pick(4)), resource.DecimalSI)}
			case 1:
				res.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{}
			}
		}
		r.Devices.Results = append(r.Devices.Results, res)
	}
	return r
}

func (w *world) uid() types.UID {
	if len(w.uids) > 0 && w.pick(2) == 0 {
		return w.uids[w.pick(len(w.uids))]
	}
	u := types.UID(fmt.Sprintf("uid-%d", len(w.uids)))
	w.uids = append(w.uids, u)
	return u
}

// randomClaim asks for a few devices, sometimes with a selector, admin access, a capacity
// request (for shared devices), a toleration or a class that does not exist.
func (w *world) randomClaim() *resourcev1.ResourceClaim {
	c := newClaim(fmt.Sprintf("new-%d", w.pick(1000)), exactly("gpu", "gpu", int64(1+w.pick(3))))
	c.UID = w.uid()
	e := c.Spec.Devices.Requests[0].Exactly
	switch w.pick(8) {
	case 0:
		e.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf(`device.attributes["%s"].index >= %d`, driver, w.pick(4))}}}
	case 1:
		e.AdminAccess = ptr.To(true)
	case 2:
		e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": *resource.NewQuantity(int64(1+w.pick(6)), resource.DecimalSI)}}
	case 3:
		e.Tolerations = []resourcev1.DeviceToleration{{Key: "broken", Operator: resourcev1.DeviceTolerationOpExists}}
	case 4:
		if w.pick(4) == 0 {
			e.DeviceClassName = "missing"
		}
	}
	return c
}

func (w *world) step(step int) {
	a := w.a
	switch w.pick(12) {
	case 0: // node added, updated (same name) or deleted
		name := w.nodeName()
		if w.pick(4) == 0 {
			a.DeleteNode(newNode(name))
		} else {
			n := newNode(name)
			n.Labels["step"] = fmt.Sprint(step)
			a.UpsertNode(n)
		}
	case 1, 2: // slice added or updated
		s := w.randomSlice()
		w.slices[s.Name] = s
		a.UpsertSlice(compactslice.From(s))
	case 3: // slice deleted
		s := w.randomSlice()
		delete(w.slices, s.Name)
		a.DeleteSlice(compactslice.From(s))
	case 4, 5: // claim observed: new, updated, recreated, allocated, or showing an in-flight allocation
		c := newClaim(fmt.Sprintf("c-%d", w.pick(20)))
		if old, ok := w.claims[c.Name]; ok && w.pick(3) > 0 {
			c.UID = old.UID
		} else {
			c.UID = w.uid()
		}
		if w.pick(10) == 0 {
			c.UID = "" // as a claim built in Go may have
		}
		switch w.pick(4) {
		case 0:
		case 1:
			a.mu.RLock()
			r, ok := a.inFlight[c.UID]
			a.mu.RUnlock()
			if ok {
				c.Status.Allocation = r.allocation.DeepCopy()
			}
		default:
			c.Status.Allocation = w.randomAllocation()
		}
		if w.pick(10) == 0 {
			c.DeletionTimestamp = &metav1.Time{}
		}
		w.claims[c.Name] = c
		if old, ok := w.observed[c.Name]; ok && old != c.UID {
			w.inFlight.Delete(old) // recreated
		}
		a.mu.RLock()
		if r, ok := a.inFlight[c.UID]; ok && c.Status.Allocation != nil && sameDevices(r.allocation, c.Status.Allocation) {
			w.inFlight.Delete(c.UID) // observed
		}
		a.mu.RUnlock()
		w.observed[c.Name] = c.UID
		a.UpsertClaim(c)
	case 6: // claim deleted, sometimes an older one of the same name
		c := newClaim(fmt.Sprintf("c-%d", w.pick(20)))
		c.UID = w.uid()
		if old, ok := w.claims[c.Name]; ok && w.pick(3) > 0 {
			c.UID = old.UID
		}
		if w.observed[c.Name] == c.UID {
			delete(w.observed, c.Name)
		}
		w.inFlight.Delete(c.UID)
		a.DeleteClaim(c)
	case 7: // reserve
		uid := w.uid()
		if w.pick(10) == 0 {
			uid = ""
		}
		alloc := w.randomAllocation()
		want := w.oracleReserve(uid, alloc)
		err := a.Reserve(uid, alloc)
		if (err == nil) != (want == nil) {
			w.t.Fatalf("step %d: Reserve(%s) = %v, old check says %v", step, uid, err, want)
		}
		if err == nil {
			w.inFlight.Insert(uid)
		} else {
			w.conflicts++
			if !strings.HasPrefix(err.Error(), "device ") || !strings.Contains(err.Error(), " is already allocated to ") {
				w.t.Fatalf("step %d: Reserve error %q", step, err)
			}
		}
	case 8: // release
		uid := w.uid()
		w.inFlight.Delete(uid)
		a.Release(uid)
	case 9: // DeviceTaintRule
		rule := taintRule(fmt.Sprintf("rule-%d", w.pick(3)), &resourcev1.DeviceTaintSelector{Pool: ptr.To(w.nodeName())}, resourcev1.DeviceTaintEffectNoSchedule)
		if w.pick(2) == 0 {
			a.DeleteTaintRule(rule)
		} else {
			a.UpsertTaintRule(rule)
		}
	default: // allocate, as the old algorithm would
		c := w.randomClaim()
		a.mu.RLock()
		_, pending := a.inFlight[c.UID]
		a.mu.RUnlock()
		wantResult, wantErr := oracleAllocate(context.Background(), a, c)
		ex := a.Explain(context.Background(), c)
		got, err := a.Allocate(context.Background(), c)
		if !pending {
			w.compareAllocation(step, c, got, err, wantResult, wantErr)
			// Explain runs the allocator on every candidate node: the first that fits is
			// the one allocation picks.
			if ex.Allocatable != (wantErr == nil) || (wantErr == nil && !selectsNode(wantResult, ex.Node)) {
				w.t.Fatalf("step %d: claim %s: Explain says allocatable %v on %q; old algorithm %v, %v", step, c.Name, ex.Allocatable, ex.Node, wantResult, wantErr)
			}
		}
		if err == nil {
			w.inFlight.Insert(c.UID)
			if w.pick(2) == 0 {
				w.inFlight.Delete(c.UID)
				a.Release(c.UID)
			}
		}
	}
	w.check(step)
}

func (w *world) compareAllocation(step int, c *resourcev1.ResourceClaim, got *resourcev1.AllocationResult, err error, want *resourcev1.AllocationResult, wantErr error) {
	w.t.Helper()
	var u, wantU *Unsatisfiable
	switch {
	case err == nil && wantErr == nil:
		w.allocations++
		if !reflect.DeepEqual(withoutShareIDs(got), withoutShareIDs(want)) {
			w.t.Fatalf("step %d: claim %s: Allocate = %+v, old algorithm %+v", step, c.Name, got, want)
		}
	case errors.As(err, &u) && errors.As(wantErr, &wantU):
		w.unsatisfiable++
		if u.Reason != wantU.Reason {
			w.t.Fatalf("step %d: claim %s: Allocate: %v, old algorithm: %v", step, c.Name, err, wantErr)
		}
	default:
		w.t.Fatalf("step %d: claim %s: Allocate = %v, %v; old algorithm %v, %v", step, c.Name, got, err, want, wantErr)
	}
}

// selectsNode reports whether r is for node: its node selector selects it by name, or r is not
// bound to one node (devices of slices for all nodes).
func selectsNode(r *resourcev1.AllocationResult, node string) bool {
	if r.NodeSelector == nil {
		return true
	}
	terms := r.NodeSelector.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 {
		return true
	}
	return slices.Equal(terms[0].MatchFields[0].Values, []string{node})
}

// withoutShareIDs clears the share IDs, which the allocator generates at random.
func withoutShareIDs(r *resourcev1.AllocationResult) *resourcev1.AllocationResult {
	r = r.DeepCopy()
	for i := range r.Devices.Results {
		if r.Devices.Results[i].ShareID != nil {
			r.Devices.Results[i].ShareID = ptr.To(types.UID("x"))
		}
	}
	return r
}

// oracleReserve is Reserve's conflict check as it was: against the owner of every device.
func (w *world) oracleReserve(uid types.UID, alloc *resourcev1.AllocationResult) error {
	a := w.a
	a.mu.RLock()
	defer a.mu.RUnlock()
	owners := a.ownersLocked(uid)
	for _, r := range alloc.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) || (a.features.ConsumableCapacity && r.ShareID != nil) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if owner, taken := owners[id]; taken {
			return fmt.Errorf("device %s is already allocated to %s", id, owner)
		}
	}
	return nil
}

// check compares the maintained state with a rebuild from scratch.
func (w *world) check(step int) {
	t, a := w.t, w.a
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d: "+format, append([]any{step}, args...)...)
	}
	a.allocMu.Lock()
	defer a.allocMu.Unlock()
	a.mu.RLock()
	defer a.mu.RUnlock()

	if got := sets.KeySet(a.inFlight); !got.Equal(w.inFlight) {
		fail("in flight: %v, want %v", sets.List(got), sets.List(w.inFlight))
	}

	// Holdings against snapshotLocked, which rebuilds them from the claims and reservations.
	want := a.snapshotLocked("").state
	got := a.held.state
	if !got.AllocatedDevices.Equal(want.AllocatedDevices) {
		fail("allocated devices %v, rebuilt %v", sets.List(ids(got.AllocatedDevices)), sets.List(ids(want.AllocatedDevices)))
	}
	if !got.AllocatedSharedDeviceIDs.Equal(want.AllocatedSharedDeviceIDs) {
		fail("shared device IDs %v, rebuilt %v", got.AllocatedSharedDeviceIDs, want.AllocatedSharedDeviceIDs)
	}
	if len(got.AggregatedCapacity) != len(want.AggregatedCapacity) {
		fail("consumed capacity %v, rebuilt %v", got.AggregatedCapacity, want.AggregatedCapacity)
	}
	for id, wc := range want.AggregatedCapacity {
		gc, ok := got.AggregatedCapacity[id]
		if !ok || len(gc) != len(wc) {
			fail("consumed capacity of %s: %v, rebuilt %v", id, gc, wc)
		}
		for name, q := range wc {
			if gc[name] == nil || gc[name].Cmp(*q) != 0 {
				fail("consumed capacity %s of %s: %v, rebuilt %v", name, id, gc[name], q)
			}
		}
	}
	// Owners, with and without a claim's own devices.
	excepts := []types.UID{"", "nobody"}
	for _, c := range a.claims {
		excepts = append(excepts, c.UID)
	}
	for uid := range a.inFlight {
		excepts = append(excepts, uid)
	}
	for _, except := range excepts {
		owners := a.ownersLocked(except)
		for id := range a.held.owners {
			ref, ok := a.held.conflict(id, except)
			if _, want := owners[id]; ok != want {
				fail("except %q: device %s held by %v, rebuilt owners %v", except, id, a.held.owners[id], owners[id])
			}
			// With several holders the rebuilt owner is an in-flight one if there is one,
			// otherwise any.
			if ok && (ref.owner() != owners[id] && len(a.held.owners[id]) == 1 ||
				ref.inFlight != strings.HasPrefix(owners[id], "in-flight ")) {
				fail("device %s: owner %q, rebuilt %q", id, ref.owner(), owners[id])
			}
		}
		for id := range owners {
			if _, ok := a.held.conflict(id, except); !ok {
				fail("except %q: device %s owned by %s, not held", except, id, owners[id])
			}
		}
	}

	// The cached view against a sort of the store's maps.
	snap := a.allocationSnapshotLocked()
	v := snap.view
	var sortedSlices []*compactslice.Slice
	for _, sl := range a.slices {
		sortedSlices = append(sortedSlices, sl)
	}
	sort.Slice(sortedSlices, func(i, j int) bool { return sortedSlices[i].Name < sortedSlices[j].Name })
	var sortedNodes []*corev1.Node
	for _, n := range a.nodes {
		sortedNodes = append(sortedNodes, n)
	}
	sort.Slice(sortedNodes, func(i, j int) bool { return sortedNodes[i].Name < sortedNodes[j].Name })
	if !slices.Equal(v.slices, sortedSlices) || !slices.Equal(v.nodes, sortedNodes) {
		fail("view slices %v nodes %v, want %v %v", sliceNames(v.slices), nodeNames(v.nodes), sliceNames(sortedSlices), nodeNames(sortedNodes))
	}
	wantCandidates := oldCandidateNodes(sortedSlices, sortedNodes)
	if !slices.Equal(v.candidates, wantCandidates) {
		fail("candidates %v, want %v", nodeNames(v.candidates), nodeNames(wantCandidates))
	}
	nodes := sets.New[string]()
	for _, n := range sortedNodes {
		nodes.Insert(n.Name)
	}
	for _, sl := range sortedSlices {
		nodes.Insert(sl.NodeName())
	}
	for _, node := range sets.List(nodes) {
		if got, want := sliceNames(v.slicesFor(node)), sliceNames(oldSlicesFor(sortedSlices, node)); !slices.Equal(got, want) {
			fail("slices for node %q: %v, want %v", node, got, want)
		}
		if node == "" {
			continue
		}
		if got, rebuilt := a.held.hasFreeDevice(node), oldHasFree(sortedSlices, want.AllocatedDevices, node); got != rebuilt {
			fail("node %s has a free device: %v, rebuilt %v", node, got, rebuilt)
		}
	}
	if v.free != nil {
		for i, n := range v.candidates {
			if v.free[i] != a.held.nodes[n.Name] {
				fail("node %s: stale device counts in the view", n.Name)
			}
		}
	} else if len(v.nonLocal) == 0 {
		fail("view without device counts")
	}
}

func ids(s sets.Set[structured.DeviceID]) sets.Set[string] {
	out := sets.New[string]()
	for id := range s {
		out.Insert(id.String())
	}
	return out
}

func sliceNames(list []*compactslice.Slice) []string {
	var out []string
	for _, sl := range list {
		out = append(out, sl.Name)
	}
	return out
}

func nodeNames(list []*corev1.Node) []string {
	var out []string
	for _, n := range list {
		out = append(out, n.Name+"@"+n.Labels["step"])
	}
	return out
}

// What follows is the allocation algorithm before the view and holdings: a full snapshot per
// claim, and scans of all slices for candidates, free devices and each node's slices.

func oldCandidateNodes(sorted []*compactslice.Slice, nodes []*corev1.Node) []*corev1.Node {
	local := sets.New[string]()
	for _, sl := range sorted {
		name := sl.NodeName()
		if name == "" {
			return nodes
		}
		local.Insert(name)
	}
	var out []*corev1.Node
	for _, n := range nodes {
		if local.Has(n.Name) {
			out = append(out, n)
		}
	}
	return out
}

func oldHasFree(sorted []*compactslice.Slice, allocated sets.Set[structured.DeviceID], node string) bool {
	for _, sl := range sorted {
		if sl.NodeName() != node {
			continue
		}
		for i := range sl.Len() {
			if sl.AllowsMultipleAllocations(i) || !allocated.Has(structured.MakeDeviceID(sl.Driver(), sl.Pool().Name, sl.DeviceName(i))) {
				return true
			}
		}
	}
	return false
}

func oldWithFreeDevices(sorted []*compactslice.Slice, allocated sets.Set[structured.DeviceID], nodes []*corev1.Node) []*corev1.Node {
	for _, sl := range sorted {
		if sl.NodeName() == "" {
			return nodes
		}
	}
	var out []*corev1.Node
	for _, n := range nodes {
		if oldHasFree(sorted, allocated, n.Name) {
			out = append(out, n)
		}
	}
	return out
}

func oldSlicesFor(sorted []*compactslice.Slice, node string) []*compactslice.Slice {
	var out []*compactslice.Slice
	for _, sl := range sorted {
		if n := sl.NodeName(); n == node || n == "" {
			out = append(out, sl)
		}
	}
	found := map[poolID]int64{}
	for _, sl := range out {
		found[poolID{sl.Driver(), sl.Pool().Name}]++
	}
	incomplete := sets.New[poolID]()
	for _, sl := range out {
		if id := (poolID{sl.Driver(), sl.Pool().Name}); found[id] != sl.Pool().ResourceSliceCount {
			incomplete.Insert(id)
		}
	}
	if len(incomplete) > 0 {
		out = nil
		for _, sl := range sorted {
			if n := sl.NodeName(); n == node || n == "" || incomplete.Has(poolID{sl.Driver(), sl.Pool().Name}) {
				out = append(out, sl)
			}
		}
	}
	return out
}

// oracleAllocate is what Allocate returned before (without reserving anything).
func oracleAllocate(ctx context.Context, a *Allocator, claim *resourcev1.ResourceClaim) (*resourcev1.AllocationResult, error) {
	a.mu.RLock()
	snap := a.snapshotLocked("")
	a.mu.RUnlock()
	claim = withDefaults(claim)
	sorted := slices.Clone(snap.slices)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	nodes := slices.Clone(snap.nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	if _, err := a.newStructured(snap, claim); err != nil {
		return nil, err
	}
	candidates := oldCandidateNodes(sorted, nodes)
	nodes = candidates
	if !usesAdminAccess(claim) {
		nodes = oldWithFreeDevices(sorted, snap.state.AllocatedDevices, nodes)
	}
	var nodeErr error
	for _, node := range nodes {
		var typed []*resourcev1.ResourceSlice
		for _, sl := range oldSlicesFor(sorted, node.Name) {
			typed = append(typed, snap.typed(sl))
		}
		alloc, err := structured.NewAllocator(ctx, a.features, snap.state, snap, typed, a.celCache)
		if err != nil {
			return nil, err
		}
		results, err := alloc.Allocate(ctx, node, []*resourcev1.ResourceClaim{claim})
		switch {
		case err == nil && len(results) == 1:
			return &results[0], nil
		case err == nil:
		case errors.Is(err, structured.ErrFailedAllocationOnNode):
			nodeErr = fmt.Errorf("node %s: %w", node.Name, err)
		default:
			return nil, &Unsatisfiable{Reason: err.Error(), Err: err}
		}
	}
	switch {
	case len(nodes) == 0 && len(candidates) > 0:
		return nil, &Unsatisfiable{Reason: "no node has a free device"}
	case len(nodes) == 0:
		return nil, &Unsatisfiable{Reason: "no observed node has ResourceSlices"}
	case nodeErr != nil:
		return nil, &Unsatisfiable{Reason: fmt.Sprintf("no node fits (tried %d): %v", len(nodes), nodeErr), Err: nodeErr}
	default:
		return nil, &Unsatisfiable{Reason: fmt.Sprintf("no node has enough free devices matching all requests (tried %d)", len(nodes))}
	}
}
