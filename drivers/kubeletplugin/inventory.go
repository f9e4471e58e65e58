package kubeletplugin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/devicestatus"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
)

// device is one simulated device published for this node, as its pool's ResourceSlice shows it.
type device struct {
	Driver     string
	Pool       string // the DRA pool name
	Name       string
	Type       string // spec.deviceType
	Index      int    // the built-in index attribute; -1 for real-driver profiles, which publish none
	SDP        string // namespace/name of the SimulatedDevicePool
	Attributes map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
	Unhealthy  bool // an "unhealthy" fault: the slice taints it, the kubelet hears Unhealthy
	Network    *resourcev1.NetworkDeviceData
	// ReportsStatus: the pool's driver writes status.devices (PoolSpec.ReportsDeviceStatus).
	ReportsStatus bool
}

// key identifies a device within a driver.
func key(pool, dev string) string { return pool + "\x00" + dev }

// snapshot is every device on the node, per driver and key.
type snapshot map[string]map[string]*device

// inventory watches the node and the SimulatedDevicePools and computes which simulated devices
// the node has, with simdevice.DesiredSlices, the function the controller publishes them with:
// what the plugin prepares is exactly what the slices offered.
type inventory struct {
	node  string
	log   zerolog.Logger
	pools cache.SharedIndexInformer
	nodes cache.SharedIndexInformer
	// slices are the ResourceSlices whose spec.nodeName is this node, for the guard: another
	// driver's slices here mean that driver serves its name on the node.
	slices    cache.SharedIndexInformer
	mu        sync.Mutex
	computing sync.Mutex
	snap      snapshot
	change    chan struct{} // closed and replaced on every recomputation
}

func newInventory(node string, kube kubernetes.Interface, dyn dynamic.Interface, log zerolog.Logger) *inventory {
	inv := &inventory{node: node, log: log, snap: snapshot{}, change: make(chan struct{})}
	inv.pools = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 10*time.Minute).ForResource(gvr.SimulatedDevicePools).Informer()
	inv.nodes = informers.NewSharedInformerFactoryWithOptions(kube, 10*time.Minute, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
	})).Core().V1().Nodes().Informer()
	inv.slices = informers.NewSharedInformerFactoryWithOptions(kube, 10*time.Minute, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	})).Resource().V1().ResourceSlices().Informer()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { inv.recompute() },
		UpdateFunc: func(any, any) { inv.recompute() },
		DeleteFunc: func(any) { inv.recompute() },
	}
	_, _ = inv.pools.AddEventHandler(h)
	_, _ = inv.nodes.AddEventHandler(h)
	_, _ = inv.slices.AddEventHandler(h) // wakes the registration loop, which runs the guard
	return inv
}

// run starts the informers and waits for their first lists.
func (inv *inventory) run(ctx context.Context) error {
	go inv.pools.Run(ctx.Done())
	go inv.nodes.Run(ctx.Done())
	go inv.slices.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inv.pools.HasSynced, inv.nodes.HasSynced, inv.slices.HasSynced) {
		return fmt.Errorf("SimulatedDevicePool, Node %s and its ResourceSlice caches did not sync: %w", inv.node, context.Cause(ctx))
	}
	inv.recompute()
	return nil
}

// current returns the newest snapshot and a channel closed when a newer one exists.
func (inv *inventory) current() (snapshot, <-chan struct{}) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.snap, inv.change
}

func (inv *inventory) recompute() {
	// The pool and node handlers run on different goroutines: one recomputation at a time, so
	// a snapshot read from older caches never replaces a newer one.
	inv.computing.Lock()
	defer inv.computing.Unlock()
	var node *corev1.Node
	if objs := inv.nodes.GetStore().List(); len(objs) == 1 {
		node, _ = objs[0].(*corev1.Node)
	}
	var pools []*simdevice.Pool
	for _, o := range inv.pools.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		p, err := simdevice.FromUnstructured(u)
		if err != nil {
			inv.log.Warn().Err(err).Str("pool", u.GetNamespace()+"/"+u.GetName()).Msg("SimulatedDevicePool skipped")
			continue
		}
		pools = append(pools, p)
	}
	snap := devicesOn(node, pools, inv.log)
	inv.mu.Lock()
	inv.snap = snap
	close(inv.change)
	inv.change = make(chan struct{})
	inv.mu.Unlock()
}

// devicesOn computes the node's devices from the pools targeting it. Without a Node object
// (not created yet, or deleted) the node has no devices.
func devicesOn(node *corev1.Node, pools []*simdevice.Pool, log zerolog.Logger) snapshot {
	snap := snapshot{}
	if node == nil {
		return snap
	}
	sort.Slice(pools, func(i, j int) bool {
		return pools[i].Namespace+"/"+pools[i].Name < pools[j].Namespace+"/"+pools[j].Name
	})
	for _, p := range pools {
		if p.DeletionTimestamp != nil || !p.Targets(node) {
			continue
		}
		slices, err := simdevice.DesiredSlices(p, []*corev1.Node{node})
		if err != nil {
			log.Warn().Err(err).Msg("SimulatedDevicePool skipped")
			continue
		}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				dev := &device{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Name: d.Name, Type: p.Spec.DeviceType,
					SDP: p.Namespace + "/" + p.Name, Attributes: d.Attributes, Index: -1}
				if a := attribute(d.Attributes, simdevice.AttrIndex); a != nil && a.IntValue != nil {
					dev.Index = int(*a.IntValue)
				}
				for _, t := range d.Taints {
					dev.Unhealthy = dev.Unhealthy || simdevice.ReportsUnhealthy(t)
				}
				dev.Network = devicestatus.NetworkFor(p, node.Name, &d)
				dev.ReportsStatus = p.Spec.ReportsDeviceStatus()
				if snap[dev.Driver] == nil {
					snap[dev.Driver] = map[string]*device{}
				}
				snap[dev.Driver][key(dev.Pool, dev.Name)] = dev
			}
		}
	}
	return snap
}

// nodeSlices lists the ResourceSlices on this node, for the guard.
func (inv *inventory) nodeSlices() []nodeSlice {
	var out []nodeSlice
	for _, o := range inv.slices.GetStore().List() {
		if s, ok := o.(*resourcev1.ResourceSlice); ok && s.Spec.NodeName != nil && *s.Spec.NodeName == inv.node {
			out = append(out, nodeSlice{Name: s.Name, Driver: s.Spec.Driver, Ours: s.Labels[simdevice.LabelSDPUID] != ""})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// drivers returns the driver names the snapshot's devices use, sorted.
func (s snapshot) drivers() []string {
	out := make([]string, 0, len(s))
	for d := range s {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// attribute finds a device attribute by its name in the driver's own domain, published
// unqualified (as real drivers do) or qualified with any domain.
func attribute(attrs map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, name string) *resourcev1.DeviceAttribute {
	if a, ok := attrs[resourcev1.QualifiedName(name)]; ok {
		return &a
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasSuffix(k, "/"+name) {
			a := attrs[resourcev1.QualifiedName(k)]
			return &a
		}
	}
	return nil
}
