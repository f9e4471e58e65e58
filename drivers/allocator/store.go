// Package allocator is the pure allocation core of DRAForge: a store fed from informer events,
// an in-memory record of allocations written but not yet observed, and thin glue around the
// scheduler's own structured allocator (k8s.io/dynamic-resource-allocation/structured). It does
// no API I/O: the engine feeds it objects and persists the results it returns.
package allocator

import (
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/featuregates"
)

// DefaultFeatures are kube-scheduler's allocator features with the default feature gates of
// Kubernetes 1.37 (featuregates.Defaults): admin access, prioritized lists, partitionable
// devices, device taints, binding conditions with device status, consumable capacity with
// fractional ranges. They select the allocator's "incubating" implementation, as in the
// scheduler; a cluster with other gates passes its own (controller --feature-gates).
var DefaultFeatures = featuregates.Defaults().Allocator()

// DefaultCELCacheSize bounds the number of compiled CEL expressions kept across calls.
const DefaultCELCacheSize = 256

// Options configure an Allocator. The zero value is valid.
type Options struct {
	// Features overrides DefaultFeatures.
	Features *structured.Features
	// CELCacheSize overrides DefaultCELCacheSize.
	CELCacheSize int
	// IgnoreDeviceTaintRules leaves DeviceTaintRules out, as kube-scheduler does with the
	// DRADeviceTaintRules gate off (featuregates.Gates.DeviceTaintRules).
	IgnoreDeviceTaintRules bool
}

// Allocator holds the observed cluster state relevant to DRA and allocates claims against it.
// All methods are safe for concurrent use. Objects passed in are never modified and must not be
// modified by the caller afterwards (informer cache objects satisfy this).
type Allocator struct {
	features          structured.Features
	taintRulesEnabled bool
	celCache          *cel.Cache

	// allocMu serializes "compute an allocation + record it in flight", so two callers can
	// never pick the same device. It is always taken before mu.
	allocMu sync.Mutex

	mu       sync.RWMutex
	slices   map[string]*compactslice.Slice     // by name, the informer's own objects
	classes  map[string]*resourcev1.DeviceClass // by name
	claims   map[string]observedClaim           // by namespace/name
	nodes    map[string]*corev1.Node            // by name
	inFlight map[types.UID]reservation
	// taintRules are the DeviceTaintRules by name, applied to slices in snapshots.
	taintRules map[string]*resourcev1.DeviceTaintRule

	// held is the device accounting of claims and inFlight, kept up to date with them.
	held *holdings
	// view is slices and nodes sorted and indexed, nil when it must be rebuilt. Writers (under
	// mu's write lock) set it to nil or patch it; Allocate reads and rebuilds it holding allocMu
	// and mu's read lock. allocMu makes Allocate its only reader, so rebuilding under the read
	// lock races with nothing: writers wait for the read lock, other Allocates for allocMu.
	view *view
}

// reservation is an allocation that was (or is about to be) written but is not yet observed.
type reservation struct {
	claim      string // namespace/name, "" when reserved by UID only
	allocation *resourcev1.AllocationResult
	held       []heldDevice // heldDevices(allocation)
}

// New returns an empty Allocator.
func New(opts Options) *Allocator {
	features := DefaultFeatures
	if opts.Features != nil {
		features = *opts.Features
	}
	size := opts.CELCacheSize
	if size <= 0 {
		size = DefaultCELCacheSize
	}
	return &Allocator{
		features:          features,
		taintRulesEnabled: !opts.IgnoreDeviceTaintRules,
		celCache:          cel.NewCache(size, featuregates.CEL(features)),
		taintRules:        map[string]*resourcev1.DeviceTaintRule{},
		slices:            map[string]*compactslice.Slice{},
		classes:           map[string]*resourcev1.DeviceClass{},
		claims:            map[string]observedClaim{},
		nodes:             map[string]*corev1.Node{},
		inFlight:          map[types.UID]reservation{},
		held:              newHoldings(features.ConsumableCapacity),
	}
}

// observedClaim is what the store reads back of an observed claim: identity and the devices it
// holds. A typed claim per cached claim (spec, node selector, timestamps) would repeat what the
// informer already caches.
type observedClaim struct {
	UID      types.UID
	Deleting bool
	// Held is nil when the claim is not allocated.
	Held []heldDevice
}

// heldDevice is one allocated device with the fields device accounting reads.
type heldDevice struct {
	Driver, Pool, Device string
	AdminAccess          bool
	ShareID              *types.UID
	ConsumedCapacity     map[resourcev1.QualifiedName]resource.Quantity
}

