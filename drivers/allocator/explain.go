package allocator

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/devicehealth"
)

// Reason codes explaining why a device cannot serve a request.
const (
	ReasonClassNotFound        = "ClassNotFound"
	ReasonClassSelectorFalse   = "ClassSelectorFalse"
	ReasonRequestSelectorFalse = "RequestSelectorFalse"
	ReasonCELError             = "CELError"
	ReasonTainted              = "Tainted"
	ReasonAlreadyAllocated     = "AlreadyAllocated"
	ReasonWrongNode            = "WrongNode"
	ReasonPoolIncomplete       = "PoolIncomplete"
	ReasonBindingConditions    = "BindingConditionsUnsupported"
)

// Explanation tells why a claim is pending: per request, per device and per node. Lists are in
// a deterministic order (requests in claim order, devices by node/driver/pool/device, nodes by
// name).
type Explanation struct {
	Claim     string `json:"claim"`
	Allocated bool   `json:"allocated"`
	// Allocatable is true when some node fits the whole claim right now; Node is the first such
	// node, the one Allocate would pick.
	Allocatable bool                 `json:"allocatable"`
	Node        string               `json:"node,omitempty"`
	Summary     string               `json:"summary"`
	Requests    []RequestExplanation `json:"requests,omitempty"`
	Nodes       []NodeExplanation    `json:"nodes,omitempty"`
	Remedies    []string             `json:"remedies,omitempty"`
}

// RequestExplanation covers one request, or one firstAvailable subrequest ("req/sub").
type RequestExplanation struct {
	Name        string `json:"name"`
	DeviceClass string `json:"deviceClass"`
	ClassFound  bool   `json:"classFound"`
	Mode        string `json:"mode"`
	Count       int64  `json:"count,omitempty"`
	// Matching counts devices passing the class and request selectors; Available those of them
	// that are also usable (reachable, untainted, not allocated).
	Matching  int `json:"matching"`
	Available int `json:"available"`
	// Excluded counts the devices that cannot serve the request, per reason code (a device
	// with several reasons counts once under each).
	Excluded map[string]int `json:"excluded,omitempty"`
	// WithBindingConditions counts the available devices with binding conditions: allocating
	// one makes the pod wait until the driver reports them (status.devices[].conditions).
	WithBindingConditions int                 `json:"withBindingConditions,omitempty"`
	Devices               []DeviceExplanation `json:"devices,omitempty"`
}

// DeviceExplanation says whether one device can serve a request, and if not, why.
type DeviceExplanation struct {
	Node      string   `json:"node,omitempty"` // empty for devices not bound to a single node
	Driver    string   `json:"driver"`
	Pool      string   `json:"pool"`
	Device    string   `json:"device"`
	Available bool     `json:"available"`
	Reasons   []Reason `json:"reasons,omitempty"`
}

// Reason is one cause, with a stable Code and a human-readable Message.
type Reason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// NodeExplanation is the result of running the allocator for the whole claim on one node.
type NodeExplanation struct {
	Node     string        `json:"node"`
	Fits     bool          `json:"fits"`
	Error    string        `json:"error,omitempty"`
	Summary  string        `json:"summary"`
	Requests []NodeRequest `json:"requests,omitempty"`
}

// NodeRequest compares what a request needs on a node with what the node offers. For
// allocation mode All, Needed is the number of matching devices on the node.
type NodeRequest struct {
	Name      string `json:"name"`
	Needed    int    `json:"needed"`
	Available int    `json:"available"`
}

// device is one device of the newest generation of its pool, with the observed nodes it is
// reachable from.
type device struct {
	slice      *resourcev1.ResourceSlice
	dev        *resourcev1.Device
	id         structured.DeviceID
	node       string
	reach      sets.Set[string]
	incomplete bool
}

