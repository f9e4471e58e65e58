// Package inventorytest builds hand-made Snapshots for tests of the diagnostics packages.
package inventorytest

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/simdevice"
)

// Node returns a Node.
func Node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

// Pool returns a valid, defaulted SDP with count GPUs on nodes.
func Pool(ns, name string, count int, nodes ...string) *simdevice.Pool {
	p := &simdevice.Pool{
		TypeMeta:   metav1.TypeMeta{APIVersion: simdevice.Group + "/" + simdevice.Version, Kind: simdevice.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec: simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: count, TargetNodes: nodes,
			Attributes: map[string]simdevice.AttributeValue{"model": {String: ptr.To("H100")}},
			Capacities: map[string]resource.Quantity{"memory": resource.MustParse("80Gi")}},
	}
	p.Default()
	return p
}

// Slices returns the pool's desired slices on nodes with generation 1.
func Slices(p *simdevice.Pool, nodes []*corev1.Node) []*resourcev1.ResourceSlice {
	out, err := simdevice.DesiredSlices(p, nodes)
	if err != nil {
		panic(err)
	}
	for _, s := range out {
		s.Spec.Pool.Generation = 1
	}
	return out
}

// Class returns a DeviceClass selecting the simulated driver.
func Class(name string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + simdevice.DefaultDriverName + `"`}}}}}
}

// Claim returns a claim for one device of class.
func Claim(ns, name, class string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-claim-" + name)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
}

// Allocate marks the claim allocated the device on node (pool per PoolNameFor).
func Allocate(c *resourcev1.ResourceClaim, poolNs, poolName, node, device string) {
	c.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: simdevice.DefaultDriverName, Pool: simdevice.PoolNameFor(poolNs, poolName, node), Device: device,
		}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
}

// Pod returns a pod using claim by name, scheduled on node ("" for unscheduled).
func Pod(ns, name, claim, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-pod-" + name)},
		Spec: corev1.PodSpec{NodeName: node, ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}}}
}

// Healthy is a consistent snapshot: SDP demo/gpus with 2 GPUs on node-a and node-b, class
// gpu, claim demo/used allocated gpu-0 on node-a and reserved for pod demo/worker, and claim
// demo/waiting pending.
func Healthy() *inventory.Snapshot {
	nodes := []*corev1.Node{Node("node-a"), Node("node-b")}
	p := Pool("demo", "gpus", 2, "node-a", "node-b")
	used := Claim("demo", "used", "gpu")
	Allocate(used, "demo", "gpus", "node-a", "gpu-0")
	used.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "worker", UID: "uid-pod-worker"}}
	s := &inventory.Snapshot{
		Pools:   []*simdevice.Pool{p},
		Slices:  Slices(p, nodes),
		Classes: []*resourcev1.DeviceClass{Class("gpu")},
		Claims:  []*resourcev1.ResourceClaim{used, Claim("demo", "waiting", "gpu")},
		Pods:    []*corev1.Pod{Pod("demo", "worker", "used", "node-a")},
		Nodes:   nodes,
	}
	return s.Sort()
}
