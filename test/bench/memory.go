package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/rs/zerolog"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/machines"
)

// MemoryKinds are the object kinds MeasureMemory fills the caches with, for the controller and
// for serve.
var MemoryKinds = []string{"resourceslices", "resourceslices/nvidia-gpu", "resourceclaims", "pods"}

// ControllerMemoryKinds are MemoryKinds and the controller's own: simulated nodes, each with the
// Lease its node machine renews (one node and its Lease count as one object).
var ControllerMemoryKinds = append(slices.Clone(MemoryKinds), "nodes")

// MemoryObjects returns n objects of kind as the API server would serve them: slices of 8
// simulated GPUs (DesiredSlices; 4 attributes and a capacity per device, or with the nvidia-gpu
// profile 12 attributes, a per-device UUID among them, and a capacity), allocated one-device
// claims, scheduled pods using a claim, Ready simulated nodes (simnode.Spec.Nodes) with their Leases.
func MemoryObjects(kind string, n int) ([]k8sruntime.Object, error) {
	var out []k8sruntime.Object
	add := func(o any) error {
		m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		out = append(out, &unstructured.Unstructured{Object: m})
		return nil
	}
	meta := func(name, ns string, i int) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			ResourceVersion: fmt.Sprint(1000 + i), CreationTimestamp: metav1.Now(), Generation: 1}
	}
	switch kind {
	case "resourceslices", "resourceslices/nvidia-gpu":
		spec := simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 8, NodeSelector: map[string]string{"x": "y"},
			Attributes: map[string]simdevice.AttributeValue{"scenario": {String: ptrTo("bench")}},
			Capacities: map[string]resource.Quantity{"memory": resource.MustParse("80Gi")}}
		if kind == "resourceslices/nvidia-gpu" {
			spec.Profile, spec.Attributes, spec.Capacities = simdevice.ProfileNvidiaGPU, nil, nil
		}
		pool := pooltest.Pool("bench", "mem", "mem-uid", spec)
		var nodes []*corev1.Node
		for i := range n {
			nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName(i), Labels: map[string]string{"x": "y"}}})
		}
		slices, err := simdevice.DesiredSlices(pool, nodes)
		if err != nil {
			return nil, err
		}
		for i, s := range slices {
			s.TypeMeta = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"}
			m := meta(s.Name, "", i)
			m.Labels = s.Labels
			s.ObjectMeta = m
			s.Spec.Pool.Generation = 1
			if err := add(s); err != nil {
				return nil, err
			}
		}
	case "resourceclaims":
		for i := range n {
			c := Claim("bench", fmt.Sprintf("c-%05d", i), "bench-alloc")
			c.TypeMeta = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"}
			c.ObjectMeta = meta(c.Name, c.Namespace, i)
			node := NodeName(i / 8)
			now := metav1.Now()
			c.Status.Allocation = &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: simdevice.DefaultDriverName, Device: fmt.Sprintf("gpu-%d", i%8),
					Pool: simdevice.PoolNameFor("bench", "mem", node),
				}}},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}}}}},
				AllocationTimestamp: &now,
			}
			if err := add(c); err != nil {
				return nil, err
			}
		}
	case "nodes":
		// Simulated nodes as `draforge nodes apply` makes them, Ready, each with the Lease the
		// node machine holds (kube-node-lease/<node>, as a kubelet's).
		now := time.Now()
		for i, node := range (simnode.Spec{Prefix: "bench-node", Count: n}).Nodes(now) {
			m := meta(node.Name, "", i)
			m.Labels, m.Annotations = node.Labels, node.Annotations
			node.ObjectMeta = m
			if err := add(node); err != nil {
				return nil, err
			}
			renew := metav1.NewMicroTime(now)
			lm := meta(node.Name, corev1.NamespaceNodeLease, n+i)
			lm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: m.UID}}
			lease := &coordinationv1.Lease{
				TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
				ObjectMeta: lm,
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &node.Name, LeaseDurationSeconds: ptrTo(int32(40)), RenewTime: &renew},
			}
			if err := add(lease); err != nil {
				return nil, err
			}
		}
	case "pods":
		for i := range n {
			p := Pod("bench", fmt.Sprintf("p-%05d", i), fmt.Sprintf("c-%05d", i))
			p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			p.ObjectMeta = meta(p.Name, p.Namespace, i)
			p.Spec.NodeName = NodeName(i / 8)
			p.Spec.ServiceAccountName = "default"
			p.Spec.RestartPolicy = corev1.RestartPolicyAlways
			p.Spec.DNSPolicy = corev1.DNSClusterFirst
			p.Spec.SchedulerName = "default-scheduler"
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort,
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
			if err := add(p); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	return out, nil
}