// heldDevices returns the devices of alloc (nil when alloc is nil, an empty slice when it holds none).
func heldDevices(alloc *resourcev1.AllocationResult) []heldDevice {
	if alloc == nil {
		return nil
	}
	out := make([]heldDevice, len(alloc.Devices.Results))
	for i, r := range alloc.Devices.Results {
		out[i] = heldDevice{Driver: r.Driver, Pool: r.Pool, Device: r.Device, AdminAccess: ptr.Deref(r.AdminAccess, false),
			ShareID: r.ShareID, ConsumedCapacity: r.ConsumedCapacity}
	}
	return out
}

func claimKey(claim *resourcev1.ResourceClaim) string {
	return claim.Namespace + "/" + claim.Name
}

// UpsertSlice records an added or updated ResourceSlice.
func (a *Allocator) UpsertSlice(slice *compactslice.Slice) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.slices[slice.Name]; ok {
		a.held.removeSlice(old)
	}
	a.slices[slice.Name] = slice
	a.held.addSlice(slice)
	a.view = nil
}

// DeleteSlice forgets a ResourceSlice.
func (a *Allocator) DeleteSlice(slice *compactslice.Slice) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.slices[slice.Name]; ok {
		a.held.removeSlice(old)
		delete(a.slices, slice.Name)
		a.view = nil
	}
}

// UpsertClass records an added or updated DeviceClass.
func (a *Allocator) UpsertClass(class *resourcev1.DeviceClass) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.classes[class.Name] = class
}

// DeleteClass forgets a DeviceClass.
func (a *Allocator) DeleteClass(class *resourcev1.DeviceClass) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.classes, class.Name)
}

// UpsertNode records an added or updated Node. Only observed nodes are allocation targets.
func (a *Allocator) UpsertNode(node *corev1.Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, known := a.nodes[node.Name]
	a.nodes[node.Name] = node
	if !known || (a.view != nil && !a.view.replaceNode(node)) {
		a.view = nil
	}
}

// DeleteNode forgets a Node.
func (a *Allocator) DeleteNode(node *corev1.Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.nodes[node.Name]; ok {
		delete(a.nodes, node.Name)
		a.view = nil
	}
}

// UpsertClaim records an added or updated ResourceClaim. An in-flight reservation for the claim
// is dropped once the claim shows the same allocation, because from then on the observed claim
// accounts for its devices. A reservation for a different allocation is kept (both are counted)
// until Release: the write that carries it is expected to fail.
func (a *Allocator) UpsertClaim(claim *resourcev1.ResourceClaim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := claimKey(claim)
	if old, ok := a.claims[key]; ok {
		a.held.remove(old.Held, holdRef{uid: old.UID, claim: key})
		if old.UID != claim.UID {
			a.releaseLocked(old.UID) // the claim was recreated: the old one is gone
		}
	}
	c := observedClaim{UID: claim.UID, Deleting: claim.DeletionTimestamp != nil, Held: heldDevices(claim.Status.Allocation)}
	a.claims[key] = c
	a.held.add(c.Held, holdRef{uid: c.UID, claim: key})
	if r, ok := a.inFlight[claim.UID]; ok && claim.Status.Allocation != nil &&
		sameDevices(r.allocation, claim.Status.Allocation) {
		a.releaseLocked(claim.UID)
	}
}

// PendingClaims returns the namespace/name keys of the observed claims that are neither
// allocated nor being deleted: the only claims new devices or classes can make a difference to.
func (a *Allocator) PendingClaims() []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []string
	for key, c := range a.claims {
		if c.Held == nil && !c.Deleting {
			out = append(out, key)
		}
	}
	return out
}

// DeleteClaim forgets a ResourceClaim and any in-flight reservation for it.
func (a *Allocator) DeleteClaim(claim *resourcev1.ResourceClaim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := claimKey(claim)
	if old, ok := a.claims[key]; ok && old.UID == claim.UID {
		a.held.remove(old.Held, holdRef{uid: old.UID, claim: key})
		delete(a.claims, key)
	}
	a.releaseLocked(claim.UID)
}

// Reserve records an allocation for claimUID as in flight, so no other allocation takes its
// devices. Call it before issuing the status write and Release if the write fails; Allocate
// already does this for the results it returns. It fails if an exclusively allocated device is
// already allocated to another claim or in flight for one.
func (a *Allocator) Reserve(claimUID types.UID, allocation *resourcev1.AllocationResult) error {
	a.allocMu.Lock()
	defer a.allocMu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reserveLocked(claimUID, "", allocation)
}

