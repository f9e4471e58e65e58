package httpapi

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/draforge/draforge/drivers/doctor"
	"github.com/draforge/draforge/drivers/explain"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/resourcegraph"
)

// Change is one object change that led to a new snapshot.
type Change struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Op is add, update or delete.
	Op string `json:"op"`
}

// Change operations.
const (
	OpAdd    = "add"
	OpUpdate = "update"
	OpDelete = "delete"
)

// generation is one published snapshot as serve keeps it at rest: its version, its counts (for
// change events) and the source that builds its view. The view (the typed objects and what is
// derived from them, several times the size of the informers' compact caches) is built when a
// request needs it and dropped once it has been unused for idle, so an idle serve holds only its
// informer caches.
type generation struct {
	version uint64
	builtAt time.Time
	counts  Counts
	source  func() *inventory.Snapshot
	idle    time.Duration

	mu    sync.Mutex
	v     *view // nil while dropped
	used  time.Time
	timer *time.Timer // runs expire while v is kept
}

func newGeneration(version uint64, at time.Time, source func() *inventory.Snapshot, idle time.Duration) *generation {
	g := &generation{version: version, builtAt: at.UTC(), source: source, idle: idle}
	// The counts of the change event need the view once; it is kept only when a request asks
	// for it, so a serve nobody queries holds no typed copy however often the cluster changes.
	g.counts = newView(version, g.builtAt, source()).counts
	return g
}

// view returns the generation's view, building it again if it was dropped, and keeps it for
// another idle period.
func (g *generation) view() *view {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.v == nil {
		g.v = newView(g.version, g.builtAt, g.source())
	}
	g.used = time.Now()
	if g.timer == nil {
		g.timer = time.AfterFunc(g.idle, g.expire)
	}
	return g.v
}

// expire drops the view if it has been unused for idle, or waits for the rest of that time.
func (g *generation) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer == nil { // released meanwhile
		return
	}
	if left := g.idle - time.Since(g.used); left > 0 {
		g.timer.Reset(left)
		return
	}
	g.v, g.timer = nil, nil
}

// release drops the view now: a newer generation replaced this one. Requests that hold the view
// finish with it; a late one builds it again.
func (g *generation) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		g.timer.Stop()
	}
	g.v, g.timer = nil, nil
}

// view is one snapshot and the views derived from it. Everything is computed once per view
// (eagerly for the cheap views, lazily for the graph), never per request.
type view struct {
	version uint64
	builtAt time.Time
	snap    *inventory.Snapshot
	pools   []inventory.PoolView // without device lists
	devices []inventory.DeviceView
	claims  []inventory.ClaimView
	pods    []inventory.PodView
	// occupancy is one row per node (see inventory.Occupancy).
	occupancy []inventory.NodeOccupancy
	counts    Counts

	graphOnce sync.Once
	graph     *resourcegraph.Graph

	// explained keeps claim explanations of this snapshot: one at 1,000 nodes runs the allocator
	// on every node (most of a second), and the dashboard asks again on every change it hears of.
	explainMu sync.Mutex
	explained map[string]*explain.Result
}

// maxExplained bounds the explanations a view keeps (each can be a megabyte at 1,000 nodes).
const maxExplained = 16

// explain explains the claim namespace/name over the view's snapshot, once per snapshot.
func (v *view) explain(ctx context.Context, namespace, name string) (*explain.Result, error) {
	key := namespace + "/" + name
	v.explainMu.Lock()
	defer v.explainMu.Unlock()
	if r, ok := v.explained[key]; ok {
		return r, nil
	}
	r, err := explain.Explain(ctx, v.snap, namespace, name)
	if err != nil {
		return nil, err
	}
	if v.explained == nil {
		v.explained = map[string]*explain.Result{}
	}
	if len(v.explained) < maxExplained {
		v.explained[key] = r
	}
	return r, nil
}