var memoryGVRs = map[schema.GroupVersionResource]string{
	gvr.SimulatedDevicePools:                "SimulatedDevicePoolList",
	gvr.ResourceSlices:                      "ResourceSliceList",
	gvr.DeviceClasses:                       "DeviceClassList",
	gvr.DeviceTaintRules:                    "DeviceTaintRuleList",
	gvr.PodGroups:                           "PodGroupList",
	gvr.ResourceClaims:                      "ResourceClaimList",
	gvr.Nodes:                               "NodeList",
	gvr.Pods:                                "PodList",
	{Version: "v1", Resource: "namespaces"}: "NamespaceList",
	gvr.CustomResourceDefinitions:           "CustomResourceDefinitionList",
	gvr.ComputeDomains:                      "ComputeDomainList",
	// The node machine's related Leases.
	gvr.Leases: "LeaseList",
}

// MemoryTarget is the most a cached object may cost, in bytes of live heap (the cache memory
// rows' target, also checked by TestCacheMemoryTargets and drivers/httpapi's
// TestServeMemoryTargets).
const MemoryTarget = 6 * 1024

var memoryTargetText = fmt.Sprintf("<= %d KiB", MemoryTarget/1024)

// MeasureMemory returns the heap bytes per object that the controller's caches hold for n
// objects of kind: the engine's dynamic informers (managedFields stripped; slices, classes,
// nodes and pods cached typed and shared with the allocator, see clusterview.Forms), the
// drivers' indexes and the allocator's typed claim copies, plus the engine's queues, built exactly as
// `draforge controller` builds them, over fake clients (slices, nodes and pods listed by a typed
// one as protobuf, see clusterview.ListTyped). The live heap is read after
// GC with the fake client's own copies already counted in the baseline.
func MeasureMemory(ctx context.Context, kind string, n int) (float64, error) {
	objs, err := MemoryObjects(kind, n)
	if err != nil {
		return 0, err
	}
	client := memoryClient(objs)
	kube, err := memoryKube(objs)
	if err != nil {
		return 0, err
	}
	objs = nil
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	before := liveHeap()
	inf := engine.NewInformers(client)
	clusterview.ListTyped(inf, kube)
	reg := engine.NewRegistry()
	if _, err := drivers.Register(reg, drivers.Deps{Dynamic: client, Informers: inf, Log: zerolog.Nop()}); err != nil {
		return 0, err
	}
	ms, err := machines.Load(reg.Names())
	if err != nil {
		return 0, err
	}
	if _, err := engine.New(engine.Options{Dynamic: client, Informers: inf, Registry: reg, Machines: ms, Log: zerolog.Nop()}); err != nil {
		return 0, err
	}
	if err := inf.Start(ctx); err != nil {
		return 0, err
	}
	// Pods are cached once: bound ones in the pod machine's form (clusterview.MachinePod),
	// which reads the shared pod informer.
	want := n
	if kind == "nodes" {
		want = 2 * n // and their Leases, counted with them
	}
	if got := inf.Count(); got != want {
		return 0, fmt.Errorf("cached %d objects, want %d", got, want)
	}
	// Let the event handlers (allocator feed, queues) drain.
	time.Sleep(500 * time.Millisecond)
	after := liveHeap()
	runtime.KeepAlive(inf)
	runtime.KeepAlive(client)
	runtime.KeepAlive(kube)
	return float64(after-before) / float64(n), nil
}

