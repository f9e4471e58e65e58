// Package drivers wires the Go functions that machines call by name (actions, observations,
// mappers) into an engine.Registry. Each sub-package is one driver, or a part of the product
// built over them: the read models and what reads them (inventory, explain, doctor,
// resourcegraph, machinegraph, httpapi), pool faults, the kubelet plugin, scenarios, and the
// assembly of the controller and serve processes (process, controller, serve).
package drivers

import (
	"context"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/binding"
	"github.com/draforge/draforge/drivers/claims"
	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/compactpod"
	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/podnamespaces"
	podsDriver "github.com/draforge/draforge/drivers/pods"
	"github.com/draforge/draforge/drivers/pools"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
)

// Deps are what drivers need from the process.
type Deps struct {
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Informers *engine.Informers
	Metrics   prometheus.Registerer
	Log       zerolog.Logger
	// AllocatorFeatures are the structured allocator's features (nil: kube-scheduler's defaults
	// for Kubernetes 1.37, see drivers/featuregates).
	AllocatorFeatures *structured.Features
	// IgnoreDeviceTaintRules is the DRADeviceTaintRules gate turned off.
	IgnoreDeviceTaintRules bool
	// Allocator says who allocates standalone claims ("": claims.KubeScheduler).
	Allocator claims.Mode
	// PodNamespaces are where the controller may write pods (--pod-namespaces; zero: all).
	PodNamespaces podnamespaces.Set
}

// Set is the registered drivers, for callers that read their state (explain, serve).
type Set struct {
	Claims *claims.Driver
	Pools  *pools.Driver
	// Binding sets simulated devices' binding conditions (its functions await a claim machine
	// that calls them, see drivers/binding).
	Binding *binding.Driver
	// Plugins are the drivers' background loops (the orphan slice sweeper), leader-only.
	Plugins []engine.Plugin
}

// Register registers every driver's functions in reg and builds their background loops.
func Register(reg *engine.Registry, d Deps) (*Set, error) {
	set, err := register(reg, d)
	if err != nil {
		return nil, err
	}
	sweeper, err := set.Pools.Sweeper()
	if err != nil {
		return nil, err
	}
	set.Plugins = []engine.Plugin{sweeper}
	return set, nil
}

// register registers every driver's functions in reg, without the background loops.
func register(reg *engine.Registry, d Deps) (*Set, error) {
	CacheTyped(d.Informers)
	for _, p := range Pruned() {
		reg.Pruned(p)
	}
	c, err := claims.Register(reg, d.Informers, d.Kube, d.Metrics, allocator.Options{Features: d.AllocatorFeatures,
		IgnoreDeviceTaintRules: d.IgnoreDeviceTaintRules, Objects: clusterview.NewObjects(d.Informers)}, d.Allocator)
	if err != nil {
		return nil, err
	}
	p, err := pools.Register(reg, d.Informers, d.Kube, d.Dynamic)
	if err != nil {
		return nil, err
	}
	c.PodNamespaces = d.PodNamespaces
	view := clusterview.FeedPools(d.Informers)
	b := binding.Register(reg, d.Kube, view)
	b.Published = func(alloc *resourcev1.AllocationResult) bool {
		return c.Allocator.AllPublished(alloc, simdevice.Published)
	}
	pd, err := podsDriver.Register(reg, d.Informers, d.Kube, view)
	if err != nil {
		return nil, err
	}
	pd.PodNamespaces = d.PodNamespaces
	return &Set{Claims: c, Pools: p, Binding: b}, nil
}

// OptionalResources marks what an API server older than the simulator's Kubernetes may not
// serve: resource.k8s.io/v1 DeviceTaintRules are Kubernetes 1.37. On such a server no rule
// taints a device, as in its kube-scheduler, and the informer syncs empty instead of waiting
// for the resource forever.
func OptionalResources(inf *engine.Informers, log zerolog.Logger) {
	inf.Optional(gvr.DeviceTaintRules, func() {
		log.Warn().Str("resource", gvr.DeviceTaintRules.String()).
			Msg("the API server does not serve DeviceTaintRules (Kubernetes before 1.37): no DeviceTaintRule taints a device")
	})
}

// CacheTyped makes inf cache the resources the drivers only read (slices, classes, nodes, pods)
// as typed objects, so the allocator's stores and the pod index share the informers' objects
// instead of holding a second, converted copy. Pods and nodes are pruned to the fields the
// drivers and the serve views read; slices are cached as *compactslice.Slice. The machines'
// own resources stay unstructured.
func CacheTyped(inf *engine.Informers) {
	inf.CacheTyped(gvr.ResourceSlices, func() runtime.Object { return &resourcev1.ResourceSlice{} }, compactSlice)
	inf.CacheTyped(gvr.DeviceClasses, func() runtime.Object { return &resourcev1.DeviceClass{} }, nil)
	inf.CacheTyped(gvr.DeviceTaintRules, func() runtime.Object { return &resourcev1.DeviceTaintRule{} }, nil)
	inf.CacheTyped(gvr.Nodes, func() runtime.Object { return &corev1.Node{} }, pruneNode)
	inf.CacheTyped(gvr.Pods, func() runtime.Object { return &corev1.Pod{} }, prunePod)
	// The pod machine's pods come from the same cache, pruned by pods.Prune instead.
	inf.Selectable(gvr.Pods, engine.Selectable{Fields: podsDriver.SelectableFields, Full: podsDriver.Prune})
}

// Pruned declares to the machine loader what CacheTyped's pruners keep (see machine.Pruned):
// the pod machine's own pods (pods.Prune), pods everywhere else (compactpod, plus the
// PodScheduled condition prunePod keeps for the pods whose scheduling it reports) and nodes
// (pruneNode). A machine
// that reads a field these caches drop fails `draforge machines vet` and the controller's
// load, naming the field.
func Pruned() []machine.Pruned {
	return []machine.Pruned{
		{Resource: gvr.Pods, Cache: machine.CacheSelected, By: "drivers/pods.Prune", Keep: podsDriver.Kept()},
		{Resource: gvr.Pods, Cache: machine.CacheShared, By: "drivers/compactpod",
			Keep: append(slices.Clone(compactpod.Kept), "status.conditions[type=PodScheduled]")},
		{Resource: gvr.Nodes, Cache: machine.CacheShared, By: "drivers.pruneNode", Keep: []string{"apiVersion", "kind", "metadata", "spec"}},
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
// watch-list semantics it passes on to client-go's reflector).
func typedLister[L runtime.Object](kube kubernetes.Interface, api interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) },
		WatchFuncWithContext: api.Watch,
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

// compactSlice caches slices in compact form: a typed slice holds a map per device, about
// 2.5 KiB per device, which dominated the controller's memory at thousands of nodes.
func compactSlice(o runtime.Object) runtime.Object {
	if s, ok := o.(*resourcev1.ResourceSlice); ok {
		return compactslice.From(s)
	}
	return o
}