// Counts are the object counts of a snapshot.
type Counts struct {
	SimulatedDevicePools int            `json:"simulatedDevicePools"`
	Pools                int            `json:"pools"`
	ResourceSlices       int            `json:"resourceSlices"`
	Devices              int            `json:"devices"`
	TaintedDevices       int            `json:"taintedDevices"`
	AllocatedDevices     int            `json:"allocatedDevices"`
	DeviceClasses        int            `json:"deviceClasses"`
	Claims               int            `json:"claims"`
	ClaimStates          map[string]int `json:"claimStates"`
	PoolHealth           map[string]int `json:"poolHealth"`
	Pods                 int            `json:"pods"`
	// DRAPods counts the pods with ResourceClaims per phase (Pending, Running, ...).
	DRAPods map[string]int `json:"draPods"`
	Nodes   int            `json:"nodes"`
}

func newView(version uint64, at time.Time, s *inventory.Snapshot) *view {
	v := &view{version: version, builtAt: at.UTC(), snap: s}
	full := inventory.Pools(s, true)
	v.pools = make([]inventory.PoolView, 0, len(full))
	v.devices = []inventory.DeviceView{}
	for _, p := range full {
		v.devices = append(v.devices, p.DeviceList...)
		p.DeviceList = nil
		v.pools = append(v.pools, p)
	}
	slices.SortStableFunc(v.devices, func(a, b inventory.DeviceView) int {
		return cmp.Or(cmp.Compare(a.Driver, b.Driver), cmp.Compare(a.Pool, b.Pool))
	})
	v.claims = inventory.Claims(s)
	v.pods = inventory.Pods(s)
	v.occupancy = inventory.Occupancy(s, v.devices)
	c := Counts{SimulatedDevicePools: len(s.Pools), Pools: len(v.pools), ResourceSlices: len(s.Slices),
		Devices: len(v.devices), DeviceClasses: len(s.Classes), Claims: len(v.claims), Pods: len(s.Pods),
		Nodes: len(s.Nodes), ClaimStates: map[string]int{}, PoolHealth: map[string]int{}}
	for _, p := range v.pools {
		c.TaintedDevices += p.Tainted
		c.AllocatedDevices += p.Allocated
		c.PoolHealth[p.Health]++
	}
	for _, cl := range v.claims {
		c.ClaimStates[cl.State]++
	}
	c.DRAPods = map[string]int{}
	for _, p := range v.pods {
		c.DRAPods[p.Phase]++
	}
	v.counts = c
	return v
}

func (v *view) graphOf() *resourcegraph.Graph {
	v.graphOnce.Do(func() { v.graph = resourcegraph.Build(v.snap) })
	return v.graph
}

// store holds the current generation and the doctor facts, and caches the doctor report per
// (snapshot version, facts version).
type store struct {
	mu           sync.RWMutex
	cur          *generation
	facts        doctor.Facts
	factsAt      time.Time
	factsVersion uint64

	docMu      sync.Mutex
	docKey     [2]uint64
	docReport  *doctor.Report
	docVersion uint64
}

func (st *store) current() *generation {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.cur
}

func (st *store) set(g *generation) {
	st.mu.Lock()
	old := st.cur
	st.cur = g
	st.mu.Unlock()
	if old != nil {
		old.release()
	}
}

func (st *store) setFacts(f doctor.Facts, at time.Time) {
	st.mu.Lock()
	st.facts, st.factsAt = f, at.UTC()
	st.factsVersion++
	st.mu.Unlock()
}

// DoctorReport is /api/doctor: the checks over the current snapshot and the last gathered facts.
type DoctorReport struct {
	*doctor.Report
	SnapshotVersion uint64 `json:"snapshotVersion"`
	// FactsGatheredAt is when discovery, the CRD and the controller were last probed (nil: not
	// yet, so the checks that need them are reported from empty facts).
	FactsGatheredAt *time.Time `json:"factsGatheredAt,omitempty"`
}

func (st *store) doctor(v *view) DoctorReport {
	st.mu.RLock()
	facts, at, fv := st.facts, st.factsAt, st.factsVersion
	st.mu.RUnlock()
	st.docMu.Lock()
	defer st.docMu.Unlock()
	key := [2]uint64{v.version, fv}
	if st.docReport == nil || st.docKey != key {
		st.docReport, st.docKey = doctor.Run(v.snap, facts), key
	}
	r := DoctorReport{Report: st.docReport, SnapshotVersion: v.version}
	if !at.IsZero() {
		r.FactsGatheredAt = &at
	}
	return r
}

func sortChanges(cs []Change) {
	slices.SortFunc(cs, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Op, b.Op))
	})
}
