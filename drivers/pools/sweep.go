package pools

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// Sweeper deletes orphaned slices: slices carrying a pool UID label whose pool no longer exists
// (a pool removed without its finalizer running, for example). It runs only on the leader.
type Sweeper struct {
	d     *Driver
	queue workqueue.TypedRateLimitingInterface[string]
}

// Sweeper returns the orphan sweeper; register its handlers before the informers start.
func (d *Driver) Sweeper() (*Sweeper, error) {
	s := &Sweeper{d: d, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "orphan-slices"})}
	enqueue := func(obj any) {
		if o := engine.ObjectMeta(obj); o != nil && o.GetLabels()[simdevice.LabelSDPUID] != "" {
			s.queue.Add(o.GetName())
		}
	}
	d.inf.Notify(gvr.ResourceSlices, cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) },
	})
	// A deleted pool orphans its slices only if they are still there; re-check them.
	d.inf.Notify(gvr.SimulatedDevicePools, cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			objs, _ := d.slices.GetIndexer().ByIndex(byUID, string(u.GetUID()))
			for _, o := range objs {
				enqueue(o)
			}
		}
	}})
	return s, nil
}

// Start implements engine.Plugin.
func (s *Sweeper) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), s.d.slices.HasSynced, s.d.pools.HasSynced) {
		return nil
	}
	for {
		name, quit := s.queue.Get()
		if quit {
			return nil
		}
		if err := s.sweep(ctx, name); err != nil {
			s.queue.AddRateLimited(name)
		} else {
			s.queue.Forget(name)
		}
		s.queue.Done(name)
	}
}

// NeedLeaderElection implements engine.LeaderElected.
func (*Sweeper) NeedLeaderElection() bool { return true }

func (s *Sweeper) sweep(ctx context.Context, name string) error {
	o, ok, _ := s.d.slices.GetStore().GetByKey(name)
	if !ok {
		return nil
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return nil
	}
	uid := m.GetLabels()[simdevice.LabelSDPUID]
	if owners, _ := s.d.pools.GetIndexer().ByIndex(byUID, uid); uid == "" || len(owners) > 0 {
		return nil
	}
	err = s.d.kube.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
