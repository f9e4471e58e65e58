package pods

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/podnamespaces"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/engine"
)

const driver = "sim.draforge.oaslananka"

// fixture: node-a simulated, node-r real; pool p on node-a with gpu-0 healthy, gpu-1 tainted
// unhealthy; the pod's template claim "gpu" generated as claim c, allocated gpu-0 and gpu-1 and
// reserved for the pod.
func fixture(t *testing.T) (*Driver, *corev1.Pod) {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvr.ResourceSlices: "ResourceSliceList", gvr.ResourceClaims: "ResourceClaimList", gvr.Nodes: "NodeList",
	})
	inf := engine.NewInformers(client)
	d, err := Register(engine.NewRegistry(), inf, nil, clusterview.NewPools())
	if err != nil {
		t.Fatal(err)
	}
	add := func(g schema.GroupVersionResource, o any) {
		if err := inf.For(g).GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	add(gvr.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{simnode.LabelSimulated: simnode.LabelSimulatedValue}}})
	add(gvr.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-r"}})
	node := "node-a"
	add(gvr.ResourceSlices, compactslice.From(&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1", Taints: []resourcev1.DeviceTaint{
				{Key: simdevice.TaintUnhealthy, Value: "true", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}}}}))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "pod-uid"},
		Spec: corev1.PodSpec{NodeName: "node-a",
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("tpl")}},
			Containers: []corev1.Container{
				{Name: "main", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu", Request: "gpus"}}}},
				{Name: "sidecar"},
			}},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("c")}}},
	}
	// Claims are cached unstructured, as the claim machine's informer holds them.
	add(gvr.ResourceClaims, toU(t, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpus", Driver: driver, Pool: "p", Device: "gpu-0"},
				{Request: "gpus", Driver: driver, Pool: "p", Device: "gpu-1"},
				{Request: "gpus", Driver: driver, Pool: "p", Device: "gpu-9"}, // no longer offered
			}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "w", UID: "pod-uid"}},
		}}))
	return d, pod
}