// Explain tells why a claim is pending, using the same store, CEL compiler and allocator as
// Allocate. It never reserves anything.
func (a *Allocator) Explain(ctx context.Context, claim *resourcev1.ResourceClaim) Explanation {
	ex := Explanation{Claim: claimKey(claim)}
	if claim.Status.Allocation != nil {
		ex.Allocated = true
		ex.Summary = "claim is already allocated"
		return ex
	}
	claim = withDefaults(claim)
	a.mu.RLock()
	_, pending := a.inFlight[claim.UID]
	snap := a.snapshotLocked(claim.UID) // its own in-flight devices are not "taken"
	a.mu.RUnlock()
	if pending {
		ex.Summary = "an allocation for the claim is in flight (written, not yet observed)"
	}
	devices := a.devices(snap)
	nodes := snap.candidateNodes()
	views := requestViews(claim)

	// Per request and device.
	var remedies, deviceRemedies []string
	adder := func(list *[]string) func(string, ...any) {
		return func(format string, args ...any) {
			r := fmt.Sprintf(format, args...)
			for _, have := range *list {
				if have == r {
					return
				}
			}
			*list = append(*list, r)
		}
	}
	addRemedy := adder(&remedies)
	// Remedies for reasons of single devices matter only when nothing fits.
	addDeviceRemedy := adder(&deviceRemedies)
	counters := a.counterUse(snap, devices)
	available := make([][]bool, len(views)) // [view][device]
	matching := make([][]bool, len(views))
	for i, v := range views {
		re, avail, match := a.explainRequest(ctx, snap, v, devices, counters, addRemedy, addDeviceRemedy)
		ex.Requests = append(ex.Requests, re)
		available[i], matching[i] = avail, match
	}

	// Per node: run the allocator for the whole claim on that node alone.
	best := make([]int, len(views)) // most available devices on one node, per view
	alloc, err := a.newStructured(snap, claim)
	for _, node := range nodes {
		ne := NodeExplanation{Node: node.Name}
		var short []string
		for i, v := range views {
			nr := NodeRequest{Name: v.name}
			for j, d := range devices {
				if !d.reach.Has(node.Name) {
					continue
				}
				if available[i][j] {
					nr.Available++
				}
				if matching[i][j] && v.mode == resourcev1.DeviceAllocationModeAll {
					nr.Needed++
				}
			}
			if v.mode != resourcev1.DeviceAllocationModeAll {
				nr.Needed = int(v.count)
			}
			best[i] = max(best[i], nr.Available)
			if nr.Available < nr.Needed || nr.Needed == 0 {
				short = append(short, fmt.Sprintf("%s: %d of %d devices available", v.name, nr.Available, nr.Needed))
			}
			ne.Requests = append(ne.Requests, nr)
		}
		if err == nil {
			result, nodeErr := alloc.allocateOn(ctx, node)
			ne.Fits = result != nil
			if nodeErr != nil {
				ne.Error = nodeErr.Error()
			}
		}
		switch {
		case ne.Fits:
			ne.Summary = "the whole claim fits"
		case ne.Error != "":
			ne.Summary = "allocation failed: " + ne.Error
		case len(short) > 0:
			ne.Summary = strings.Join(short, "; ")
		default:
			ne.Summary = "enough devices per request, but not together or not satisfying the claim's constraints"
		}
		if ne.Fits && !ex.Allocatable {
			ex.Allocatable, ex.Node = true, node.Name
		}
		ex.Nodes = append(ex.Nodes, ne)
	}

	// Capacity remedies, per request alternative (each firstAvailable subrequest separately).
	if !ex.Allocatable {
		for _, r := range deviceRemedies {
			addRemedy("%s", r)
		}
		for i, v := range views {
			re := ex.Requests[i]
			if !re.ClassFound || re.Matching == 0 {
				continue
			}
			if v.mode == resourcev1.DeviceAllocationModeAll {
				if re.Available < re.Matching {
					addRemedy("request %s asks for all devices of class %q, but %d of %d matching devices are unavailable", v.name, v.className, re.Matching-re.Available, re.Matching)
				}
				continue
			}
			if best[i] < int(v.count) {
				addRemedy("no node has %d free devices of class %q for request %s (at most %d on one node): free devices, add capacity or lower %s.count", v.count, v.className, v.name, best[i], v.path)
			}
		}
		if len(remedies) == 0 && err == nil && len(ex.Nodes) > 0 {
			if len(claim.Spec.Devices.Constraints) > 0 {
				addRemedy("no node has free devices satisfying the claim's constraints (%s): relax spec.devices.constraints or add devices with matching attributes on one node", constraintNames(claim))
			} else {
				addRemedy("no single node has free devices for all requests together: add capacity on one node")
			}
		}
	}
	if len(nodes) == 0 {
		addRemedy("no observed node has ResourceSlices: publish devices for a node")
	}
	ex.Remedies = remedies

	if ex.Summary == "" {
		switch {
		case ex.Allocatable:
			ex.Summary = "claim fits on node " + ex.Node
		case err != nil:
			ex.Summary = err.Error()
		default:
			ex.Summary = fmt.Sprintf("no node fits the claim (%d nodes tried)", len(ex.Nodes))
		}
	}
	return ex
}

