package clusterview

import (
	"context"
	"slices"
	"strconv"

	"github.com/rs/zerolog"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/compactpod"
	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
)

// Watch sets how the view lists and watches: the high-volume built-in resources through kube,
// a typed client over protobuf (see ListTyped), and DeviceTaintRules as optional (see
// optionalResources). Call it before Forms' informers are created.
func Watch(inf *engine.Informers, kube kubernetes.Interface, log zerolog.Logger) {
	optionalResources(inf, log)
	ListTyped(inf, kube)
}

// optionalResources marks what an API server older than the simulator's Kubernetes may not
// serve: resource.k8s.io/v1 DeviceTaintRules are Kubernetes 1.37. On such a server no rule
// taints a device, as in its kube-scheduler, and the informer syncs empty instead of waiting
// for the resource forever.
func optionalResources(inf *engine.Informers, log zerolog.Logger) {
	inf.Optional(gvr.DeviceTaintRules, func(err error) {
		msg := "the API server does not serve DeviceTaintRules (Kubernetes before 1.37): no DeviceTaintRule taints a device"
		if apierrors.IsForbidden(err) {
			msg = "not allowed to list DeviceTaintRules (give this ServiceAccount get, list and watch on them): no DeviceTaintRule taints a device"
		}
		log.Warn().Str("resource", gvr.DeviceTaintRules.String()).Msg(msg)
	})
}

// Forms makes inf cache the resources the drivers only read (slices, classes, nodes, pods)
// as typed objects, so the allocator's stores and the pod index share the informers' objects
// instead of holding a second, converted copy. Pods and nodes are pruned to the fields the
// drivers and the serve views read; slices are cached as *compactslice.Slice. The machines'
// own resources stay unstructured.
func Forms(inf *engine.Informers) {
	inf.CacheTyped(gvr.ResourceSlices, func() runtime.Object { return &resourcev1.ResourceSlice{} }, compactSlice)
	inf.CacheTyped(gvr.DeviceClasses, func() runtime.Object { return &resourcev1.DeviceClass{} }, nil)
	inf.CacheTyped(gvr.DeviceTaintRules, func() runtime.Object { return &resourcev1.DeviceTaintRule{} }, nil)
	inf.CacheTyped(gvr.Nodes, func() runtime.Object { return &corev1.Node{} }, pruneNode)
	inf.CacheTyped(gvr.Pods, func() runtime.Object { return &corev1.Pod{} }, prunePod)
	inf.CacheTyped(gvr.Leases, func() runtime.Object { return &coordinationv1.Lease{} }, nil)
	// The pod machine's pods come from the same cache, in MachinePod's form; the node
	// machine's simulated nodes too, in MachineNode's (a JSON informer of their own cached
	// every simulated node a second time, unstructured).
	inf.Selectable(gvr.Pods, engine.Selectable{Fields: PodFields, Full: MachinePod})
	inf.Selectable(gvr.Nodes, engine.Selectable{Fields: NodeFields, Full: MachineNode})
}

// Pruned declares to the machine loader what Forms' pruners keep (see machine.Pruned):
// the pod machine's own pods (MachinePod), pods everywhere else (compactpod, plus the
// PodScheduled condition prunePod keeps for the pods whose scheduling it reports) and nodes
// (pruneNode). A machine
// that reads a field these caches drop fails `draforge machines vet` and the controller's
// load, naming the field.
func Pruned() []machine.Pruned {
	return []machine.Pruned{
		{Resource: gvr.Pods, Cache: machine.CacheSelected, By: "drivers/clusterview.MachinePod", Keep: MachinePodKept()},
		{Resource: gvr.Pods, Cache: machine.CacheShared, By: "drivers/compactpod",
			Keep: append(slices.Clone(compactpod.Kept), "status.conditions[type=PodScheduled]")},
		{Resource: gvr.Nodes, Cache: machine.CacheSelected, By: "drivers/clusterview.MachineNode", Keep: MachineNodeKept},
		{Resource: gvr.Nodes, Cache: machine.CacheShared, By: "drivers/clusterview.pruneNode", Keep: []string{"apiVersion", "kind", "metadata", "spec"}},
	}
}

// ListTyped makes inf list and watch the high-volume resources the drivers read (slices, nodes,
// pods) through kube, a typed client of KubeConfig (protobuf, see engine.ListTyped):
// decoding their watch streams as JSON into unstructured objects and converting those was a
// fifth of the controller's CPU with thousands of pods. Call it before CacheTyped's informers
// are created.
func ListTyped(inf *engine.Informers, kube kubernetes.Interface) {
	inf.ListTyped(gvr.ResourceSlices, typedLister[*resourcev1.ResourceSliceList](kube, kube.ResourceV1().ResourceSlices()))
	inf.ListTyped(gvr.Nodes, typedLister[*corev1.NodeList](kube, kube.CoreV1().Nodes()))
	inf.ListTyped(gvr.Pods, typedLister[*corev1.PodList](kube, kube.CoreV1().Pods(metav1.NamespaceAll)))
	// The node machine's Leases (a kubelet's renewal every 10 s per node): protobuf spares the
	// API server a JSON encoding of every renewal, and this process its JSON decoding.
	inf.ListTypedScoped(gvr.Leases, func(namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
		return typedLister[*coordinationv1.LeaseList](kube, kube.CoordinationV1().Leases(namespace), tweak)
	})
}