func toU(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestHealthAsTheKubeletWritesIt(t *testing.T) {
	d, pod := fixture(t)
	h := d.health(context.Background(), pod)
	main := h["main"]
	if len(h) != 1 || len(main) != 1 || main[0].Name != "claim:gpu/gpus" {
		t.Fatalf("health %+v", h)
	}
	want := map[corev1.ResourceID]corev1.ResourceHealthStatus{
		driver + "/p/gpu-0": corev1.ResourceHealthStatusHealthy,
		driver + "/p/gpu-1": corev1.ResourceHealthStatusUnhealthy,
		driver + "/p/gpu-9": corev1.ResourceHealthStatusUnknown,
	}
	if len(main[0].Resources) != len(want) {
		t.Fatalf("resources %+v", main[0].Resources)
	}
	for _, r := range main[0].Resources {
		if want[r.ResourceID] != r.Health {
			t.Errorf("%s: %s, want %s", r.ResourceID, r.Health, want[r.ResourceID])
		}
	}
	// The pod's status shows it already: nothing changed. A stale health: changed.
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", AllocatedResourcesStatus: main}, {Name: "sidecar"}}
	if f, err := d.deviceHealthChanged(context.Background(), toU(t, pod)); err != nil || f.Holds {
		t.Errorf("unchanged health reported changed: %+v %v", f, err)
	}
	stale := []corev1.ResourceStatus{{Name: "claim:gpu/gpus", Resources: []corev1.ResourceHealth{{ResourceID: driver + "/p/gpu-0", Health: corev1.ResourceHealthStatusHealthy}}}}
	pod.Status.ContainerStatuses[0].AllocatedResourcesStatus = stale
	if f, _ := d.deviceHealthChanged(context.Background(), toU(t, pod)); !f.Holds {
		t.Error("changed health not reported")
	}
	// The template reads the value, keyed by container name; no JSON in the message.
	f, err := d.deviceHealth(context.Background(), toU(t, pod))
	if v, ok := f.Value.(Health); err != nil || !ok || len(v["main"]) != 1 || f.Message != "" {
		t.Errorf("deviceHealth %+v %v", f, err)
	}
}

// TestNetworkFact: podNetwork's value is the pod's and its host's address as typed data, in
// the ranges the kubelet's would be in, stable for the same node and pod.
func TestNetworkFact(t *testing.T) {
	d, pod := fixture(t)
	f, err := d.network(context.Background(), toU(t, pod))
	n, ok := f.Value.(Network)
	if err != nil || !f.Holds || !ok || f.Message != "" {
		t.Fatalf("network %+v %v", f, err)
	}
	if !netip.MustParsePrefix("172.16.0.0/12").Contains(netip.MustParseAddr(n.HostIP)) ||
		!netip.MustParsePrefix("10.244.0.0/16").Contains(netip.MustParseAddr(n.PodIP)) {
		t.Errorf("network %+v", n)
	}
	if again, _ := d.network(context.Background(), toU(t, pod)); again.Value != f.Value {
		t.Errorf("network not stable: %+v, then %+v", f.Value, again.Value)
	}
	// Templates read it in JSON form, by the JSON field names.
	b, _ := json.Marshal(n)
	if string(b) != `{"hostIP":"`+n.HostIP+`","podIP":"`+n.PodIP+`"}` {
		t.Errorf("network JSON %s", b)
	}
}

func TestFacts(t *testing.T) {
	d, pod := fixture(t)
	ctx := context.Background()
	if f, _ := d.onSimulatedNode(ctx, toU(t, pod)); !f.Holds {
		t.Error("node-a is simulated")
	}
	if f, _ := d.claimsReserved(ctx, toU(t, pod)); !f.Holds {
		t.Errorf("claims reserved: %q", f.Message)
	}
	real := pod.DeepCopy()
	real.Spec.NodeName = "node-r"
	if f, _ := d.onSimulatedNode(ctx, toU(t, real)); f.Holds || f.Message != "node node-r is not simulated" {
		t.Errorf("real node: %+v", f)
	}
	// --pod-namespaces without the pod's namespace: a pod on a simulated node is pending,
	// naming the flag; one on a real node is simply not ours.
	d.PodNamespaces, _ = podnamespaces.Parse([]string{"team-a"})
	_, err := d.onSimulatedNode(ctx, toU(t, pod))
	var p *engine.PendingError
	if !errors.As(err, &p) || p.Reason != podnamespaces.Reason || !strings.Contains(p.Message, `namespace "ns" is not in the controller's --pod-namespaces (team-a)`) {
		t.Errorf("pod outside --pod-namespaces: %v, want pending %s", err, podnamespaces.Reason)
	}
	if f, err := d.onSimulatedNode(ctx, toU(t, real)); err != nil || f.Holds {
		t.Errorf("real node outside --pod-namespaces: %+v %v", f, err)
	}
	d.PodNamespaces, _ = podnamespaces.Parse([]string{"ns"})
	if f, err := d.onSimulatedNode(ctx, toU(t, pod)); err != nil || !f.Holds {
		t.Errorf("pod in --pod-namespaces: %+v %v", f, err)
	}
	other := pod.DeepCopy()
	other.UID = "another"
	if f, _ := d.claimsReserved(ctx, toU(t, other)); f.Holds || f.Message != "ResourceClaim c is not reserved for the pod" {
		t.Errorf("not reserved: %+v", f)
	}
	// Reserved for the pod's PodGroup (DRAWorkloadResourceClaims): the pod knows its group by
	// name only, as the kubelet's resourceclaim.IsReservedForPod matches it.
	o, _, _ := d.inf.For(gvr.ResourceClaims).GetStore().GetByKey("ns/c")
	group := o.(*unstructured.Unstructured).DeepCopy()
	if err := unstructured.SetNestedSlice(group.Object, []any{map[string]any{
		"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "trainers", "uid": "group-uid"}}, "status", "reservedFor"); err != nil {
		t.Fatal(err)
	}
	if err := d.inf.For(gvr.ResourceClaims).GetStore().Update(group); err != nil {
		t.Fatal(err)
	}
	member := pod.DeepCopy()
	member.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("trainers")}
	if f, _ := d.claimsReserved(ctx, toU(t, member)); !f.Holds {
		t.Errorf("reserved for the pod's PodGroup: %+v", f)
	}
	stranger := pod.DeepCopy()
	stranger.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("others")}
	for _, p := range []*corev1.Pod{pod, stranger} {
		if f, _ := d.claimsReserved(ctx, toU(t, p)); f.Holds || f.Message != "ResourceClaim c is not reserved for the pod" {
			t.Errorf("pod %s in group %v, claim reserved for PodGroup trainers: %+v", p.Name, p.Spec.SchedulingGroup, f)
		}
	}
	if err := d.inf.For(gvr.ResourceClaims).GetStore().Update(o); err != nil {
		t.Fatal(err)
	}
	early := pod.DeepCopy()
	early.Status.ResourceClaimStatuses = nil
	if f, _ := d.claimsReserved(ctx, toU(t, early)); f.Holds || f.Message != "claim gpu has no generated ResourceClaim yet" {
		t.Errorf("before kcm: %+v", f)
	}
	// kube-controller-manager decided no claim is needed (nil name): nothing to wait for.
	none := pod.DeepCopy()
	none.Status.ResourceClaimStatuses[0].ResourceClaimName = nil
	if f, _ := d.claimsReserved(ctx, toU(t, none)); !f.Holds {
		t.Errorf("no claim needed: %+v", f)
	}
}

func TestMappersAndNetwork(t *testing.T) {
	d, _ := fixture(t)
	o, _, _ := d.inf.For(gvr.ResourceClaims).GetStore().GetByKey("ns/c")
	u := o.(*unstructured.Unstructured)
	if got := ClaimPods(u); len(got) != 1 || got[0] != (cache.ObjectName{Namespace: "ns", Name: "w"}) {
		t.Errorf("ClaimPods %v", got)
	}
	if keys, _ := reservedPools(u); len(keys) != 3 || keys[0] != driver+"/p" {
		t.Errorf("reservedPools %v", keys)
	}
	s, _, _ := d.inf.For(gvr.ResourceSlices).GetStore().GetByKey("s")
	if got := d.slicePods(s.(*compactslice.Slice)); len(got) != 1 || got[0].Name != "w" {
		t.Errorf("slicePods %v", got)
	}
	// A claim not reserved, or reserved on another pool, is not mapped from the slice.
	claim, _ := engine.Typed[resourcev1.ResourceClaim](u)
	other := claim.DeepCopy()
	other.Name = "other"
	other.Status.Allocation.Devices.Results[0].Pool = "q"
	other.Status.Allocation.Devices.Results = other.Status.Allocation.Devices.Results[:1]
	unreserved := claim.DeepCopy()
	unreserved.Name, unreserved.Status.ReservedFor = "unreserved", nil
	for _, c := range []*resourcev1.ResourceClaim{other, unreserved} {
		if err := d.inf.For(gvr.ResourceClaims).GetStore().Add(toU(t, c)); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.slicePods(s.(*compactslice.Slice)); len(got) != 1 || got[0].Name != "w" {
		t.Errorf("slicePods with claims elsewhere %v", got)
	}
	if keys, _ := reservedPools(toU(t, unreserved)); keys != nil {
		t.Errorf("unreserved claim indexed under %v", keys)
	}
	if network("p", "gpu-0") != nil || network("p", "nic-x") != nil {
		t.Error("only nic-<i> devices have network data")
	}
	if n := network("p", "nic-3"); n == nil || n.InterfaceName != "nic3" || len(n.IPs) != 1 {
		t.Errorf("nic-3 network %+v", n)
	}
	for seed, prefix := range map[string]string{"node-a": "172.16.0.0/12", "uid": "10.244.0.0/16"} {
		base := netip.MustParsePrefix(prefix)
		bits := base.Bits()
		a := addr(seed, base.Addr().As4(), bits)
		if ip := netip.MustParseAddr(a); !base.Contains(ip) || a != addr(seed, base.Addr().As4(), bits) {
			t.Errorf("addr(%s) = %s, want a stable address in %s", seed, a, prefix)
		}
	}
}

// The simulated driver writes status.devices only for devices of pools that report it: found
// through the slice's SimulatedDevicePool labels, whatever the DRA pool is called.
func TestReportsDeviceStatus(t *testing.T) {
	d, _ := fixture(t)
	node := "node-a"
	if err := d.inf.For(gvr.ResourceSlices).GetStore().Add(compactslice.From(&resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "sdp-slice", Labels: map[string]string{simdevice.LabelSDPNamespace: "ns", simdevice.LabelSDPName: "nics"}},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: "sdp-0123", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "nic-0"}}}})); err != nil {
		t.Fatal(err)
	}
	pool := func(spec map[string]any) *unstructured.Unstructured {
		spec["deviceType"], spec["deviceCount"], spec["targetNodes"] = "nic", int64(1), []any{"node-a"}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": simdevice.Group + "/" + simdevice.Version,
			"kind": simdevice.Kind, "metadata": map[string]any{"namespace": "ns", "name": "nics"}, "spec": spec}}
	}
	reports := d.reports(driver)
	for _, c := range []struct {
		name string
		pool *unstructured.Unstructured
		want bool
	}{
		{"pool not seen", nil, false},
		{"sriov-vf profile", pool(map[string]any{"profile": "sriov-vf"}), true},
		{"deviceStatus false over the profile", pool(map[string]any{"profile": "sriov-vf", "deviceStatus": false}), false},
		{"no profile", pool(map[string]any{}), false},
		{"deviceStatus true", pool(map[string]any{"deviceStatus": true}), true},
	} {
		if c.pool != nil {
			d.pools.Upsert(c.pool)
		}
		if got := reports("sdp-0123", "nic-0"); got != c.want {
			t.Errorf("%s: reports %v, want %v", c.name, got, c.want)
		}
	}
	if reports("p", "gpu-0") {
		t.Error("a slice without a SimulatedDevicePool reports status")
	}
	d.pools.Delete(pool(map[string]any{}))
	if reports("sdp-0123", "nic-0") {
		t.Error("a deleted pool still reports status")
	}
}