func (a *Allocator) reserveLocked(claimUID types.UID, key string, allocation *resourcev1.AllocationResult) error {
	for _, r := range allocation.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) || (a.features.ConsumableCapacity && r.ShareID != nil) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if owner, taken := a.held.conflict(id, claimUID); taken {
			return fmt.Errorf("device %s is already allocated to %s", id, owner.owner())
		}
	}
	if key == "" {
		key = a.claimKeyByUIDLocked(claimUID)
	}
	a.releaseLocked(claimUID) // a reservation replaced by this one
	r := reservation{claim: key, allocation: allocation.DeepCopy()}
	r.held = heldDevices(r.allocation)
	a.inFlight[claimUID] = r
	a.held.add(r.held, holdRef{uid: claimUID, claim: key, inFlight: true})
	return nil
}

// Release drops the in-flight reservation for claimUID, for example after a failed status write.
func (a *Allocator) Release(claimUID types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(claimUID)
}

// releaseLocked drops the in-flight reservation for claimUID, if any, and the devices it holds.
func (a *Allocator) releaseLocked(claimUID types.UID) {
	if r, ok := a.inFlight[claimUID]; ok {
		a.held.remove(r.held, holdRef{uid: claimUID, claim: r.claim, inFlight: true})
		delete(a.inFlight, claimUID)
	}
}

// InFlight reports whether an allocation for claimUID is reserved but not yet observed.
func (a *Allocator) InFlight(claimUID types.UID) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	_, ok := a.inFlight[claimUID]
	return ok
}

func (a *Allocator) claimKeyByUIDLocked(uid types.UID) string {
	for key, c := range a.claims {
		if c.UID == uid {
			return key
		}
	}
	return ""
}

// sameDevices compares the device results of two allocations (request, device and share),
// ignoring fields the API server may normalize.
func sameDevices(x, y *resourcev1.AllocationResult) bool {
	key := func(r resourcev1.DeviceRequestAllocationResult) string {
		return r.Request + "\x00" + r.Driver + "\x00" + r.Pool + "\x00" + r.Device + "\x00" + string(ptr.Deref(r.ShareID, ""))
	}
	if len(x.Devices.Results) != len(y.Devices.Results) {
		return false
	}
	xs := sets.New[string]()
	for _, r := range x.Devices.Results {
		xs.Insert(key(r))
	}
	for _, r := range y.Devices.Results {
		if !xs.Has(key(r)) {
			return false
		}
	}
	return true
}

// ownersLocked maps every exclusively allocated device (observed or in flight) to a description
// of its owner, skipping the claim with UID except.
func (a *Allocator) ownersLocked(except types.UID) map[structured.DeviceID]string {
	owners := map[structured.DeviceID]string{}
	add := func(held []heldDevice, owner string) {
		for _, r := range held {
			if r.AdminAccess || (a.features.ConsumableCapacity && r.ShareID != nil) {
				continue
			}
			owners[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)] = owner
		}
	}
	for key, c := range a.claims {
		if except == "" || c.UID != except {
			add(c.Held, "claim "+key)
		}
	}
	for uid, r := range a.inFlight {
		if except != "" && uid == except {
			continue
		}
		owner := "in-flight claim " + r.claim
		if r.claim == "" {
			owner = "in-flight claim uid " + string(uid)
		}
		add(r.held, owner)
	}
	return owners
}

// snapshot is what one claim is allocated or explained against. It is used by one goroutine.
// Explain takes a full snapshot (snapshotLocked): copies, valid after the lock is released.
// Allocate takes a light one (allocationSnapshotLocked) that shares the store's cached view,
// classes and holdings: it is valid only while the store's read lock is held.
type snapshot struct {
	view   *view
	slices []*compactslice.Slice // view.slices: all, sorted by name
	nodes  []*corev1.Node        // view.nodes: all observed nodes, sorted by name
	// expanded are the slices expanded to the API type so far (see typed).
	expanded map[*compactslice.Slice]*resourcev1.ResourceSlice
	classes  map[string]*resourcev1.DeviceClass
	state    structured.AllocatedState
	// owners and consumed are for explain only (nil in an allocation snapshot): the owner of
	// every exclusively held device and the capacity taken from shared devices, per device.
	owners   map[structured.DeviceID]string
	consumed map[structured.DeviceID]map[resourcev1.QualifiedName]resource.Quantity
	// taintRules are applied to every slice the snapshot expands.
	taintRules []*resourcev1.DeviceTaintRule
}

