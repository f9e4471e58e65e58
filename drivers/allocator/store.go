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
	// Objects are the slices, classes, nodes and DeviceTaintRules the allocator reads; nil
	// gives it a Store of its own (Allocator.Store) for the caller to fill.
	Objects Objects
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

	// objects are the cluster's slices, classes, nodes and DeviceTaintRules, read, never copied.
	objects Objects
	// Store is the allocator's own Objects when Options.Objects is nil (nil otherwise): the
	// caller fills it (UpsertSlice, ...).
	*Store

	mu       sync.RWMutex
	claims   map[string]observedClaim // by namespace/name
	inFlight map[types.UID]reservation
}

// reservation is an allocation that was (or is about to be) written but is not yet observed.
type reservation struct {
	claim      string // namespace/name, "" when reserved by UID only
	allocation *resourcev1.AllocationResult
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
	a := &Allocator{
		features:          features,
		taintRulesEnabled: !opts.IgnoreDeviceTaintRules,
		celCache:          cel.NewCache(size, featuregates.CEL(features)),
		objects:           opts.Objects,
		claims:            map[string]observedClaim{},
		inFlight:          map[types.UID]reservation{},
	}
	if a.objects == nil {
		a.Store = NewStore()
		a.objects = a.Store
	}
	return a
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

// UpsertClaim records an added or updated ResourceClaim. An in-flight reservation for the claim
// is dropped once the claim shows the same allocation, because from then on the observed claim
// accounts for its devices. A reservation for a different allocation is kept (both are counted)
// until Release: the write that carries it is expected to fail.
func (a *Allocator) UpsertClaim(claim *resourcev1.ResourceClaim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := claimKey(claim)
	if old, ok := a.claims[key]; ok && old.UID != claim.UID {
		delete(a.inFlight, old.UID) // the claim was recreated: the old one is gone
	}
	a.claims[key] = observedClaim{UID: claim.UID, Deleting: claim.DeletionTimestamp != nil, Held: heldDevices(claim.Status.Allocation)}
	if r, ok := a.inFlight[claim.UID]; ok && claim.Status.Allocation != nil &&
		sameDevices(r.allocation, claim.Status.Allocation) {
		delete(a.inFlight, claim.UID)
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
		delete(a.claims, key)
	}
	delete(a.inFlight, claim.UID)
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
	owners := a.ownersLocked(claimUID)
	for _, r := range allocation.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) || (a.features.ConsumableCapacity && r.ShareID != nil) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if owner, taken := owners[id]; taken {
			return fmt.Errorf("device %s is already allocated to %s", id, owner)
		}
	}
	if key == "" {
		key = a.claimKeyByUIDLocked(claimUID)
	}
	a.inFlight[claimUID] = reservation{claim: key, allocation: allocation.DeepCopy()}
	return nil
}

// Release drops the in-flight reservation for claimUID, for example after a failed status write.
func (a *Allocator) Release(claimUID types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.inFlight, claimUID)
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
		add(heldDevices(r.allocation), owner)
	}
	return owners
}

// snapshot is a view of the store taken under the read lock. It is used by one goroutine.
type snapshot struct {
	slices []*compactslice.Slice // sorted by name
	// expanded are the slices expanded to the API type so far (see typed).
	expanded map[*compactslice.Slice]*resourcev1.ResourceSlice
	classes  map[string]*resourcev1.DeviceClass
	nodes    []*corev1.Node // all observed nodes, sorted by name
	state    structured.AllocatedState
	owners   map[structured.DeviceID]string
	// consumed is the capacity taken from shared devices, per device (explain only).
	consumed map[structured.DeviceID]map[resourcev1.QualifiedName]resource.Quantity
	// taintRules are applied to every slice the snapshot expands.
	taintRules []*resourcev1.DeviceTaintRule
}

// snapshotLocked takes a snapshot; the in-flight reservation of the claim with UID except, if
// any, is left out, so that claim is seen as holding no devices.
func (a *Allocator) snapshotLocked(except types.UID) *snapshot {
	s := &snapshot{
		expanded:   map[*compactslice.Slice]*resourcev1.ResourceSlice{},
		classes:    map[string]*resourcev1.DeviceClass{},
		owners:     a.ownersLocked(except),
		consumed:   map[structured.DeviceID]map[resourcev1.QualifiedName]resource.Quantity{},
		taintRules: a.taintRulesLocked(),
		state: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
	}
	s.slices = sortedByName(a.objects.Slices(), func(sl *compactslice.Slice) string { return sl.Name })
	for _, c := range a.objects.Classes() {
		s.classes[c.Name] = c
	}
	s.nodes = sortedByName(a.objects.Nodes(), func(n *corev1.Node) string { return n.Name })

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
			add(heldDevices(r.allocation))
		}
	}
	return s
}

// candidateNodes returns the observed nodes the claim could be allocated on: nodes with
// node-local slices, or every node when some slice is not bound to a single node.
func (s *snapshot) candidateNodes() []*corev1.Node {
	local := sets.New[string]()
	for _, sl := range s.slices {
		name := sl.NodeName()
		if name == "" {
			return s.nodes
		}
		local.Insert(name)
	}
	var out []*corev1.Node
	for _, n := range s.nodes {
		if local.Has(n.Name) {
			out = append(out, n)
		}
	}
	return out
}

// withFreeDevices drops the nodes whose devices are all exclusively allocated (observed or in
// flight), so a claim does not run the structured allocator on nodes that cannot give it
// anything. It keeps a node when any of its devices is free or allows multiple allocations,
// and keeps every node when some slice is not node-local. Callers must not use it for claims
// with admin access, which may use allocated devices.
func (s *snapshot) withFreeDevices(nodes []*corev1.Node) []*corev1.Node {
	free := sets.New[string]()
	for _, sl := range s.slices {
		name := sl.NodeName()
		if name == "" {
			return nodes
		}
		if free.Has(name) {
			continue
		}
		for i := range sl.Len() {
			if sl.AllowsMultipleAllocations(i) ||
				!s.state.AllocatedDevices.Has(structured.MakeDeviceID(sl.Driver(), sl.Pool().Name, sl.DeviceName(i))) {
				free.Insert(name)
				break
			}
		}
	}
	out := nodes[:0:0]
	for _, n := range nodes {
		if free.Has(n.Name) {
			out = append(out, n)
		}
	}
	return out
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
// node: the node's own slices, the slices not bound to one node and, for a pool that these do
// not show complete, the pool's other slices (the allocator then checks completeness over them).
// Any superset gives the same result; this one expands a few slices per node instead of all.
func (s *snapshot) slicesFor(node string) []*resourcev1.ResourceSlice {
	var out []*compactslice.Slice
	for _, sl := range s.slices {
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
		out = out[:0]
		for _, sl := range s.slices {
			if n := sl.NodeName(); n == node || n == "" || incomplete.Has(poolID{sl.Driver(), sl.Pool().Name}) {
				out = append(out, sl)
			}
		}
	}
	typed := make([]*resourcev1.ResourceSlice, len(out))
	for i, sl := range out {
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

// sortedByName sorts objs by name in place (the views list in any order; snapshots, and so
// explain, need a fixed one) and returns them.
func sortedByName[T any](objs []T, name func(T) string) []T {
	sort.Slice(objs, func(i, j int) bool { return name(objs[i]) < name(objs[j]) })
	return objs
}