// explainRequest evaluates every device against one request alternative. It returns the
// explanation and, per device, whether it is available and whether it matches the selectors.
func (a *Allocator) explainRequest(ctx context.Context, snap *snapshot, v requestView, devices []device,
	counters counterUse, addRemedy, addDeviceRemedy func(string, ...any)) (RequestExplanation, []bool, []bool) {
	re := RequestExplanation{Name: v.name, DeviceClass: v.className, Mode: string(v.mode)}
	if v.mode == resourcev1.DeviceAllocationModeExactCount {
		re.Count = v.count
	}
	class, found := snap.classes[v.className]
	re.ClassFound = found
	if !found {
		addRemedy("create DeviceClass %q (used by request %s)", v.className, v.name)
	}
	available := make([]bool, len(devices))
	matching := make([]bool, len(devices))
	failedClass, failedRequest := sets.New[string](), sets.New[string]()
	for j, d := range devices {
		// Like the allocator: class selectors first, request selectors only if those match.
		var reasons []Reason
		if !found {
			reasons = append(reasons, Reason{ReasonClassNotFound, fmt.Sprintf("DeviceClass %q does not exist", v.className)})
		} else {
			reasons = a.evalSelectors(ctx, d, class.Spec.Selectors, "class "+class.Name, ReasonClassSelectorFalse, addRemedy, failedClass)
		}
		if len(reasons) == 0 {
			reasons = a.evalSelectors(ctx, d, v.selectors, "request "+v.name, ReasonRequestSelectorFalse, addRemedy, failedRequest)
		}
		// A device the selectors exclude is counted under that reason alone: that it is also
		// allocated or tainted does not matter to this request.
		selectorOK := len(reasons) == 0
		if selectorOK {
			reasons = append(reasons, a.usability(snap, v, d)...)
			reasons = append(reasons, a.capacityReasons(snap, v, d)...)
			if !snap.state.AllocatedDevices.Has(d.id) {
				reasons = append(reasons, counters.countersReason(d)...)
			}
		}
		matching[j] = selectorOK
		available[j] = len(reasons) == 0
		if selectorOK {
			re.Matching++
		}
		if available[j] {
			re.Available++
			if a.features.DeviceBindingAndStatus && len(d.dev.BindingConditions) > 0 {
				re.WithBindingConditions++
			}
		}
		seen := sets.New[string]()
		for _, r := range reasons {
			if !seen.Has(r.Code) {
				seen.Insert(r.Code)
				if re.Excluded == nil {
					re.Excluded = map[string]int{}
				}
				re.Excluded[r.Code]++
			}
		}
		if selectorOK {
			reasonRemedies(snap, v, d, reasons, addDeviceRemedy)
		}
		re.Devices = append(re.Devices, DeviceExplanation{
			Node: d.node, Driver: d.slice.Spec.Driver, Pool: d.slice.Spec.Pool.Name, Device: d.dev.Name,
			Available: available[j], Reasons: reasons,
		})
	}
	if found && re.Matching == 0 {
		switch {
		case len(devices) == 0:
			addRemedy("publish ResourceSlices: no devices are observed")
		case failedClass.Len() == len(class.Spec.Selectors) && failedClass.Len() > 0 && failedRequest.Len() == 0:
			addRemedy("add devices matching DeviceClass %q (selectors: %s)", class.Name, strings.Join(sets.List(failedClass), " && "))
		default:
			exprs := append(sets.List(failedClass), sets.List(failedRequest)...)
			addRemedy("add devices of class %q with attributes satisfying %s%s", class.Name, strings.Join(exprs, " && "), attributeHint(exprs))
		}
	}
	return re, available, matching
}