// MemoryClients returns fake clients serving n objects of kind (see MemoryObjects) the way a
// process's clients receive them, for memory measurements of other processes' caches (serve):
// the dynamic client as JSON (see decodeListsFromJSON), the typed one, which
// clusterview.ListTyped lists slices, nodes and pods with, as protobuf (see memoryKube).
func MemoryClients(kind string, n int) (*dynamicfake.FakeDynamicClient, *kubefake.Clientset, error) {
	objs, err := MemoryObjects(kind, n)
	if err != nil {
		return nil, nil, err
	}
	kube, err := memoryKube(objs)
	if err != nil {
		return nil, nil, err
	}
	return memoryClient(objs), kube, nil
}

// memoryKube is a fake typed client holding the slices, nodes and pods among objs, whose lists
// are encoded to protobuf and decoded again, as `draforge controller` and `serve` receive them
// (they ask for protobuf), so the cached objects own their strings.
func memoryKube(objs []k8sruntime.Object) (*kubefake.Clientset, error) {
	var typed []k8sruntime.Object
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		switch u.GetKind() {
		case "ResourceSlice", "Node", "Pod", "Lease":
		default:
			continue
		}
		t, err := kubescheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			return nil, err
		}
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
			return nil, err
		}
		typed = append(typed, t)
	}
	kube := kubefake.NewClientset(typed...)
	info, ok := k8sruntime.SerializerInfoForMediaType(kubescheme.Codecs.SupportedMediaTypes(), k8sruntime.ContentTypeProtobuf)
	if !ok {
		return nil, fmt.Errorf("no protobuf serializer")
	}
	kube.PrependReactor("list", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		la := a.(k8stesting.ListActionImpl)
		obj, err := kube.Tracker().List(la.GetResource(), la.GetKind(), la.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		b, err := k8sruntime.Encode(kubescheme.Codecs.EncoderForVersion(info.Serializer, la.GetKind().GroupVersion()), obj)
		if err != nil {
			return true, nil, err
		}
		out, _, err := info.Serializer.Decode(b, nil, nil)
		return true, out, err
	})
	return kube, nil
}

func memoryClient(objs []k8sruntime.Object) *dynamicfake.FakeDynamicClient {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(), memoryGVRs, objs...)
	decodeListsFromJSON(client)
	return client
}

// LiveHeap is the heap in use after three garbage collections.
func LiveHeap() uint64 { return liveHeap() }

// decodeListsFromJSON makes the fake client answer lists as a real client does: every item
// encoded to JSON and decoded again, so the cached objects own their strings instead of sharing
// them with the tracker's copies (part of the baseline), which would under-count every string.
func decodeListsFromJSON(client *dynamicfake.FakeDynamicClient) {
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		la := a.(k8stesting.ListActionImpl)
		obj, err := client.Tracker().List(la.GetResource(), la.GetKind(), la.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return true, nil, err
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(la.GetKind().GroupVersion().WithKind(la.GetKind().Kind + "List"))
		// Keep the list's resourceVersion: without it the reflector watches from "" and the
		// fake tracker replays every object into a 100-event channel.
		if lm, err := meta.ListAccessor(obj); err == nil {
			list.SetResourceVersion(lm.GetResourceVersion())
		}
		for _, it := range items {
			b, err := json.Marshal(it)
			if err != nil {
				return true, nil, err
			}
			var u unstructured.Unstructured
			if err := u.UnmarshalJSON(b); err != nil {
				return true, nil, err
			}
			list.Items = append(list.Items, u)
		}
		return true, list, nil
	})
}

func liveHeap() uint64 {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