// TestPodFields: the partial conversion carries every field the driver reads exactly as a
// full conversion does, and nothing of the rest.
func TestPodFields(t *testing.T) {
	name := "gpu-claim-x"
	full := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Labels: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{
			NodeName:        "sim-0",
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("g")},
			ResourceClaims:  []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}},
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
				Claims: []corev1.ResourceClaim{{Name: "gpu", Request: "r"}}}}},
		},
		Status: corev1.PodStatus{
			Phase:                       corev1.PodRunning,
			Conditions:                  []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ResourceClaimStatuses:       []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}},
			ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "ext"},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true,
				State:                    corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
				AllocatedResourcesStatus: []corev1.ResourceStatus{{Name: "claim:gpu/r", Resources: []corev1.ResourceHealth{{ResourceID: "d/p/gpu-0", Health: corev1.ResourceHealthStatusHealthy}}}}}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(full)
	if err != nil {
		t.Fatal(err)
	}
	got, err := podFields(&unstructured.Unstructured{Object: m})
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Spec: corev1.PodSpec{SchedulingGroup: full.Spec.SchedulingGroup, ResourceClaims: full.Spec.ResourceClaims, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Claims: full.Spec.Containers[0].Resources.Claims}}}},
		Status: corev1.PodStatus{ResourceClaimStatuses: full.Status.ResourceClaimStatuses,
			ExtendedResourceClaimStatus: full.Status.ExtendedResourceClaimStatus,
			ContainerStatuses:           []corev1.ContainerStatus{{Name: "c", AllocatedResourcesStatus: full.Status.ContainerStatuses[0].AllocatedResourcesStatus}}},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("podFields:\n%+v\nwant\n%+v", got, want)
	}
	if _, err := podFields(&unstructured.Unstructured{Object: map[string]any{"kind": "Node"}}); err == nil {
		t.Error("podFields of a Node: no error")
	}
	// A pod without spec or status (a minimal cache entry) converts to its identity.
	if p, err := podFields(&unstructured.Unstructured{Object: map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "q"}}}); err != nil || p.Name != "q" {
		t.Errorf("bare pod: %+v, %v", p, err)
	}
}