// evalSelectors evaluates CEL selectors against a device with the same compiler and cache as
// the allocator, stopping at the first one that fails, as the allocator does. An expression
// that evaluates to false is added to failed.
func (a *Allocator) evalSelectors(ctx context.Context, d device, selectors []resourcev1.DeviceSelector, owner, falseCode string,
	addRemedy func(string, ...any), failed sets.Set[string]) []Reason {
	for i, sel := range selectors {
		if sel.CEL == nil {
			return []Reason{{ReasonCELError, fmt.Sprintf("%s selector #%d has no CEL expression", owner, i)}}
		}
		expr := a.celCache.GetOrCompile(sel.CEL.Expression)
		if expr.Error != nil {
			addRemedy("fix the CEL selector of %s: %q: %v", owner, sel.CEL.Expression, expr.Error)
			return []Reason{{ReasonCELError, fmt.Sprintf("%s selector #%d: compile error: %v", owner, i, expr.Error)}}
		}
		ok, _, err := expr.DeviceMatches(ctx, cel.Device{
			Driver:                   d.slice.Spec.Driver,
			AllowMultipleAllocations: d.dev.AllowMultipleAllocations,
			Attributes:               d.dev.Attributes,
			Capacity:                 d.dev.Capacity,
		})
		switch {
		case err != nil:
			addRemedy("fix the CEL selector of %s: %q fails on some devices", owner, sel.CEL.Expression)
			return []Reason{{ReasonCELError, fmt.Sprintf("%s selector #%d: runtime error: %v", owner, i, cel.EnhanceRuntimeError(err))}}
		case !ok:
			failed.Insert(sel.CEL.Expression)
			return []Reason{{falseCode, fmt.Sprintf("%s selector #%d is false: %s", owner, i, sel.CEL.Expression)}}
		}
	}
	return nil
}

// usability lists the reasons, other than selectors, why the allocator would skip a device.
func (a *Allocator) usability(snap *snapshot, v requestView, d device) []Reason {
	var reasons []Reason
	if d.reach.Len() == 0 {
		msg := "the device is not reachable from any observed node"
		if d.node != "" {
			msg = fmt.Sprintf("the slice is for node %s, which is not an observed Node", d.node)
		}
		reasons = append(reasons, Reason{ReasonWrongNode, msg})
	}
	if d.incomplete {
		reasons = append(reasons, Reason{ReasonPoolIncomplete, fmt.Sprintf("pool %s/%s has fewer slices than its resourceSliceCount %d", d.slice.Spec.Driver, d.slice.Spec.Pool.Name, d.slice.Spec.Pool.ResourceSliceCount)})
	}
	if !a.features.DeviceBindingAndStatus && len(d.dev.BindingConditions) > 0 {
		reasons = append(reasons, Reason{ReasonBindingConditions, "the device has binding conditions, which this allocator does not support"})
	}
	if a.features.DeviceTaints {
		for _, t := range d.dev.Taints {
			if t.Effect != resourcev1.DeviceTaintEffectNoSchedule && t.Effect != resourcev1.DeviceTaintEffectNoExecute {
				continue
			}
			tolerated := false
			for _, tol := range v.tolerations {
				tolerated = tolerated || resourceclaim.ToleratesTaint(tol, t)
			}
			if !tolerated {
				from := "published by the driver"
				if rule := snap.taintSource(d.slice, d.dev.Name, t); rule != "" {
					from = "from DeviceTaintRule " + rule
				} else if m := devicehealth.Meaning(t); m != "" {
					// A health taint of a real driver (gpu.nvidia.com/xid...): what happened.
					from += ": " + m
				}
				reasons = append(reasons, Reason{ReasonTainted, fmt.Sprintf("taint %s=%s:%s (%s) is not tolerated", t.Key, t.Value, t.Effect, from)})
			}
		}
	}
	if owner, taken := snap.owners[d.id]; taken && !v.adminAccess {
		reasons = append(reasons, Reason{ReasonAlreadyAllocated, "allocated to " + owner})
	}
	return reasons
}

