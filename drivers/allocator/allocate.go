package allocator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Unsatisfiable is returned by Allocate when the claim cannot be allocated with the observed
// devices. Explain tells why in detail.
type Unsatisfiable struct {
	// Reason is a short, human-readable cause.
	Reason string
	// Err is the allocator error behind Reason, if any (for example a CEL runtime error).
	// It is nil when the devices simply do not suffice.
	Err error
}

func (e *Unsatisfiable) Error() string { return "claim cannot be allocated: " + e.Reason }

func (e *Unsatisfiable) Unwrap() error { return e.Err }

// Allocate finds devices for an unallocated claim on the first observed node, in name order,
// where the scheduler's structured allocator can satisfy the whole claim, and records the result
// as in flight before returning it. The caller writes it to the claim's status and must call
// Release(claim.UID) if that write fails; the reservation is dropped by itself once UpsertClaim
// shows the allocation, or DeleteClaim the claim. Calling Allocate again for a claim with an
// in-flight reservation returns that reservation.
//
// It returns *Unsatisfiable when nothing fits, and other errors only for invalid input or a
// cancelled context. Concurrent calls never hand out the same device twice.
func (a *Allocator) Allocate(ctx context.Context, claim *resourcev1.ResourceClaim) (*resourcev1.AllocationResult, error) {
	if claim.UID == "" {
		return nil, fmt.Errorf("claim %s has no UID", claimKey(claim))
	}
	if claim.Status.Allocation != nil {
		return nil, fmt.Errorf("claim %s is already allocated", claimKey(claim))
	}

	a.allocMu.Lock()
	defer a.allocMu.Unlock()

	a.mu.RLock()
	r, pending := a.inFlight[claim.UID]
	snap := a.snapshotLocked("")
	a.mu.RUnlock()
	if pending {
		return r.allocation.DeepCopy(), nil
	}

	alloc, err := a.newStructured(snap, withDefaults(claim))
	if err != nil {
		return nil, err
	}
	nodes := snap.candidateNodes()
	if !usesAdminAccess(claim) {
		nodes = snap.withFreeDevices(nodes)
	}
	var nodeErr error
	for _, node := range nodes {
		result, err := alloc.allocateOn(ctx, node)
		if err != nil {
			if errors.Is(err, structured.ErrFailedAllocationOnNode) {
				nodeErr = err
				continue
			}
			return nil, err
		}
		if result != nil {
			a.mu.Lock()
			defer a.mu.Unlock()
			// Cannot conflict while allocMu is held; checked anyway as a last line of defence.
			if err := a.reserveLocked(claim.UID, claimKey(claim), result); err != nil {
				return nil, fmt.Errorf("internal error: %w", err)
			}
			return result, nil
		}
	}
	switch {
	case len(nodes) == 0 && len(snap.candidateNodes()) > 0:
		return nil, &Unsatisfiable{Reason: "no node has a free device"}
	case len(nodes) == 0:
		return nil, &Unsatisfiable{Reason: "no observed node has ResourceSlices"}
	case nodeErr != nil:
		return nil, &Unsatisfiable{Reason: fmt.Sprintf("no node fits (tried %d): %v", len(nodes), nodeErr), Err: nodeErr}
	default:
		return nil, &Unsatisfiable{Reason: fmt.Sprintf("no node has enough free devices matching all requests (tried %d)", len(nodes))}
	}
}

// claimAllocator runs the scheduler's structured allocator for one claim against one snapshot.
type claimAllocator struct {
	a     *Allocator
	snap  *snapshot
	claim *resourcev1.ResourceClaim
}

// newStructured prepares allocating claim against the snapshot. Missing DeviceClasses are
// reported as *Unsatisfiable (the structured allocator treats them as fatal errors).
func (a *Allocator) newStructured(snap *snapshot, claim *resourcev1.ResourceClaim) (*claimAllocator, error) {
	if missing := missingClasses(snap, claim); len(missing) > 0 {
		return nil, &Unsatisfiable{Reason: "DeviceClass " + strings.Join(missing, ", ") + " not found"}
	}
	return &claimAllocator{a: a, snap: snap, claim: claim}, nil
}