// snapshotLocked takes a full snapshot, rebuilt from the store's maps; the in-flight
// reservation of the claim with UID except, if any, is left out, so that claim is seen as
// holding no devices. Allocate does not use it (see allocationSnapshotLocked); it stays the
// reference for what the incrementally maintained holdings and view must equal.
func (a *Allocator) snapshotLocked(except types.UID) *snapshot {
	s := &snapshot{
		view:       newView(a.slices, a.nodes),
		expanded:   map[*compactslice.Slice]*resourcev1.ResourceSlice{},
		classes:    make(map[string]*resourcev1.DeviceClass, len(a.classes)),
		owners:     a.ownersLocked(except),
		consumed:   map[structured.DeviceID]map[resourcev1.QualifiedName]resource.Quantity{},
		taintRules: a.taintRulesLocked(),
		state: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
	}
	s.slices, s.nodes = s.view.slices, s.view.nodes
	for name, c := range a.classes {
		s.classes[name] = c
	}

	// Same accounting as the scheduler's DRA plugin: admin access does not take a device,
	// shared allocations are tracked by share ID and consumed capacity.
	add := func(held []heldDevice) {
		for _, r := range held {
			if r.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if a.features.ConsumableCapacity && r.ShareID != nil {
				s.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					s.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
					if s.consumed[id] == nil {
						s.consumed[id] = map[resourcev1.QualifiedName]resource.Quantity{}
					}
					for name, q := range r.ConsumedCapacity {
						sum := s.consumed[id][name]
						sum.Add(q)
						s.consumed[id][name] = sum
					}
				}
				continue
			}
			s.state.AllocatedDevices.Insert(id)
		}
	}
	for _, c := range a.claims {
		add(c.Held)
	}
	for uid, r := range a.inFlight {
		if except == "" || uid != except {
			add(r.held)
		}
	}
	return s
}

// allocationSnapshotLocked returns a snapshot sharing the store's cached view (rebuilt here if
// a slice or node was added or removed), classes and holdings, with every in-flight
// reservation counted. Nothing is copied, so it costs the same at any cluster size, and it is
// valid only while the caller holds mu's read lock, which keeps every writer out, and allocMu,
// which makes the caller the only one to rebuild the view (see Allocator.view).
func (a *Allocator) allocationSnapshotLocked() *snapshot {
	if a.view == nil {
		v := newView(a.slices, a.nodes)
		if len(v.nonLocal) == 0 {
			// Every candidate has node-local slices, so holdings has its (never deleted) counts.
			v.free = make([]*nodeDevices, len(v.candidates))
			for i, n := range v.candidates {
				v.free[i] = a.held.nodes[n.Name]
			}
		}
		a.view = v
	}
	return &snapshot{
		view:       a.view,
		slices:     a.view.slices,
		nodes:      a.view.nodes,
		expanded:   map[*compactslice.Slice]*resourcev1.ResourceSlice{},
		classes:    a.classes,
		state:      a.held.state,
		taintRules: a.taintRulesLocked(),
	}
}

// candidateNodes returns the observed nodes the claim could be allocated on: nodes with
// node-local slices, or every node when some slice is not bound to a single node.
func (s *snapshot) candidateNodes() []*corev1.Node {
	return s.view.candidates
}

// typed returns sl as the API type with the DeviceTaintRules applied, expanding it once per
// snapshot.
func (s *snapshot) typed(sl *compactslice.Slice) *resourcev1.ResourceSlice {
	t, ok := s.expanded[sl]
	if !ok {
		t = sl.Expand()
		applyTaintRules(t, s.taintRules)
		s.expanded[sl] = t
	}
	return t
}

// allTyped returns every slice as the API type.
func (s *snapshot) allTyped() []*resourcev1.ResourceSlice {
	out := make([]*resourcev1.ResourceSlice, len(s.slices))
	for i, sl := range s.slices {
		out[i] = s.typed(sl)
	}
	return out
}

// slicesFor returns, as the API type, what the structured allocator reads when it allocates on
// node (view.slicesFor).
func (s *snapshot) slicesFor(node string) []*resourcev1.ResourceSlice {
	slices := s.view.slicesFor(node)
	typed := make([]*resourcev1.ResourceSlice, len(slices))
	for i, sl := range slices {
		typed[i] = s.typed(sl)
	}
	return typed
}

// poolID is a DRA pool: pool names are unique per driver.
type poolID struct{ driver, pool string }

// List serves DeviceClasses from the snapshot (structured.DeviceClassLister).
func (s *snapshot) List() ([]*resourcev1.DeviceClass, error) {
	out := make([]*resourcev1.DeviceClass, 0, len(s.classes))
	for _, c := range s.classes {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns the named DeviceClass or a NotFound error.
func (s *snapshot) Get(name string) (*resourcev1.DeviceClass, error) {
	if c, ok := s.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

var _ structured.DeviceClassLister = (*snapshot)(nil)
