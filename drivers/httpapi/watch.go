package httpapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// Watcher publishes what the informer caches hold as a new snapshot after changes: at most once
// per Interval, with the changes since the last one. It never lists from the API server itself.
type Watcher struct {
	Informers *engine.Informers
	// Server receives every snapshot (may be nil when only OnSnapshot is wanted).
	Server *Server
	// OnSnapshot, when set, also receives every snapshot (draforge tui).
	OnSnapshot func(*inventory.Snapshot)
	// Interval is the minimum time between two rebuilds [250ms].
	Interval time.Duration

	infs    map[string]cache.SharedIndexInformer
	mu      sync.Mutex
	pending map[Change]struct{}
	kick    chan struct{}
}

// Register creates the informers the snapshot needs (call before the informers start).
func (wt *Watcher) Register() error {
	if wt.Interval <= 0 {
		wt.Interval = 250 * time.Millisecond
	}
	wt.kick = make(chan struct{}, 1)
	wt.pending = map[Change]struct{}{}
	wt.infs = map[string]cache.SharedIndexInformer{}
	// Gangs are Kubernetes 1.37 with scheduling.k8s.io/v1beta1 on, and a chart or kubeconfig
	// may not grant them: without them there are no gangs to show, not a view that never syncs.
	wt.Informers.Optional(gvr.PodGroups, nil)
	for kind, resource := range map[string]schema.GroupVersionResource{
		simdevice.Kind: gvr.SimulatedDevicePools, "ResourceSlice": gvr.ResourceSlices, "DeviceClass": gvr.DeviceClasses,
		"ResourceClaim": gvr.ResourceClaims, "Pod": gvr.Pods, "Node": gvr.Nodes,
		"DeviceTaintRule": gvr.DeviceTaintRules, "PodGroup": gvr.PodGroups,
	} {
		inf := wt.Informers.For(resource)
		wt.infs[kind] = inf
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { wt.note(kind, obj, OpAdd) },
			UpdateFunc: func(old, cur any) {
				o, c := engine.ObjectMeta(old), engine.ObjectMeta(cur)
				if o != nil && c != nil && o.GetResourceVersion() == c.GetResourceVersion() {
					return
				}
				wt.note(kind, cur, OpUpdate)
			},
			DeleteFunc: func(obj any) { wt.note(kind, obj, OpDelete) },
		})
		if err != nil {
			return fmt.Errorf("%s informer: %w", kind, err)
		}
	}
	return nil
}

func asUnstructured(obj any) *unstructured.Unstructured {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

func (wt *Watcher) note(kind string, obj any, op string) {
	u := engine.ObjectMeta(obj)
	if u == nil {
		return
	}
	wt.mu.Lock()
	wt.pending[Change{Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName(), Op: op}] = struct{}{}
	wt.mu.Unlock()
	select {
	case wt.kick <- struct{}{}:
	default:
	}
}

// Start waits for the caches, publishes the first snapshot, then publishes again after changes
// until ctx ends. It is an engine.Plugin.
func (wt *Watcher) Start(ctx context.Context) error {
	if !wt.Informers.WaitSynced(ctx) {
		return nil
	}
	wt.take() // the initial adds are the first snapshot, not changes
	wt.publish(wt.capture(), nil)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wt.kick:
		}
		changes := wt.take()
		if len(changes) > 0 {
			wt.publish(wt.capture(), changes)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wt.Interval):
		}
	}
}

func (wt *Watcher) publish(source func() *inventory.Snapshot, changes []Change) {
	if wt.Server != nil {
		wt.Server.Publish(source, changes)
	}
	if wt.OnSnapshot != nil {
		wt.OnSnapshot(source())
	}
}

// take returns and clears the pending changes, sorted and one per object (the last op wins,
// except that add then delete is still reported as a delete).
func (wt *Watcher) take() []Change {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	byObj := map[Change]string{}
	for c := range wt.pending {
		k := Change{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
		if prev, ok := byObj[k]; !ok || opRank(c.Op) > opRank(prev) {
			byObj[k] = c.Op
		}
	}
	clear(wt.pending)
	out := make([]Change, 0, len(byObj))
	for k, op := range byObj {
		k.Op = op
		out = append(out, k)
	}
	sortChanges(out)
	return out
}

func opRank(op string) int {
	switch op {
	case OpDelete:
		return 3
	case OpAdd:
		return 2
	}
	return 1
}

// capture takes the objects the caches hold now and returns what builds their sorted Snapshot.
// Informers replace a cached object on change and never modify it, so every build returns the
// same objects whatever the caches see later, and holding the lists costs a pointer per object:
// the typed copies (compact slices and pods expanded, claims decoded) exist only while built.
func (wt *Watcher) capture() func() *inventory.Snapshot {
	lists := make(map[string][]any, len(wt.infs))
	for kind, inf := range wt.infs {
		lists[kind] = inf.GetStore().List()
	}
	// Not served means there are none; forbidden means they were not read.
	podGroupsRead := !apierrors.IsForbidden(wt.Informers.Missing(gvr.PodGroups))
	return func() *inventory.Snapshot {
		s := build(lists)
		s.PodGroupsRead = podGroupsRead
		return s
	}
}

// build converts cached objects, by kind, into a sorted Snapshot.
func build(lists map[string][]any) *inventory.Snapshot {
	s := &inventory.Snapshot{}
	for _, obj := range lists[simdevice.Kind] {
		u := asUnstructured(obj)
		if u == nil {
			continue
		}
		p, err := simdevice.FromUnstructured(u)
		if err != nil {
			s.Warnings = append(s.Warnings, err.Error())
			continue
		}
		s.Pools = append(s.Pools, p)
	}
	s.Slices = typedList[resourcev1.ResourceSlice](lists["ResourceSlice"])
	s.Classes = typedList[resourcev1.DeviceClass](lists["DeviceClass"])
	s.Claims = typedList[resourcev1.ResourceClaim](lists["ResourceClaim"])
	s.Pods = typedList[corev1.Pod](lists["Pod"])
	s.Nodes = typedList[corev1.Node](lists["Node"])
	s.TaintRules = typedList[resourcev1.DeviceTaintRule](lists["DeviceTaintRule"])
	s.PodGroups = typedList[schedulingv1beta1.PodGroup](lists["PodGroup"])
	return s.Sort()
}

// typedList returns objs as the API type T (compact forms expanded, unstructured decoded).
func typedList[T any](objs []any) []*T {
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := engine.Typed[T](o); ok {
			out = append(out, t)
		}
	}
	return out
}
