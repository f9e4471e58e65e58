package allocator

import (
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/draforge/draforge/drivers/compactslice"
)

// holdRef is who holds a device: an observed claim or an in-flight reservation.
type holdRef struct {
	uid types.UID
	// claim is the claim's namespace/name; "" for a reservation made by UID only.
	claim    string
	inFlight bool
}

// owner describes the holder in conflict messages.
func (r holdRef) owner() string {
	switch {
	case !r.inFlight:
		return "claim " + r.claim
	case r.claim == "":
		return "in-flight claim uid " + string(r.uid)
	default:
		return "in-flight claim " + r.claim
	}
}

// capacityShare is the capacity one holder consumes of a shared device.
type capacityShare struct {
	ref      holdRef
	consumed map[resourcev1.QualifiedName]resource.Quantity
}

// holdings is the device accounting of all observed claims and in-flight reservations,
// maintained as they come and go instead of being rebuilt per allocation. It is guarded by the
// Allocator's mu: changed under the write lock, read (state handed to the structured
// allocator) under the read lock.
type holdings struct {
	consumable bool // features.ConsumableCapacity: shared allocations are told apart by ShareID
	// state is what the structured allocator reads, the same as snapshotLocked("") builds:
	// exclusively held devices, the share IDs of shared ones, and their consumed capacity.
	state structured.AllocatedState
	// owners are the holders of each exclusively held device (a device is in
	// state.AllocatedDevices while it has any).
	owners map[structured.DeviceID][]holdRef
	// shares counts the holders of each share ID (in state.AllocatedSharedDeviceIDs while > 0).
	shares map[structured.SharedDeviceID]int
	// capacity lists the capacity consumed of each shared device, per holder.
	capacity map[structured.DeviceID][]capacityShare

	// Free devices per node, for skipping full nodes: poolSlices are the node-local slices of
	// each pool, where a held device is looked up to find the nodes it counts against (a device
	// may be published by several slices, for example of two pool generations). One entry per
	// slice rather than per device: a map entry per device cost 1.3 KiB per 8-device slice.
	poolSlices map[poolID][]*compactslice.Slice
	// nodes are never deleted, so a view may keep pointers to them (view.free).
	nodes map[string]*nodeDevices
}

// nodeDevices counts the devices in a node's node-local slices.
type nodeDevices struct {
	multi int // allowing multiple allocations: always usable
	plain int // the others
	taken int // of plain, those exclusively held
}

func newHoldings(consumable bool) *holdings {
	return &holdings{
		consumable: consumable,
		state: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
		owners:     map[structured.DeviceID][]holdRef{},
		shares:     map[structured.SharedDeviceID]int{},
		capacity:   map[structured.DeviceID][]capacityShare{},
		poolSlices: map[poolID][]*compactslice.Slice{},
		nodes:      map[string]*nodeDevices{},
	}
}

// add records the devices held by ref, with the scheduler's accounting (as snapshotLocked):
// admin access takes no device, shared allocations count by share ID and consumed capacity.
func (h *holdings) add(held []heldDevice, ref holdRef) {
	for _, r := range held {
		if r.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if h.consumable && r.ShareID != nil {
			sid := structured.MakeSharedDeviceID(id, r.ShareID)
			if h.shares[sid]++; h.shares[sid] == 1 {
				h.state.AllocatedSharedDeviceIDs.Insert(sid)
			}
			if r.ConsumedCapacity != nil {
				h.capacity[id] = append(h.capacity[id], capacityShare{ref: ref, consumed: r.ConsumedCapacity})
				h.sumCapacity(id)
			}
			continue
		}
		h.owners[id] = append(h.owners[id], ref)
		if len(h.owners[id]) == 1 {
			h.state.AllocatedDevices.Insert(id)
			h.countTaken(id, 1)
		}
	}
}

