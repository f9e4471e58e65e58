package allocator

import (
	"context"
	"fmt"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/draforge/draforge/drivers/compactslice"
)

// Ownership says whether a claim is DRAForge's to allocate, and why. On a cluster shared with
// real drivers a claim is DRAForge's only when every request, and every firstAvailable
// subrequest, can be satisfied only by devices DRAForge publishes: its class and request
// selectors match at least one published device and no device of any other slice. Everything
// else is Kubernetes': kube-scheduler allocates it when a pod using it is scheduled, and
// DRAForge writes nothing to it.
type Ownership struct {
	Owned bool `json:"owned"`
	// Reason is the first request that makes the claim not DRAForge's, or why it is.
	Reason string `json:"reason"`
	// Requests has one line per request alternative, in claim order.
	Requests []RequestOwnership `json:"requests,omitempty"`
}

// RequestOwnership is the verdict for one request alternative ("req" or "req/sub").
type RequestOwnership struct {
	Name  string `json:"name"`
	Owned bool   `json:"owned"`
	// Reason names a device of another driver the request's selectors match, or says that no
	// published device matches.
	Reason string `json:"reason"`
}

// Published tells from a slice's labels whether DRAForge published it
// (drivers/simdevice.Published); the allocator itself does not know how DRAForge marks them.
type Published func(sliceLabels map[string]string) bool

// Ownership decides whether claim is DRAForge's from the observed DeviceClasses and slices
// (every generation: a device a real driver still publishes in an older generation could be
// allocated by kube-scheduler too). The decision is evaluated with the allocator's own CEL
// compiler, so it matches what the allocator would consider. Each request costs one selector
// evaluation per device of other drivers plus as many published devices as it takes to find
// one that matches: on a cluster of simulated devices only, usually one.
func (a *Allocator) Ownership(ctx context.Context, claim *resourcev1.ResourceClaim, published Published) Ownership {
	var ours, theirs []*compactslice.Slice
	for _, sl := range a.objects.Slices() {
		if published(sl.Labels) {
			ours = append(ours, sl)
		} else {
			theirs = append(theirs, sl)
		}
	}
	views := requestViews(claim)
	classes := make(map[string]*resourcev1.DeviceClass, len(views)) // only the classes named
	for _, c := range a.objects.Classes() {
		for _, v := range views {
			if c.Name == v.className {
				classes[c.Name] = c
			}
		}
	}
	// The first foreign device by slice name is the one a reason names.
	sort.Slice(theirs, func(i, j int) bool { return theirs[i].Name < theirs[j].Name })

	if len(views) == 0 {
		return Ownership{Reason: "the claim requests no devices"}
	}
	out := Ownership{Owned: true}
	for _, v := range views {
		ro := a.requestOwnership(ctx, v, classes, ours, theirs)
		out.Requests = append(out.Requests, ro)
		if !ro.Owned && out.Owned {
			out.Owned = false
			out.Reason = "request " + ro.Name + ": " + ro.Reason
		}
	}
	if out.Owned {
		names := make([]string, len(views))
		for i, v := range views {
			names[i] = v.name
		}
		out.Reason = "every request (" + strings.Join(names, ", ") + ") can be satisfied only by devices DRAForge publishes"
	}
	return out
}

func (a *Allocator) requestOwnership(ctx context.Context, v requestView, classes map[string]*resourcev1.DeviceClass,
	ours, theirs []*compactslice.Slice) RequestOwnership {
	ro := RequestOwnership{Name: v.name}
	class, ok := classes[v.className]
	if !ok {
		ro.Reason = fmt.Sprintf("DeviceClass %q does not exist, so no device can be shown to be DRAForge's", v.className)
		return ro
	}
	// A selector that fails to evaluate on a device counts as matching it: kube-scheduler
	// would fail the claim on that device rather than skip it, so it is not DRAForge's to
	// claim by elimination.
	noop, failed := func(string, ...any) {}, sets.New[string]() // explain's remedies: unused here
	matches := func(sl *compactslice.Slice, i int) bool {
		d := device{slice: &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: sl.Driver()}}, dev: sl.Device(i)}
		for _, sels := range [][]resourcev1.DeviceSelector{class.Spec.Selectors, v.selectors} {
			for _, r := range a.evalSelectors(ctx, d, sels, "", "", noop, failed) {
				if r.Code != ReasonCELError {
					return false
				}
			}
		}
		return true
	}
	for _, sl := range theirs {
		for i := range sl.Len() {
			if matches(sl, i) {
				where := ""
				if n := sl.NodeName(); n != "" {
					where = " on node " + n
				}
				ro.Reason = fmt.Sprintf("device %s/%s/%s%s, which DRAForge does not publish, matches class %q",
					sl.Driver(), sl.Pool().Name, sl.DeviceName(i), where, v.className)
				return ro
			}
		}
	}
	for _, sl := range ours {
		for i := range sl.Len() {
			if matches(sl, i) {
				ro.Owned = true
				ro.Reason = fmt.Sprintf("only devices DRAForge publishes match class %q", v.className)
				return ro
			}
		}
	}
	ro.Reason = fmt.Sprintf("no device DRAForge publishes matches class %q and the request's selectors", v.className)
	return ro
}

// AllPublished reports whether every device of alloc is in a pool DRAForge publishes: only
// then may DRAForge act on the allocation as kube-scheduler would (deallocate it after a
// binding failure). It walks every slice, so callers ask only when they are about to act.
func (a *Allocator) AllPublished(alloc *resourcev1.AllocationResult, published Published) bool {
	if alloc == nil {
		return false
	}
	// A pool is DRAForge's when it has published slices and no slice of anyone else.
	ours, theirs := map[poolID]bool{}, map[poolID]bool{}
	for _, sl := range a.objects.Slices() {
		id := poolID{sl.Driver(), sl.Pool().Name}
		if published(sl.Labels) {
			ours[id] = true
		} else {
			theirs[id] = true
		}
	}
	for _, r := range alloc.Devices.Results {
		if id := (poolID{r.Driver, r.Pool}); !ours[id] || theirs[id] {
			return false
		}
	}
	return true
}