// TestClaimStatus: a cached claim is converted to its identity and status (what the pass
// reads), without its spec; a typed claim is used as it is.
func TestClaimStatus(t *testing.T) {
	full := &resourcev1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "r",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"}}}}},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "r", Driver: "d", Pool: "p", Device: "gpu-0"}}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "pu"}},
			Devices:     []resourcev1.AllocatedDeviceStatus{{Driver: "d", Pool: "p", Device: "gpu-0"}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(full)
	if err != nil {
		t.Fatal(err)
	}
	got := claimStatus(&unstructured.Unstructured{Object: m})
	want := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", ResourceVersion: "7"}, Status: full.Status}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("claimStatus:\n%+v\nwant\n%+v", got, want)
	}
	if got := claimStatus(full); got != full {
		t.Errorf("a typed claim: %p, want the same %p", got, full)
	}
	if got := claimStatus("not a claim"); got != nil {
		t.Errorf("not a claim: %+v", got)
	}
}

// TestUpdateDevicesSendsTheWholeClaim: the pass holds a claim's status only, but the status
// update sends the claim as cached, spec and metadata included; nothing is sent when the
// entries are already there, and a claim no longer cached (or re-created) is NotFound.
func TestUpdateDevicesSendsTheWholeClaim(t *testing.T) {
	d, _ := fixture(t)
	full := &resourcev1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "r",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"}}}}},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "p", Device: "gpu-0"}}}}},
	}
	kube := kubefake.NewClientset(full.DeepCopy())
	d.kube = kube
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(full)
	if err != nil {
		t.Fatal(err)
	}
	cached := &unstructured.Unstructured{Object: m}
	if err := d.inf.For(gvr.ResourceClaims).GetStore().Add(cached); err != nil {
		t.Fatal(err)
	}
	c := podClaim{podName: "gpu", claimName: "c", claim: claimStatus(cached)}
	if err := d.updateDevices(t.Context(), c, driver, nil); err != nil || len(kube.Actions()) != 0 {
		t.Fatalf("nothing to write: %v, %d requests", err, len(kube.Actions()))
	}
	entries := []resourcev1.AllocatedDeviceStatus{{Driver: driver, Pool: "p", Device: "gpu-0"}}
	if err := d.updateDevices(t.Context(), c, driver, entries); err != nil {
		t.Fatal(err)
	}
	acts := kube.Actions()
	if len(acts) != 1 || acts[0].GetSubresource() != "status" {
		t.Fatalf("requests %v, want one status update", acts)
	}
	sent := acts[0].(k8stesting.UpdateAction).GetObject().(*resourcev1.ResourceClaim)
	if !equality.Semantic.DeepEqual(sent.Spec, full.Spec) || sent.Labels["a"] != "b" || len(sent.Status.Devices) != 1 {
		t.Errorf("sent %+v, want the whole claim with the entry", sent)
	}
	c.claim.UID = "other"
	if err := d.updateDevices(t.Context(), c, driver, entries); !isGone(err) {
		t.Errorf("a re-created claim: %v, want NotFound", err)
	}
}
