package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/compactslice"
)

// ExplainTarget is the latency explain must stay under on ExplainNodes × ExplainDevices: a
// person waits for it at a terminal.
const ExplainTarget = 3 * time.Second

// ExplainResult is the latency of explaining one pending claim.
type ExplainResult struct {
	Nodes, Devices int
	// Latency is the median of the runs; every run evaluates every device against the request
	// and runs the structured allocator on every node (the claim fits nowhere, the worst case).
	Latency time.Duration
	Runs    int
}

// Explain measures allocator.Explain, the work behind `draforge explain` and /api/explain, on
// nodes × devices devices of one driver plus as many of a second driver (which the claim's
// class excludes), with one device per node allocated, for a claim asking for devices+1
// devices of one node. No cluster is needed: explain reads a snapshot.
func Explain(ctx context.Context, nodes, devices, runs int) (ExplainResult, error) {
	a := allocator.New(allocator.Options{})
	const driver, other = "gpu.bench.draforge", "nic.bench.draforge"
	a.UpsertClass(&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + driver + `" && device.attributes["` + driver + `"].model == "h100"`}}}}})
	for i := range nodes {
		node := fmt.Sprintf("node-%04d", i)
		a.UpsertNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"kubernetes.io/hostname": node}}})
		for _, d := range []string{driver, other} {
			s := &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: d + "-" + node},
				Spec: resourcev1.ResourceSliceSpec{Driver: d, NodeName: ptr.To(node),
					Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
			}
			for j := range devices {
				s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("dev-%d", j),
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("h100")}}})
			}
			a.UpsertSlice(compactslice.From(s))
		}
		used := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "used-" + node, UID: types.UID("used-" + node)},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: node, Device: "dev-0"}}}}}}
		a.UpsertClaim(used)
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "too-big", UID: "too-big"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", Count: int64(devices)},
		}}}},
	}
	var times []time.Duration
	for range runs {
		if err := ctx.Err(); err != nil {
			return ExplainResult{}, err
		}
		start := time.Now()
		ex := a.Explain(ctx, claim)
		times = append(times, time.Since(start))
		if ex.Allocatable || len(ex.Nodes) != nodes || ex.Requests[0].Excluded[allocator.ReasonAlreadyAllocated] != nodes {
			return ExplainResult{}, fmt.Errorf("unexpected explanation: allocatable=%v nodes=%d excluded=%v", ex.Allocatable, len(ex.Nodes), ex.Requests[0].Excluded)
		}
	}
	slices.Sort(times)
	return ExplainResult{Nodes: nodes, Devices: devices, Latency: quantile(times, 0.5), Runs: runs}, nil
}