// allocateOn runs the allocator for one node. It returns (nil, nil) when the claim does not fit,
// an error wrapping structured.ErrFailedAllocationOnNode when only this node is affected, the
// context's error, or *Unsatisfiable for errors caused by the claim or its classes.
func (c *claimAllocator) allocateOn(ctx context.Context, node *corev1.Node) (*resourcev1.AllocationResult, error) {
	alloc, err := structured.NewAllocator(ctx, c.a.features, c.snap.state, c.snap, c.snap.slicesFor(node.Name), c.a.celCache)
	if err != nil {
		return nil, err
	}
	results, err := alloc.Allocate(ctx, node, []*resourcev1.ResourceClaim{c.claim})
	switch {
	case err == nil && len(results) == 1:
		return &results[0], nil
	case err == nil:
		return nil, nil
	case ctx.Err() != nil:
		return nil, err
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	default:
		return nil, &Unsatisfiable{Reason: err.Error(), Err: err}
	}
}

// missingClasses lists (sorted) DeviceClasses named by the claim's requests and subrequests
// that the snapshot does not have.
func missingClasses(snap *snapshot, claim *resourcev1.ResourceClaim) []string {
	missing := sets.New[string]()
	for _, req := range requestViews(claim) {
		if _, ok := snap.classes[req.className]; !ok {
			missing.Insert(req.className)
		}
	}
	out := sets.List(missing)
	sort.Strings(out)
	return out
}

// withDefaults returns the claim with the API server's defaults for allocation mode and count
// applied, copying it only when something is missing (objects built in Go often lack them).
func withDefaults(claim *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	needs := func(mode resourcev1.DeviceAllocationMode, count int64) bool {
		return mode == "" || (mode == resourcev1.DeviceAllocationModeExactCount && count == 0)
	}
	missing := false
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil && needs(r.Exactly.AllocationMode, r.Exactly.Count) {
			missing = true
		}
		for _, s := range r.FirstAvailable {
			if needs(s.AllocationMode, s.Count) {
				missing = true
			}
		}
	}
	if !missing {
		return claim
	}
	claim = claim.DeepCopy()
	fill := func(mode *resourcev1.DeviceAllocationMode, count *int64) {
		if *mode == "" {
			*mode = resourcev1.DeviceAllocationModeExactCount
		}
		if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
	}
	for i := range claim.Spec.Devices.Requests {
		r := &claim.Spec.Devices.Requests[i]
		if r.Exactly != nil {
			fill(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			fill(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
		}
	}
	return claim
}

// requestView is one allocatable alternative: a request with Exactly, or one subrequest of a
// request with FirstAvailable.
type requestView struct {
	name        string // "req" or "req/sub"
	path        string // the field path of the alternative in the claim, for remedies
	parent      string
	className   string
	selectors   []resourcev1.DeviceSelector
	tolerations []resourcev1.DeviceToleration
	adminAccess bool
	capacity    *resourcev1.CapacityRequirements
	mode        resourcev1.DeviceAllocationMode
	count       int64
}

func requestViews(claim *resourcev1.ResourceClaim) []requestView {
	var out []requestView
	for i, r := range claim.Spec.Devices.Requests {
		if e := r.Exactly; e != nil {
			out = append(out, requestView{
				name: r.Name, parent: r.Name, path: fmt.Sprintf("spec.devices.requests[%d].exactly", i), className: e.DeviceClassName, selectors: e.Selectors,
				tolerations: e.Tolerations, adminAccess: e.AdminAccess != nil && *e.AdminAccess,
				capacity: e.Capacity, mode: e.AllocationMode, count: e.Count,
			})
		}
		for j, s := range r.FirstAvailable {
			out = append(out, requestView{
				name: r.Name + "/" + s.Name, parent: r.Name, path: fmt.Sprintf("spec.devices.requests[%d].firstAvailable[%d]", i, j), className: s.DeviceClassName, selectors: s.Selectors,
				tolerations: s.Tolerations, capacity: s.Capacity, mode: s.AllocationMode, count: s.Count,
			})
		}
	}
	return out
}

func usesAdminAccess(claim *resourcev1.ResourceClaim) bool {
	for _, r := range requestViews(claim) {
		if r.adminAccess {
			return true
		}
	}
	return false
}
