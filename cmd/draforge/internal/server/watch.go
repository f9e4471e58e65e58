package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/cmd/draforge/internal/inventory"
	"github.com/draforge/draforge/drivers/compactpod"
	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// Watcher rebuilds the server's snapshot from informer caches after changes: at most once per
// Interval, with the changes since the last build. It never lists from the API server itself.
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
	// expanded are the API-type copies of the cached compact slices, kept from one build to the
	// next (only Start's goroutine builds).
	expanded map[*compactslice.Slice]*resourcev1.ResourceSlice
	// expandedPods are the same for the cached compact pods.
	expandedPods map[*compactpod.Pod]*corev1.Pod
}

// Register creates the informers the snapshot needs (call before the informers start).
func (wt *Watcher) Register() error {
	if wt.Interval <= 0 {
		wt.Interval = 250 * time.Millisecond
	}
	wt.kick = make(chan struct{}, 1)
	wt.pending = map[Change]struct{}{}
	wt.infs = map[string]cache.SharedIndexInformer{}
	for kind, resource := range map[string]schema.GroupVersionResource{
		simdevice.Kind: gvr.SimulatedDevicePools, "ResourceSlice": gvr.ResourceSlices, "DeviceClass": gvr.DeviceClasses,
		"ResourceClaim": gvr.ResourceClaims, "Pod": gvr.Pods, "Node": gvr.Nodes,
		"DeviceTaintRule": gvr.DeviceTaintRules,
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

// Start waits for the caches, publishes the first snapshot, then rebuilds after changes until
// ctx ends. It is an engine.Plugin.
func (wt *Watcher) Start(ctx context.Context) error {
	if !wt.Informers.WaitSynced(ctx) {
		return nil
	}
	wt.take() // the initial adds are the first snapshot, not changes
	wt.publish(wt.build(), nil)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wt.kick:
		}
		changes := wt.take()
		if len(changes) > 0 {
			wt.publish(wt.build(), changes)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wt.Interval):
		}
	}
}

func (wt *Watcher) publish(s *inventory.Snapshot, changes []Change) {
	if wt.Server != nil {
		wt.Server.Publish(s, changes)
	}
	if wt.OnSnapshot != nil {
		wt.OnSnapshot(s)
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

// build converts the cache contents into a sorted Snapshot.
func (wt *Watcher) build() *inventory.Snapshot {
	s := &inventory.Snapshot{}
	for _, obj := range wt.infs[simdevice.Kind].GetStore().List() {
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
	s.Slices = wt.slices()
	s.Classes = typedList[resourcev1.DeviceClass](wt.infs["DeviceClass"])
	s.Claims = typedList[resourcev1.ResourceClaim](wt.infs["ResourceClaim"])
	s.Pods = wt.pods()
	s.Nodes = typedList[corev1.Node](wt.infs["Node"])
	s.TaintRules = typedList[resourcev1.DeviceTaintRule](wt.infs["DeviceTaintRule"])
	return s.Sort()
}

// pods returns the cached pods as the API type, expanding each compact pod once (see expandOnce).
func (wt *Watcher) pods() []*corev1.Pod {
	var out []*corev1.Pod
	out, wt.expandedPods = expandOnce(wt.infs["Pod"].GetStore().List(), wt.expandedPods, (*compactpod.Pod).Expand)
	return out
}

// slices returns the cached slices as the API type, expanding each compact slice once.
func (wt *Watcher) slices() []*resourcev1.ResourceSlice {
	var out []*resourcev1.ResourceSlice
	out, wt.expanded = expandOnce(wt.infs["ResourceSlice"].GetStore().List(), wt.expanded, (*compactslice.Slice).Expand)
	return out
}

// expandOnce returns cached objects as the API type T. A compact object (*C) is expanded once
// and the copy reused by later builds: cached objects are replaced on change, never modified,
// so a copy stays valid while its object is cached, and a rebuild does not copy every object
// again. prev holds the previous build's copies; the returned map holds this build's.
func expandOnce[C, T any](objs []any, prev map[*C]*T, expand func(*C) *T) ([]*T, map[*C]*T) {
	out := make([]*T, 0, len(objs))
	next := make(map[*C]*T, len(objs))
	for _, o := range objs {
		c, ok := o.(*C)
		if !ok {
			if t, ok := engine.Typed[T](o); ok {
				out = append(out, t)
			}
			continue
		}
		t, ok := prev[c]
		if !ok {
			t = expand(c)
		}
		next[c] = t
		out = append(out, t)
	}
	return out, next
}

func typedList[T any](inf cache.SharedIndexInformer) []*T {
	objs := inf.GetStore().List()
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := engine.Typed[T](o); ok {
			out = append(out, t)
		}
	}
	return out
}