// remove undoes add(held, ref).
func (h *holdings) remove(held []heldDevice, ref holdRef) {
	for _, r := range held {
		if r.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if h.consumable && r.ShareID != nil {
			sid := structured.MakeSharedDeviceID(id, r.ShareID)
			if h.shares[sid]--; h.shares[sid] <= 0 {
				delete(h.shares, sid)
				h.state.AllocatedSharedDeviceIDs.Delete(sid)
			}
			if r.ConsumedCapacity != nil {
				list := h.capacity[id]
				if i := slices.IndexFunc(list, func(s capacityShare) bool { return s.ref == ref }); i >= 0 {
					h.capacity[id] = slices.Delete(list, i, i+1)
				}
				h.sumCapacity(id)
			}
			continue
		}
		list := h.owners[id]
		i := slices.Index(list, ref)
		if i < 0 {
			continue
		}
		if list = slices.Delete(list, i, i+1); len(list) > 0 {
			h.owners[id] = list
			continue
		}
		delete(h.owners, id)
		h.state.AllocatedDevices.Delete(id)
		h.countTaken(id, -1)
	}
}

// sumCapacity recomputes the consumed capacity of a shared device from its holders, the way
// snapshotLocked sums it (an entry exists while some holder records consumed capacity).
func (h *holdings) sumCapacity(id structured.DeviceID) {
	delete(h.state.AggregatedCapacity, id)
	list := h.capacity[id]
	if len(list) == 0 {
		delete(h.capacity, id)
		return
	}
	for _, s := range list {
		h.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, s.consumed))
	}
}

// countTaken adjusts the taken count of every node whose node-local slices publish id without
// allowing multiple allocations, once per such slice.
func (h *holdings) countTaken(id structured.DeviceID, delta int) {
	list := h.poolSlices[poolID{id.Driver.String(), id.Pool.String()}]
	if len(list) == 0 {
		return
	}
	device := id.Device.String()
	for _, sl := range list {
		for i := range sl.Len() {
			if sl.DeviceName(i) == device && !sl.AllowsMultipleAllocations(i) {
				h.nodes[sl.NodeName()].taken += delta
			}
		}
	}
}

// addSlice counts the devices of a node-local slice.
func (h *holdings) addSlice(sl *compactslice.Slice) {
	node := sl.NodeName()
	if node == "" {
		return
	}
	nd := h.nodes[node]
	if nd == nil {
		nd = &nodeDevices{}
		h.nodes[node] = nd
	}
	pool := poolID{sl.Driver(), sl.Pool().Name}
	h.poolSlices[pool] = append(h.poolSlices[pool], sl)
	h.countSlice(nd, sl, 1)
}

// removeSlice undoes addSlice(sl).
func (h *holdings) removeSlice(sl *compactslice.Slice) {
	node := sl.NodeName()
	nd := h.nodes[node]
	if node == "" || nd == nil {
		return
	}
	pool := poolID{sl.Driver(), sl.Pool().Name}
	list := h.poolSlices[pool]
	if j := slices.Index(list, sl); j >= 0 {
		if list = slices.Delete(list, j, j+1); len(list) > 0 {
			h.poolSlices[pool] = list
		} else {
			delete(h.poolSlices, pool)
		}
	}
	h.countSlice(nd, sl, -1)
}

// countSlice adds delta times the devices of sl to its node's counts.
func (h *holdings) countSlice(nd *nodeDevices, sl *compactslice.Slice, delta int) {
	for i := range sl.Len() {
		if sl.AllowsMultipleAllocations(i) {
			nd.multi += delta
			continue
		}
		nd.plain += delta
		if len(h.owners[structured.MakeDeviceID(sl.Driver(), sl.Pool().Name, sl.DeviceName(i))]) > 0 {
			nd.taken += delta
		}
	}
}

// hasFree reports whether some device of the node's node-local slices is not exclusively held
// or allows multiple allocations.
func (nd *nodeDevices) hasFree() bool {
	return nd != nil && (nd.multi > 0 || nd.plain > nd.taken)
}

// hasFreeDevice is hasFree for the named node.
func (h *holdings) hasFreeDevice(node string) bool {
	return h.nodes[node].hasFree()
}

// conflict returns the holder of id that is not the claim with UID except ("" excludes
// nothing), preferring an in-flight reservation (as the owner messages always have).
func (h *holdings) conflict(id structured.DeviceID, except types.UID) (holdRef, bool) {
	var found holdRef
	ok := false
	for _, ref := range h.owners[id] {
		if except != "" && ref.uid == except {
			continue
		}
		if !ok || (ref.inFlight && !found.inFlight) {
			found, ok = ref, true
		}
	}
	return found, ok
}