// listWatcher is what a typed client of one resource offers an informer.
type listWatcher[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// KubeConfig is cfg for the typed client ListTyped and the drivers use: built-in types over
// protobuf, as kube-scheduler and kube-controller-manager talk, cheaper to encode and decode on
// both ends than JSON (JSON stays accepted for what has no protobuf form).
func KubeConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// typedLister lists and watches with api, one resource's typed client of kube (whose support of
// watch-list semantics it passes on to client-go's reflector), the options changed by tweaks
// (a field selector) first.
func typedLister[L runtime.Object](kube kubernetes.Interface, api listWatcher[L], tweaks ...func(*metav1.ListOptions)) cache.ListerWatcher {
	tweak := func(o *metav1.ListOptions) {
		for _, t := range tweaks {
			t(o)
		}
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return api.Watch(ctx, o)
		},
	}, kube)
}

// prunePod caches a pod as a *compactpod.Pod: what allocator.ClaimNeedsSimulatedAllocation,
// the pod index, the podClaims mapper and the serve views (graph, doctor, claim views) read,
// and, while the pod is not bound, its PodScheduled condition: kube-scheduler's reason is the
// claim machine's pending message for an allocation pod and the serve views' Scheduler column
// and explain's for every other pod. Bound pods drop it, so they cost nothing more.
func prunePod(o runtime.Object) runtime.Object {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o
	}
	c := compactpod.From(p)
	if allocationpod.Is(p) || p.Spec.NodeName == "" {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				c.Scheduled = &corev1.PodCondition{Type: cond.Type, Status: cond.Status, Reason: cond.Reason, Message: cond.Message}
			}
		}
	}
	return c
}

// pruneNode drops the node's status (images, conditions, addresses...), which nothing reads:
// node selection uses the name and labels.
func pruneNode(o runtime.Object) runtime.Object {
	if n, ok := o.(*corev1.Node); ok {
		n.Status = corev1.NodeStatus{}
	}
	return o
}

// MachineNode keeps of a node what the node machine reads besides what pruneNode keeps:
// status.conditions (the kubelet's heartbeats). It is the form the shared node cache holds the
// node machine's nodes in (engine.Selectable); capacity, allocatable, addresses, nodeInfo and
// images are dropped. It changes o, a node just decoded for the cache.
func MachineNode(o runtime.Object) runtime.Object {
	if n, ok := o.(*corev1.Node); ok {
		n.Status = corev1.NodeStatus{Conditions: n.Status.Conditions}
	}
	return o
}

// MachineNodeKept are the paths MachineNode keeps (see machine.Pruned).
var MachineNodeKept = []string{"apiVersion", "kind", "metadata", "spec", "status.conditions"}

// NodeFields are the fields of a cached node that a node machine's field selector may test,
// named as the API server's node field selectors.
func NodeFields(obj any) fields.Set {
	if n, ok := obj.(*corev1.Node); ok {
		return fields.Set{"metadata.name": n.Name, "spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
	}
	return nil
}

// compactSlice caches slices in compact form: a typed slice holds a map per device, about
// 2.5 KiB per device, which dominated the controller's memory at thousands of nodes.
func compactSlice(o runtime.Object) runtime.Object {
	if s, ok := o.(*resourcev1.ResourceSlice); ok {
		return compactslice.From(s)
	}
	return o
}

// MachinePod keeps of a pod what the pod machine and the pods driver read: metadata, status, and of the
// spec keptSpec and each container's keptContainer (claims, extended resources). It is the form
// the shared pod cache holds the pod machine's pods in (engine.Selectable), so the rest
// (volumes, env, affinity, ...) does not multiply the controller's memory. Kept declares the same
// to the machine loader: a pod machine that reads another spec field fails to load instead of
// silently seeing it missing. It changes o, a pod just decoded for the cache.
func MachinePod(o runtime.Object) runtime.Object {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o
	}
	spec := corev1.PodSpec{NodeName: p.Spec.NodeName, ResourceClaims: p.Spec.ResourceClaims, SchedulingGroup: p.Spec.SchedulingGroup}
	for _, c := range p.Spec.Containers {
		spec.Containers = append(spec.Containers, corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources})
	}
	p.Spec = spec
	return p
}

// PodFields are the fields of a cached pod (either form the shared cache holds) that a
// pod machine's field selector may test, named as the API server's pod field selectors.
func PodFields(obj any) fields.Set {
	switch p := obj.(type) {
	case *corev1.Pod:
		return fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace,
			"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}
	case *compactpod.Pod:
		return fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace,
			"spec.nodeName": p.NodeName, "status.phase": string(p.Phase)}
	}
	return nil
}

// What MachinePod keeps of a pod's spec, and of each of its containers.
var (
	keptSpec      = []string{"nodeName", "resourceClaims", "schedulingGroup"}
	keptContainer = []string{"name", "image", "resources"}
)

// MachinePodKept are the paths MachinePod keeps (see machine.Pruned): everything but the spec, and of the
// spec keptSpec and each container's keptContainer (drivers' TestPrunedDeclaresWhatCachesKeep
// holds the two to each other).
func MachinePodKept() []string {
	out := []string{"apiVersion", "kind", "metadata", "status"}
	for _, k := range keptSpec {
		out = append(out, "spec."+k)
	}
	for _, k := range keptContainer {
		out = append(out, "spec.containers."+k)
	}
	return out
}
