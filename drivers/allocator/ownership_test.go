package allocator

import (
	"context"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/compactslice"
)

// published marks slices the way the test's fake DRAForge does: by a label.
func published(labels map[string]string) bool { return labels["test/published"] == "yes" }

// ownershipCluster has one published pool (driver `driver`, model "sim") on node-sim and one
// pool of a real driver (gpu.real-vendor.com, model "real") on node-a, with classes:
//   - gpu: the simulated driver by name;
//   - real: the real driver by name;
//   - any-gpu: every device (selects across drivers);
//   - model-sim: any driver's devices whose model is "sim" (selects by attribute only).
func ownershipCluster(t *testing.T) *Allocator {
	t.Helper()
	a := New(Options{})
	sim := newSlice("node-sim", 2, func(int) attrs { return attrs{"model": str("sim")} })
	sim.Labels = map[string]string{"test/published": "yes"}
	real := newSlice("node-a", 2, func(int) attrs { return attrs{"model": str("real")} })
	real.Spec.Driver = "gpu.real-vendor.com"
	a.UpsertSlice(compactslice.From(sim))
	a.UpsertSlice(compactslice.From(real))
	a.UpsertClass(newClass("gpu"))
	real2 := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "real"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.real-vendor.com"`}}}}}
	a.UpsertClass(real2)
	a.UpsertClass(&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "any-gpu"}})
	a.UpsertClass(&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "model-sim"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `["` + driver + `", "gpu.real-vendor.com"].exists(d, has(device.attributes[d].model) && device.attributes[d].model == "sim")`}}}}})
	return a
}

func TestOwnership(t *testing.T) {
	a := ownershipCluster(t)
	firstAvailable := func(name string, subs ...resourcev1.DeviceSubRequest) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: name, FirstAvailable: subs}
	}
	sub := func(name, class string) resourcev1.DeviceSubRequest {
		return resourcev1.DeviceSubRequest{Name: name, DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}
	}
	for _, tc := range []struct {
		name   string
		claim  *resourcev1.ResourceClaim
		owned  bool
		reason string
	}{
		{"simulated class", newClaim("c", exactly("gpu", "gpu", 1)), true, "every request (gpu) can be satisfied only by devices DRAForge publishes"},
		{"real driver's class", newClaim("c", exactly("gpu", "real", 1)), false,
			"request gpu: device gpu.real-vendor.com/node-a/dev-0 on node node-a, which DRAForge does not publish, matches class \"real\""},
		{"mixed claim", newClaim("c", exactly("sim", "gpu", 1), exactly("other", "real", 1)), false, "request other: device gpu.real-vendor.com"},
		{"class across drivers", newClaim("c", exactly("gpu", "any-gpu", 1)), false, "request gpu: device gpu.real-vendor.com"},
		// The class matches any driver; the request's own selector narrows it to published devices.
		{"request selector narrows", newClaim("c", exactly("gpu", "any-gpu", 1, `device.driver == "`+driver+`"`)), true, ""},
		// Selected by attribute, not by driver name: still decided from the devices.
		{"attribute-only class", newClaim("c", exactly("gpu", "model-sim", 1)), true, ""},
		{"missing class", newClaim("c", exactly("gpu", "nope", 1)), false, `request gpu: DeviceClass "nope" does not exist`},
		{"nothing matches", newClaim("c", exactly("gpu", "gpu", 1, `device.attributes["`+driver+`"].model == "h999"`)), false,
			"no device DRAForge publishes matches"},
		{"firstAvailable all simulated", newClaim("c", firstAvailable("gpu", sub("a", "gpu"), sub("b", "model-sim"))), true, ""},
		// kube-scheduler could pick the second subrequest, a real device: not DRAForge's.
		{"firstAvailable with a real alternative", newClaim("c", firstAvailable("gpu", sub("a", "gpu"), sub("b", "real"))), false, "request gpu/b: device gpu.real-vendor.com"},
		// A selector that errors on another driver's device counts as matching it.
		{"CEL error on a real device", newClaim("c", exactly("gpu", "any-gpu", 1, `device.attributes["`+driver+`"].model == "sim"`)), false, "request gpu: device gpu.real-vendor.com"},
		{"no requests", newClaim("c"), false, "requests no devices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := a.Ownership(context.Background(), tc.claim, published)
			if o.Owned != tc.owned || !strings.Contains(o.Reason, tc.reason) {
				t.Fatalf("Ownership = %v %q, want %v containing %q", o.Owned, o.Reason, tc.owned, tc.reason)
			}
		})
	}
}

// A pool is DRAForge's only while it has no slice of anyone else: the verdict follows the
// slices as they change.
func TestOwnershipFollowsSlices(t *testing.T) {
	a := ownershipCluster(t)
	claim := newClaim("c", exactly("gpu", "any-gpu", 1, `device.driver == "`+driver+`"`))
	if !a.Ownership(context.Background(), claim, published).Owned {
		t.Fatal("want owned before the foreign slice")
	}
	// A real driver starts publishing under the simulated driver's name (by name alone it
	// would look simulated): devices decide, not names.
	imposter := newSlice("node-b", 1, nil)
	imposter.Name = "imposter"
	a.UpsertSlice(compactslice.From(imposter))
	o := a.Ownership(context.Background(), claim, published)
	if o.Owned || !strings.Contains(o.Reason, driver+"/node-b/dev-0 on node node-b, which DRAForge does not publish") {
		t.Fatalf("want not owned because of the unpublished slice, got %+v", o)
	}
	a.DeleteSlice(compactslice.From(imposter))
	if !a.Ownership(context.Background(), claim, published).Owned {
		t.Fatal("want owned again once the foreign slice is gone")
	}
}

func TestAllPublished(t *testing.T) {
	a := ownershipCluster(t)
	alloc := func(results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.AllocationResult {
		return &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
	}
	sim := resourcev1.DeviceRequestAllocationResult{Request: "a", Driver: driver, Pool: "node-sim", Device: "dev-0"}
	real := resourcev1.DeviceRequestAllocationResult{Request: "b", Driver: "gpu.real-vendor.com", Pool: "node-a", Device: "dev-0"}
	gone := resourcev1.DeviceRequestAllocationResult{Request: "c", Driver: driver, Pool: "gone", Device: "dev-0"}
	for _, tc := range []struct {
		name  string
		alloc *resourcev1.AllocationResult
		want  bool
	}{
		{"published", alloc(sim), true},
		{"real", alloc(real), false},
		{"mixed", alloc(sim, real), false},
		{"unknown pool", alloc(gone), false},
		{"nil", nil, false},
	} {
		if got := a.AllPublished(tc.alloc, published); got != tc.want {
			t.Errorf("%s: AllPublished = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A pool with slices of both kinds is not DRAForge's.
	mixed := newSlice("node-sim", 1, nil)
	mixed.Name = "node-sim-foreign"
	a.UpsertSlice(compactslice.From(mixed))
	if a.AllPublished(alloc(sim), published) {
		t.Error("a pool with an unpublished slice must not count as published")
	}
}
