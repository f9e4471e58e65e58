package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/compactslice"
)

const driver = "sim.draforge.oaslananka"

type attrs = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute

func str(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
func num(i int64) resourcev1.DeviceAttribute  { return resourcev1.DeviceAttribute{IntValue: &i} }

func newNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

// newSlice publishes one complete pool named after the node, with devices dev-0..dev-(n-1).
func newSlice(node string, n int, attr func(i int) attrs) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-slice"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		d := resourcev1.Device{Name: fmt.Sprintf("dev-%d", i)}
		if attr != nil {
			d.Attributes = attr(i)
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func newClass(name string, exprs ...string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range append([]string{`device.driver == "` + driver + `"`}, exprs...) {
		c.Spec.Selectors = append(c.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return c
}

func exactly(name, class string, count int64, exprs ...string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count}}
	for _, e := range exprs {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return r
}

func newClaim(name string, reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}},
	}
}

// cluster builds an Allocator with the gpu class and one pool of n devices per node.
func cluster(t testing.TB, nodes []string, n int, attr func(node string, i int) attrs) *Allocator {
	t.Helper()
	a := New(Options{})
	a.UpsertClass(newClass("gpu"))
	for _, name := range nodes {
		a.UpsertNode(newNode(name))
		var f func(int) attrs
		if attr != nil {
			f = func(i int) attrs { return attr(name, i) }
		}
		a.UpsertSlice(compactslice.From(newSlice(name, n, f)))
	}
	return a
}

func nodeOf(t testing.TB, r *resourcev1.AllocationResult) string {
	t.Helper()
	if r.NodeSelector == nil || len(r.NodeSelector.NodeSelectorTerms) != 1 {
		t.Fatalf("unexpected node selector %v", r.NodeSelector)
	}
	term := r.NodeSelector.NodeSelectorTerms[0]
	if len(term.MatchFields) != 1 || term.MatchFields[0].Key != "metadata.name" {
		t.Fatalf("unexpected node selector term %v", term)
	}
	return term.MatchFields[0].Values[0]
}

func devicesOf(r *resourcev1.AllocationResult) []string {
	var out []string
	for _, d := range r.Devices.Results {
		out = append(out, d.Request+"="+d.Pool+"/"+d.Device)
	}
	return out
}

func mustAllocate(t testing.TB, a *Allocator, c *resourcev1.ResourceClaim) *resourcev1.AllocationResult {
	t.Helper()
	r, err := a.Allocate(context.Background(), c)
	if err != nil {
		t.Fatalf("Allocate(%s): %v", c.Name, err)
	}
	return r
}

func mustFail(t testing.TB, a *Allocator, c *resourcev1.ResourceClaim) *Unsatisfiable {
	t.Helper()
	r, err := a.Allocate(context.Background(), c)
	var u *Unsatisfiable
	if !errors.As(err, &u) {
		t.Fatalf("Allocate(%s) = %v, %v; want *Unsatisfiable", c.Name, r, err)
	}
	return u
}

func TestAllocateSingleNode(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 4, nil)
	c := newClaim("c1", exactly("gpu", "gpu", 2))
	r := mustAllocate(t, a, c)
	if got := strings.Join(devicesOf(r), ","); got != "gpu=node-a/dev-0,gpu=node-a/dev-1" {
		t.Errorf("devices = %s", got)
	}
	if r.Devices.Results[0].Driver != driver {
		t.Errorf("driver = %s", r.Devices.Results[0].Driver)
	}
	if n := nodeOf(t, r); n != "node-a" {
		t.Errorf("node = %s", n)
	}
	if !a.InFlight(c.UID) {
		t.Error("allocation not recorded in flight")
	}
	// Asking again while in flight returns the same reservation.
	if again := mustAllocate(t, a, c); strings.Join(devicesOf(again), ",") != strings.Join(devicesOf(r), ",") {
		t.Errorf("second Allocate = %v", devicesOf(again))
	}
	// The next claim gets the other two devices.
	r2 := mustAllocate(t, a, newClaim("c2", exactly("gpu", "gpu", 2)))
	if got := strings.Join(devicesOf(r2), ","); got != "gpu=node-a/dev-2,gpu=node-a/dev-3" {
		t.Errorf("devices = %s", got)
	}
}