// devices lists the devices of the newest generation of each pool, sorted by node, driver,
// pool and name, with the observed nodes each is reachable from.
func (a *Allocator) devices(snap *snapshot) []device {
	newest := map[poolID]int64{}
	count := map[poolID]int64{}
	typed := snap.allTyped()
	for _, s := range typed {
		id := poolID{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := newest[id]; !ok || s.Spec.Pool.Generation > g {
			newest[id], count[id] = s.Spec.Pool.Generation, 0
		}
		if s.Spec.Pool.Generation == newest[id] {
			count[id]++
		}
	}
	observed := sets.New[string]()
	for _, n := range snap.nodes {
		observed.Insert(n.Name)
	}
	reach := func(nodeName string, allNodes bool, sel *corev1.NodeSelector) sets.Set[string] {
		out := sets.New[string]()
		if nodeName != "" {
			// What NodeMatches answers for a node name, without asking it for every node
			// (explain on 1,000 nodes spent most of its time here).
			if observed.Has(nodeName) {
				out.Insert(nodeName)
			}
			return out
		}
		for _, n := range snap.nodes {
			if ok, err := structured.NodeMatches(a.features, n, nodeName, allNodes, sel); err == nil && ok {
				out.Insert(n.Name)
			}
		}
		return out
	}
	var out []device
	for _, s := range typed {
		id := poolID{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.Pool.Generation != newest[id] {
			continue
		}
		perDevice := ptr.Deref(s.Spec.PerDeviceNodeSelection, false)
		var sliceReach sets.Set[string]
		if !perDevice {
			sliceReach = reach(ptr.Deref(s.Spec.NodeName, ""), ptr.Deref(s.Spec.AllNodes, false), s.Spec.NodeSelector)
		}
		for k := range s.Spec.Devices {
			dev := &s.Spec.Devices[k]
			d := device{
				slice: s, dev: dev, reach: sliceReach,
				id:         structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, dev.Name),
				node:       ptr.Deref(s.Spec.NodeName, ptr.Deref(dev.NodeName, "")),
				incomplete: count[id] != s.Spec.Pool.ResourceSliceCount,
			}
			if perDevice {
				d.reach = reach(ptr.Deref(dev.NodeName, ""), ptr.Deref(dev.AllNodes, false), dev.NodeSelector)
			}
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.node != y.node {
			return x.node < y.node
		}
		return x.id.String() < y.id.String()
	})
	return out
}

func constraintNames(claim *resourcev1.ResourceClaim) string {
	var names []string
	for _, c := range claim.Spec.Devices.Constraints {
		switch {
		case c.MatchAttribute != nil:
			names = append(names, "matchAttribute "+string(*c.MatchAttribute))
		case c.DistinctAttribute != nil:
			names = append(names, "distinctAttribute "+string(*c.DistinctAttribute))
		}
	}
	return strings.Join(names, ", ")
}

// attributeRef finds device.attributes["domain"].name and device.attributes["domain"]["name"]
// (and the same for capacity) in CEL selectors.
var attributeRef = regexp.MustCompile(`device\.(?:attributes|capacity)\["([^"]+)"\](?:\.([A-Za-z0-9_]+)|\["([^"]+)"\])`)

func attributeHint(exprs []string) string {
	names := sets.New[string]()
	for _, e := range exprs {
		for _, m := range attributeRef.FindAllStringSubmatch(e, -1) {
			names.Insert(m[1] + "/" + m[2] + m[3])
		}
	}
	if names.Len() == 0 {
		return ""
	}
	return " (attributes " + strings.Join(sets.List(names), ", ") + ")"
}