func TestAllocateMultiNodeDeterministicOrder(t *testing.T) {
	a := cluster(t, []string{"node-c", "node-a", "node-b"}, 2, nil)
	for i, want := range []string{"node-a", "node-b", "node-c"} {
		r := mustAllocate(t, a, newClaim(fmt.Sprintf("c%d", i), exactly("gpu", "gpu", 2)))
		if n := nodeOf(t, r); n != want {
			t.Errorf("claim %d on %s, want %s", i, n, want)
		}
	}
	mustFail(t, a, newClaim("c3", exactly("gpu", "gpu", 1)))
}

func TestAllocateNeedsOneNode(t *testing.T) {
	// Four devices in total, but at most two on one node.
	a := cluster(t, []string{"node-a", "node-b"}, 2, nil)
	u := mustFail(t, a, newClaim("c", exactly("gpu", "gpu", 3)))
	if u.Err != nil || !strings.Contains(u.Reason, "tried 2") {
		t.Errorf("reason = %q, err = %v", u.Reason, u.Err)
	}
}

func TestAllocateCELSelectors(t *testing.T) {
	a := cluster(t, []string{"node-a", "node-b"}, 4, func(node string, i int) attrs {
		model := "a100"
		if node == "node-b" && i%2 == 1 {
			model = "h100"
		}
		return attrs{"model": str(model), "memory": num(int64(40 * (i + 1)))}
	})
	c := newClaim("c", exactly("gpu", "gpu", 2,
		`device.attributes["`+driver+`"].model == "h100"`,
		`device.attributes["`+driver+`"].memory >= 80`))
	r := mustAllocate(t, a, c)
	if got := strings.Join(devicesOf(r), ","); got != "gpu=node-b/dev-1,gpu=node-b/dev-3" {
		t.Errorf("devices = %s", got)
	}
}

func TestAllocateMatchAttribute(t *testing.T) {
	// node-a: numa 0 and 1 (no pair), node-b: both numa 0.
	a := cluster(t, []string{"node-a", "node-b"}, 2, func(node string, i int) attrs {
		if node == "node-a" {
			return attrs{"numa": num(int64(i))}
		}
		return attrs{"numa": num(0)}
	})
	c := newClaim("c", exactly("a", "gpu", 1), exactly("b", "gpu", 1))
	c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{
		Requests: []string{"a", "b"}, MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(driver + "/numa")),
	}}
	r := mustAllocate(t, a, c)
	if n := nodeOf(t, r); n != "node-b" {
		t.Errorf("node = %s, want node-b", n)
	}

	ex := a.Explain(context.Background(), newClaimLike(c, "c2"))
	wantNodes := map[string]bool{"node-a": false, "node-b": false}
	for _, ne := range ex.Nodes {
		if ne.Fits != wantNodes[ne.Node] {
			t.Errorf("node %s fits = %v", ne.Node, ne.Fits)
		}
	}
	if got := ex.Nodes[0].Summary; !strings.Contains(got, "constraints") {
		t.Errorf("node-a summary = %q", got)
	}
	if !hasRemedy(ex, "matchAttribute "+driver+"/numa") {
		t.Errorf("remedies = %q", ex.Remedies)
	}
}

// newClaimLike copies a claim's spec under a new name and UID.
func newClaimLike(c *resourcev1.ResourceClaim, name string) *resourcev1.ResourceClaim {
	out := c.DeepCopy()
	out.Name, out.UID = name, types.UID(name+"-uid")
	return out
}

func TestAllocateFirstAvailable(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 2, func(_ string, i int) attrs {
		return attrs{"memory": num(40)}
	})
	c := newClaim("c", resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "big", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["` + driver + `"].memory >= 80`}}}},
		{Name: "small", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
	}})
	r := mustAllocate(t, a, c)
	if got := strings.Join(devicesOf(r), ","); got != "gpu/small=node-a/dev-0,gpu/small=node-a/dev-1" {
		t.Errorf("devices = %s", got)
	}

	ex := a.Explain(context.Background(), newClaimLike(c, "c2"))
	if len(ex.Requests) != 2 || ex.Requests[0].Name != "gpu/big" || ex.Requests[1].Name != "gpu/small" {
		t.Fatalf("requests = %+v", ex.Requests)
	}
	assertReason(t, ex.Requests[0].Devices[0], ReasonRequestSelectorFalse, "memory >= 80")
	assertReason(t, ex.Requests[1].Devices[0], ReasonAlreadyAllocated, "claim default/c")
}

func TestAllocateAllMode(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 3, nil)
	all := resourcev1.DeviceRequest{Name: "all", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeAll}}
	r := mustAllocate(t, a, newClaim("c1", all))
	if len(r.Devices.Results) != 3 {
		t.Errorf("devices = %v", devicesOf(r))
	}
	a.Release("c1-uid")

	mustAllocate(t, a, newClaim("one", exactly("gpu", "gpu", 1)))
	c2 := newClaim("c2", all)
	mustFail(t, a, c2)
	ex := a.Explain(context.Background(), c2)
	if !hasRemedy(ex, "asks for all devices") || !hasRemedy(ex, "1 of 3 matching devices are unavailable") {
		t.Errorf("remedies = %q", ex.Remedies)
	}
}

// TestPoolsAcrossSlices: the allocator is given only the slices that matter for the node it
// tries, which must still include every slice of the node's pools (completeness is checked over
// all of them) and the slices that are not bound to one node.
func TestPoolsAcrossSlices(t *testing.T) {
	a := New(Options{})
	a.UpsertClass(newClass("gpu"))
	for _, n := range []string{"node-a", "node-b"} {
		a.UpsertNode(newNode(n))
	}
	// Pool "split" has two slices, one per node: complete, so node-a can use its device.
	for _, n := range []string{"node-a", "node-b"} {
		s := newSlice(n, 1, nil)
		s.Spec.Pool = resourcev1.ResourcePool{Name: "split", Generation: 1, ResourceSliceCount: 2}
		s.Spec.Devices[0].Name = "dev-" + n
		a.UpsertSlice(compactslice.From(s))
	}
	all := resourcev1.DeviceRequest{Name: "all", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeAll}}
	r := mustAllocate(t, a, newClaim("c1", all))
	if got := devicesOf(r); nodeOf(t, r) != "node-a" || len(got) != 1 || got[0] != "all=split/dev-node-a" {
		t.Errorf("allocated %v on %s, want all=split/dev-node-a on node-a", got, nodeOf(t, r))
	}
	a.Release("c1-uid")

	// Pool "partial" says three slices but has two: incomplete, allocation mode All refuses it.
	a = New(Options{})
	a.UpsertClass(newClass("gpu"))
	for _, n := range []string{"node-a", "node-b"} {
		a.UpsertNode(newNode(n))
		s := newSlice(n, 1, nil)
		s.Name = n + "-partial"
		s.Spec.Pool = resourcev1.ResourcePool{Name: "partial", Generation: 1, ResourceSliceCount: 3}
		a.UpsertSlice(compactslice.From(s))
	}
	mustFail(t, a, newClaim("c2", all))

	// A slice for all nodes is offered on every node, next to the node's own slices.
	a = cluster(t, []string{"node-a"}, 1, nil)
	shared := newSlice("shared", 1, nil)
	shared.Spec.NodeName, shared.Spec.AllNodes = nil, ptr.To(true)
	shared.Spec.Devices[0].Name = "dev-shared"
	a.UpsertSlice(compactslice.From(shared))
	r = mustAllocate(t, a, newClaim("c3", exactly("gpu", "gpu", 2)))
	if got := devicesOf(r); len(got) != 2 || got[0] != "gpu=node-a/dev-0" || got[1] != "gpu=shared/dev-shared" {
		t.Errorf("allocated %v, want the node's device and the shared one", got)
	}
}

func TestInsufficientCapacityExplained(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 2, nil)
	c := newClaim("c", exactly("gpu", "gpu", 3))
	mustFail(t, a, c)
	ex := a.Explain(context.Background(), c)
	if ex.Allocatable || len(ex.Nodes) != 1 || ex.Nodes[0].Fits {
		t.Fatalf("explanation = %+v", ex)
	}
	if got := ex.Nodes[0].Summary; got != "gpu: 2 of 3 devices available" {
		t.Errorf("summary = %q", got)
	}
	if nr := ex.Nodes[0].Requests[0]; nr.Needed != 3 || nr.Available != 2 {
		t.Errorf("node request = %+v", nr)
	}
	if !hasRemedy(ex, `no node has 3 free devices of class "gpu" for request gpu (at most 2 on one node)`) {
		t.Errorf("remedies = %q", ex.Remedies)
	}
}

func TestTaintedDeviceRefused(t *testing.T) {
	a := New(Options{})
	a.UpsertClass(newClass("gpu"))
	a.UpsertNode(newNode("node-a"))
	s := newSlice("node-a", 1, nil)
	s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "health", Value: "unhealthy", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	a.UpsertSlice(compactslice.From(s))

	c := newClaim("c", exactly("gpu", "gpu", 1))
	mustFail(t, a, c)
	ex := a.Explain(context.Background(), c)
	assertReason(t, ex.Requests[0].Devices[0], ReasonTainted, "health=unhealthy:NoSchedule")
	if !hasRemedy(ex, "add a toleration to request gpu") {
		t.Errorf("remedies = %q", ex.Remedies)
	}

	tolerating := newClaim("t", exactly("gpu", "gpu", 1))
	tolerating.Spec.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{
		Key: "health", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	mustAllocate(t, a, tolerating)
}

func TestConcurrentAllocateNeverDoubleAllocates(t *testing.T) {
	var nodes []string
	for i := range 10 {
		nodes = append(nodes, fmt.Sprintf("node-%02d", i))
	}
	a := cluster(t, nodes, 10, nil)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		taken   = sets.New[string]()
		ok, bad int
	)
	for i := range 200 {
		wg.Go(func() {
			r, err := a.Allocate(context.Background(), newClaim(fmt.Sprintf("c%03d", i), exactly("gpu", "gpu", 1)))
			mu.Lock()
			defer mu.Unlock()
			var u *Unsatisfiable
			switch {
			case err == nil:
				ok++
				id := r.Devices.Results[0].Pool + "/" + r.Devices.Results[0].Device
				if taken.Has(id) {
					t.Errorf("device %s allocated twice", id)
				}
				taken.Insert(id)
			case errors.As(err, &u):
				bad++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	if ok != 100 || bad != 100 || taken.Len() != 100 {
		t.Errorf("succeeded %d, unsatisfiable %d, distinct devices %d; want 100, 100, 100", ok, bad, taken.Len())
	}
}

func TestReleaseAfterFailedWrite(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 1, nil)
	c1 := newClaim("c1", exactly("gpu", "gpu", 1))
	mustAllocate(t, a, c1)
	c2 := newClaim("c2", exactly("gpu", "gpu", 1))
	mustFail(t, a, c2)

	a.Release(c1.UID) // the status write for c1 failed
	if a.InFlight(c1.UID) {
		t.Error("still in flight after Release")
	}
	mustAllocate(t, a, c2)
}

// TestExplainInFlightClaim: a claim whose allocation is written but not yet observed is
// explained as fitting, not as blocked by its own devices; other claims see them taken.
func TestExplainInFlightClaim(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 1, nil)
	c1 := newClaim("c1", exactly("gpu", "gpu", 1))
	mustAllocate(t, a, c1)
	ex := a.Explain(context.Background(), c1)
	if !ex.Allocatable || ex.Requests[0].Available != 1 || !strings.Contains(ex.Summary, "in flight") {
		t.Errorf("explanation of the in-flight claim: %+v", ex)
	}
	ex = a.Explain(context.Background(), newClaim("c2", exactly("gpu", "gpu", 1)))
	d := ex.Requests[0].Devices
	if ex.Allocatable || len(d) != 1 || d[0].Available || len(d[0].Reasons) != 1 ||
		d[0].Reasons[0].Code != ReasonAlreadyAllocated || !strings.Contains(d[0].Reasons[0].Message, "in-flight claim default/c1") {
		t.Errorf("explanation of another claim: %+v", ex)
	}
}

func TestInFlightDroppedWhenObservedOrDeleted(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 2, nil)
	c1 := newClaim("c1", exactly("gpu", "gpu", 1))
	a.UpsertClaim(c1)
	r := mustAllocate(t, a, c1)

	// An informer event without the allocation keeps the reservation.
	a.UpsertClaim(c1)
	if !a.InFlight(c1.UID) {
		t.Fatal("reservation dropped before the allocation was observed")
	}
	// Observing the allocation drops it; the observed claim now holds the device.
	observed := c1.DeepCopy()
	observed.Status.Allocation = r.DeepCopy()
	a.UpsertClaim(observed)
	if a.InFlight(c1.UID) {
		t.Fatal("reservation kept after the allocation was observed")
	}
	r2 := mustAllocate(t, a, newClaim("c2", exactly("gpu", "gpu", 1)))
	if r2.Devices.Results[0].Device == r.Devices.Results[0].Device {
		t.Fatal("observed device allocated again")
	}

	// Deleting a claim drops its reservation.
	a.DeleteClaim(newClaim("c2", exactly("gpu", "gpu", 1)))
	if a.InFlight("c2-uid") {
		t.Fatal("reservation kept after the claim was deleted")
	}
}

func TestReserveRejectsTakenDevice(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 1, nil)
	r := mustAllocate(t, a, newClaim("c1", exactly("gpu", "gpu", 1)))
	if err := a.Reserve("other", r); err == nil || !strings.Contains(err.Error(), "in-flight claim default/c1") {
		t.Errorf("Reserve = %v", err)
	}
	a.Release("c1-uid")
	if err := a.Reserve("other", r); err != nil {
		t.Errorf("Reserve after release = %v", err)
	}
}

func TestAllocateMissingClassAndCELError(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 1, nil)
	u := mustFail(t, a, newClaim("c", exactly("gpu", "nope", 1)))
	if !strings.Contains(u.Reason, `DeviceClass nope not found`) {
		t.Errorf("reason = %q", u.Reason)
	}
	u = mustFail(t, a, newClaim("c", exactly("gpu", "gpu", 1, `device.attributes["`+driver+`"].missing == "x"`)))
	if u.Err == nil || !strings.Contains(u.Reason, "CEL runtime error") {
		t.Errorf("reason = %q, err = %v", u.Reason, u.Err)
	}
}

func TestExplainReasons(t *testing.T) {
	a := cluster(t, []string{"node-a"}, 3, func(_ string, i int) attrs {
		return attrs{"model": str([]string{"a100", "h100", "h100"}[i])}
	})
	// A device of another driver (class selector false) and a slice for a node that does not exist.
	other := newSlice("node-a", 1, nil)
	other.Name, other.Spec.Driver, other.Spec.Pool.Name = "other", "other.example.com", "other"
	a.UpsertSlice(compactslice.From(other))
	ghost := newSlice("node-x", 1, func(int) attrs { return attrs{"model": str("h100")} })
	a.UpsertSlice(compactslice.From(ghost))
	// dev-1 is allocated to an observed claim.
	owner := newClaim("owner", exactly("gpu", "gpu", 1))
	owner.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: driver, Pool: "node-a", Device: "dev-1"}}}}
	a.UpsertClaim(owner)

	c := newClaim("c", exactly("gpu", "gpu", 2, `device.attributes["`+driver+`"].model == "h100"`))
	mustFail(t, a, c)
	ex := a.Explain(context.Background(), c)
	if ex.Allocatable || ex.Claim != "default/c" {
		t.Fatalf("explanation = %+v", ex)
	}
	req := ex.Requests[0]
	assertReason(t, findDevice(t, req, "node-a/dev-0"), ReasonRequestSelectorFalse, `model == "h100"`)
	assertReason(t, findDevice(t, req, "node-a/dev-1"), ReasonAlreadyAllocated, "claim default/owner")
	if d := findDevice(t, req, "node-a/dev-2"); !d.Available || len(d.Reasons) != 0 {
		t.Errorf("dev-2 = %+v", d)
	}
	// The request selector is not evaluated where the class selector already fails.
	if d := findDevice(t, req, "other/dev-0"); len(d.Reasons) != 1 {
		t.Errorf("other/dev-0 reasons = %+v", d.Reasons)
	}
	assertReason(t, findDevice(t, req, "other/dev-0"), ReasonClassSelectorFalse, `device.driver == "`+driver+`"`)
	assertReason(t, findDevice(t, req, "node-x/dev-0"), ReasonWrongNode, "node-x")
	if req.Matching != 3 || req.Available != 1 {
		t.Errorf("matching %d available %d, want 3 and 1", req.Matching, req.Available)
	}
	// Deterministic device order: by node, then driver, pool and device.
	var order []string
	for _, d := range req.Devices {
		order = append(order, d.Node+":"+d.Pool+"/"+d.Device)
	}
	if want := "node-a:other/dev-0,node-a:node-a/dev-0,node-a:node-a/dev-1,node-a:node-a/dev-2,node-x:node-x/dev-0"; strings.Join(order, ",") != want {
		t.Errorf("order = %s", strings.Join(order, ","))
	}

	// The same state explains the same way, byte for byte.
	j1, _ := json.Marshal(ex)
	j2, _ := json.Marshal(a.Explain(context.Background(), c))
	if string(j1) != string(j2) {
		t.Errorf("Explain is not deterministic:\n%s\n%s", j1, j2)
	}

	// Missing class and CEL errors.
	ex = a.Explain(context.Background(), newClaim("m", exactly("gpu", "nope", 1)))
	assertReason(t, ex.Requests[0].Devices[0], ReasonClassNotFound, "nope")
	if ex.Requests[0].ClassFound || !hasRemedy(ex, `create DeviceClass "nope"`) {
		t.Errorf("explanation = %+v", ex)
	}
	ex = a.Explain(context.Background(), newClaim("e", exactly("gpu", "gpu", 1, `device.attributes["`+driver+`"].missing == "x"`)))
	assertReason(t, findDevice(t, ex.Requests[0], "node-a/dev-0"), ReasonCELError, "runtime error")
	assertReason(t, findDevice(t, ex.Requests[0], "other/dev-0"), ReasonClassSelectorFalse, "device.driver")
	if !hasRemedy(ex, "fix the CEL selector of request gpu") {
		t.Errorf("remedies = %q", ex.Remedies)
	}

	// No device has the requested attribute value.
	ex = a.Explain(context.Background(), newClaim("v", exactly("gpu", "gpu", 1, `device.attributes["`+driver+`"].model == "b200"`)))
	if !hasRemedy(ex, "attributes "+driver+"/model") {
		t.Errorf("remedies = %q", ex.Remedies)
	}

	// Once enough is free, the claim is allocatable on node-a.
	a.DeleteClaim(owner)
	ex = a.Explain(context.Background(), c)
	if !ex.Allocatable || ex.Node != "node-a" || len(ex.Remedies) != 0 {
		t.Errorf("explanation = %+v", ex)
	}
}

func assertReason(t *testing.T, d DeviceExplanation, code, substr string) {
	t.Helper()
	for _, r := range d.Reasons {
		if r.Code == code && strings.Contains(r.Message, substr) {
			return
		}
	}
	t.Errorf("device %s/%s: no reason %s containing %q in %+v", d.Pool, d.Device, code, substr, d.Reasons)
}

func findDevice(t *testing.T, re RequestExplanation, poolDevice string) DeviceExplanation {
	t.Helper()
	for _, d := range re.Devices {
		if d.Pool+"/"+d.Device == poolDevice {
			return d
		}
	}
	t.Fatalf("request %s: no device %s", re.Name, poolDevice)
	return DeviceExplanation{}
}

func hasRemedy(ex Explanation, substr string) bool {
	for _, r := range ex.Remedies {
		if strings.Contains(r, substr) {
			return true
		}
	}
	return false
}

func BenchmarkAllocate(b *testing.B) {
	var nodes []string
	for i := range 500 {
		nodes = append(nodes, fmt.Sprintf("node-%03d", i))
	}
	a := cluster(b, nodes, 10, func(node string, i int) attrs {
		return attrs{"index": num(int64(i))}
	})
	ctx := context.Background()
	b.Run("first-node", func(b *testing.B) {
		c := newClaim("c", exactly("gpu", "gpu", 2))
		for b.Loop() {
			if _, err := a.Allocate(ctx, c); err != nil {
				b.Fatal(err)
			}
			a.Release(c.UID)
		}
	})
	b.Run("last-node", func(b *testing.B) {
		// Only node-499 has a device with index 9 free.
		for _, n := range nodes[:499] {
			r := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: driver, Pool: n, Device: "dev-9"}}}}
			if err := a.Reserve(types.UID("fill-"+n), r); err != nil {
				b.Fatal(err)
			}
		}
		c := newClaim("c", exactly("gpu", "gpu", 1, `device.attributes["`+driver+`"].index == 9`))
		for b.Loop() {
			r, err := a.Allocate(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			if n := nodeOf(b, r); n != "node-499" {
				b.Fatalf("node = %s", n)
			}
			a.Release(c.UID)
		}
	})
}

func taintRule(name string, sel *resourcev1.DeviceTaintSelector, effect resourcev1.DeviceTaintEffect) *resourcev1.DeviceTaintRule {
	return &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: sel,
			Taint: resourcev1.DeviceTaint{Key: "maintenance", Value: name, Effect: effect}},
	}
}

// DeviceTaintRules taint the devices they select, as kube-scheduler's ResourceSlice tracker
// applies them: by driver, pool and device, unset fields matching all, no selector matching
// nothing, effect None not preventing allocation, tolerations in the request honoured.
func TestDeviceTaintRules(t *testing.T) {
	ctx := context.Background()
	a := cluster(t, []string{"node-a", "node-b"}, 2, nil)
	free := func(c *resourcev1.ResourceClaim) []string {
		t.Helper()
		ex := a.Explain(ctx, c)
		var out []string
		for _, d := range ex.Requests[0].Devices {
			if d.Available {
				out = append(out, d.Pool+"/"+d.Device)
			}
		}
		return out
	}
	all := newClaim("all", resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeAll}})

	a.UpsertTaintRule(taintRule("none", &resourcev1.DeviceTaintSelector{Driver: ptr.To(driver)}, resourcev1.DeviceTaintEffectNone))
	a.UpsertTaintRule(taintRule("noselector", nil, resourcev1.DeviceTaintEffectNoSchedule))
	a.UpsertTaintRule(taintRule("otherdriver", &resourcev1.DeviceTaintSelector{Driver: ptr.To("other.example.com")}, resourcev1.DeviceTaintEffectNoSchedule))
	if got := free(all); len(got) != 4 {
		t.Fatalf("rules that select nothing or have effect None: available %v, want all 4", got)
	}
	a.UpsertTaintRule(taintRule("dev0", &resourcev1.DeviceTaintSelector{Pool: ptr.To("node-a"), Device: ptr.To("dev-0")}, resourcev1.DeviceTaintEffectNoSchedule))
	a.UpsertTaintRule(taintRule("poolb", &resourcev1.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To("node-b")}, resourcev1.DeviceTaintEffectNoExecute))
	if got, want := free(all), []string{"node-a/dev-1"}; !slices.Equal(got, want) {
		t.Fatalf("available %v, want %v", got, want)
	}
	ex := a.Explain(ctx, all)
	assertReason(t, findDevice(t, ex.Requests[0], "node-a/dev-0"), ReasonTainted, "maintenance=dev0:NoSchedule (from DeviceTaintRule dev0)")
	assertReason(t, findDevice(t, ex.Requests[0], "node-b/dev-1"), ReasonTainted, "maintenance=poolb:NoExecute (from DeviceTaintRule poolb)")
	mustFail(t, a, all)

	two := newClaim("two", exactly("gpu", "gpu", 2))
	mustFail(t, a, two)
	one := newClaim("one", exactly("gpu", "gpu", 1))
	if got := devicesOf(mustAllocate(t, a, one)); !slices.Equal(got, []string{"gpu=node-a/dev-1"}) {
		t.Errorf("one device: got %v, want the only untainted one", got)
	}
	a.Release(one.UID)

	tolerating := newClaim("tol", exactly("gpu", "gpu", 2))
	tolerating.Spec.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{
		Key: "maintenance", Operator: resourcev1.DeviceTolerationOpEqual, Value: "poolb", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	if got := nodeOf(t, mustAllocate(t, a, tolerating)); got != "node-b" {
		t.Errorf("tolerating poolb: allocated on %s, want node-b", got)
	}
	a.Release(tolerating.UID)

	// Removing the rule makes the devices usable again.
	a.DeleteTaintRule(taintRule("poolb", nil, ""))
	if got := nodeOf(t, mustAllocate(t, a, two)); got != "node-b" {
		t.Errorf("after deleting poolb: allocated on %s, want node-b", got)
	}

	// With the DRADeviceTaintRules gate off the rules are ignored.
	off := New(Options{IgnoreDeviceTaintRules: true})
	off.UpsertClass(newClass("gpu"))
	off.UpsertNode(newNode("node-a"))
	off.UpsertSlice(compactslice.From(newSlice("node-a", 1, nil)))
	off.UpsertTaintRule(taintRule("all", &resourcev1.DeviceTaintSelector{}, resourcev1.DeviceTaintEffectNoSchedule))
	mustAllocate(t, off, newClaim("c", exactly("gpu", "gpu", 1)))
}

// Explain names exhausted shared counters (a whole GPU and its partitions), a capacity
// request beyond a shared device's remaining capacity or its requestPolicy, and counts the
// excluded devices per reason.
func TestExplainCountersAndCapacity(t *testing.T) {
	byID := func(id string) string { return `device.attributes["` + driver + `"].id == "` + id + `"` }
	ctx := context.Background()
	a := New(Options{})
	a.UpsertClass(newClass("gpu"))
	a.UpsertNode(newNode("node-a"))
	mem := func(s string) map[string]resourcev1.Counter {
		return map[string]resourcev1.Counter{"memory": {Value: resource.MustParse(s)}}
	}
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "parts"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("node-a"),
			Pool: resourcev1.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 2},
			Devices: []resourcev1.Device{
				{Name: "gpu-0", Attributes: attrs{"id": str("gpu-0")}, ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0-counters", Counters: mem("40Gi")}}},
				{Name: "gpu-0-mig-0", Attributes: attrs{"id": str("gpu-0-mig-0")}, ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0-counters", Counters: mem("20Gi")}}},
				{Name: "shared", Attributes: attrs{"id": str("shared")}, AllowMultipleAllocations: ptr.To(true), Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
					"bandwidth": {Value: resource.MustParse("10G"), RequestPolicy: &resourcev1.CapacityRequestPolicy{
						Default: ptr.To(resource.MustParse("1G")), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1G")), Max: ptr.To(resource.MustParse("8G"))}}}}},
			},
		},
	}
	a.UpsertSlice(compactslice.From(s))
	// Since 1.35 a slice has either devices or shared counters.
	a.UpsertSlice(compactslice.From(&resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "counters"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("node-a"),
			Pool:           resourcev1.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 2},
			SharedCounters: []resourcev1.CounterSet{{Name: "gpu-0-counters", Counters: mem("40Gi")}}},
	}))
	whole := newClaim("whole", exactly("gpu", "gpu", 1, byID("gpu-0")))
	mustAllocate(t, a, whole) // in flight: takes all of the counter set

	part := newClaim("part", exactly("gpu", "gpu", 1, byID("gpu-0-mig-0")))
	mustFail(t, a, part)
	ex := a.Explain(ctx, part)
	assertReason(t, findDevice(t, ex.Requests[0], "node-a/gpu-0-mig-0"), ReasonCountersExhausted, "counter set gpu-0-counters: memory needs 20Gi, 0 of 40Gi left (used by gpu-0)")
	if !hasRemedy(ex, "share counters with allocated devices") {
		t.Errorf("remedies = %q", ex.Remedies)
	}
	if got := ex.Requests[0].Excluded; got[ReasonCountersExhausted] != 1 || got[ReasonRequestSelectorFalse] != 2 {
		t.Errorf("excluded = %v, want CountersExhausted=1 RequestSelectorFalse=2", got)
	}

	bw := func(name, q string) *resourcev1.ResourceClaim {
		c := newClaim(name, exactly("net", "gpu", 1, byID("shared")))
		c.Spec.Devices.Requests[0].Exactly.Capacity = &resourcev1.CapacityRequirements{
			Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse(q)}}
		return c
	}
	tooBig := bw("big", "9G")
	mustFail(t, a, tooBig)
	ex = a.Explain(ctx, tooBig)
	assertReason(t, findDevice(t, ex.Requests[0], "node-a/shared"), ReasonRequestPolicy, "9G exceeds requestPolicy.validRange.max 8G")
	if !hasRemedy(ex, "spec.devices.requests[0].exactly.capacity.requests") {
		t.Errorf("remedies = %q", ex.Remedies)
	}
	first := bw("first", "6G")
	r := mustAllocate(t, a, first)
	a.UpsertClaim(&resourcev1.ResourceClaim{ObjectMeta: first.ObjectMeta, Status: resourcev1.ResourceClaimStatus{Allocation: r}})
	second := bw("second", "6G")
	mustFail(t, a, second)
	ex = a.Explain(ctx, second)
	assertReason(t, findDevice(t, ex.Requests[0], "node-a/shared"), ReasonCapacityExhausted, "capacity bandwidth: requests 6G, 4G of 10G left")
	mustAllocate(t, a, bw("third", "4G"))
}
