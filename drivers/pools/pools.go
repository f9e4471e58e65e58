// Package pools is the pool machine's driver: it turns SimulatedDevicePools into one valid DRA
// pool per (pool, node), owns the cleanup finalizer, and sweeps orphaned slices.
package pools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// Finalizer keeps a pool until every slice it published is deleted.
const Finalizer = "draforge.oaslananka/resourceslice-cleanup"

const (
	byUID   = "sdp-uid"   // slices by owner UID label; pools by metadata.uid
	byOwner = "sdp-owner" // slices by owner namespace/name labels
	byKey   = "pool-key"  // pools by simdevice.PoolKey
)

// Driver publishes pools.
type Driver struct {
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	inf    *engine.Informers
	pools  cache.SharedIndexInformer
	slices cache.SharedIndexInformer
	nodes  cache.SharedIndexInformer
	now    func() time.Time
	// writes are the process's writes the caches lag (Informers.Writes): a pass never plans
	// on a slice cache that has not shown its pool's last writes.
	writes *engine.Writes
	// settled holds, per pool UID, the inputs of its last plan that left nothing to write.
	settledMu sync.Mutex
	settled   map[types.UID]*settledPlan
}

// Register adds the driver's indexes to the informers and its functions to reg.
func Register(reg *engine.Registry, inf *engine.Informers, kube kubernetes.Interface, dyn dynamic.Interface) (*Driver, error) {
	d := &Driver{kube: kube, dyn: dyn, inf: inf, pools: inf.For(gvr.SimulatedDevicePools), slices: inf.For(gvr.ResourceSlices),
		nodes: inf.For(gvr.Nodes), now: time.Now, writes: inf.Writes(),
		settled: map[types.UID]*settledPlan{}}
	if err := d.slices.AddIndexers(sliceIndexers); err != nil {
		return nil, err
	}
	if err := d.pools.AddIndexers(poolIndexers); err != nil {
		return nil, err
	}
	reg.Observation("poolSpecInvalid", d.specInvalid)
	reg.Observation("poolSlicesOutOfDate", d.outOfDate)
	reg.Action("removeFinalizer", d.removeFinalizer)
	reg.Action("deletePoolSlices", d.deleteSlices)
	reg.Action("publishPoolSlices", d.publish)
	reg.Action("recordPoolStatus", d.recordStatus)
	return d, nil
}

// sliceIndexers find a pool's slices by its UID label and by its namespace/name labels.
var sliceIndexers = cache.Indexers{
	byUID: labelIndex(func(l map[string]string) string { return l[simdevice.LabelSDPUID] }),
	byOwner: labelIndex(func(l map[string]string) string {
		if l[simdevice.LabelSDPName] == "" {
			return ""
		}
		return l[simdevice.LabelSDPNamespace] + "/" + l[simdevice.LabelSDPName]
	}),
}

// poolIndexers find pools by UID and by simdevice.PoolKey.
var poolIndexers = cache.Indexers{
	byUID: func(obj any) ([]string, error) {
		return []string{string(obj.(*unstructured.Unstructured).GetUID())}, nil
	},
	byKey: func(obj any) ([]string, error) {
		p, err := simdevice.FromUnstructured(obj.(*unstructured.Unstructured))
		if err != nil {
			return nil, nil
		}
		return []string{simdevice.PoolKey(p)}, nil
	},
}

func labelIndex(value func(map[string]string) string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		o, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil
		}
		if v := value(o.GetLabels()); v != "" {
			return []string{v}, nil
		}
		return nil, nil
	}
}

// problems returns why a pool cannot be published: decode and validation errors, and a DRA
// pool name shared with an older pool in the same namespace.
func (d *Driver) problems(obj *unstructured.Unstructured) (*simdevice.Pool, []string) {
	pool, err := simdevice.FromUnstructured(obj)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var out []string
	for _, e := range pool.Validate() {
		out = append(out, e.Error())
	}
	others, _ := d.pools.GetIndexer().ByIndex(byKey, simdevice.PoolKey(pool))
	for _, o := range others {
		u := o.(*unstructured.Unstructured)
		if u.GetUID() != obj.GetUID() && u.GetDeletionTimestamp() == nil && olderThan(u, obj) {
			out = append(out, fmt.Sprintf("spec.poolName: %q with driver %s is already published by SimulatedDevicePool %s", pool.Spec.PoolName, pool.Spec.DriverName, u.GetName()))
		}
	}
	return pool, out
}

func olderThan(a, b *unstructured.Unstructured) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.GetName() < b.GetName()
}

// specInvalid is the poolSpecInvalid observation; its message (every problem) is what the
// invalid state's conditions show.
func (d *Driver) specInvalid(_ context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	_, probs := d.problems(obj)
	return engine.Fact{Holds: len(probs) > 0, Message: strings.Join(probs, "; ")}, nil
}

// planKey is the publication plan's engine.PassValue key.
type planKey struct{}

// plan returns the pool's publication plan, computed once per sync pass: the observation that
// decides whether to publish, the publishing action and the status action all need it.
func (d *Driver) plan(ctx context.Context, obj *unstructured.Unstructured) (Plan, error) {
	return engine.PassValue(ctx, planKey{}, func() (Plan, error) { return d.makePlan(obj) })
}

// makePlan computes the pool's publication plan from the caches.
func (d *Driver) makePlan(obj *unstructured.Unstructured) (Plan, error) {
	// Cheap first: while the cache lags a write of this pool's own last pass (every slice
	// event of a large publication triggers a pass), do not build thousands of desired slices
	// only to find one of them awaited below.
	if name, ok := d.lagging(obj.GetUID()); ok {
		return Plan{}, engine.Pending("CacheLag", "waiting for the cache to observe slice "+name, 0)
	}
	pool, err := simdevice.FromUnstructured(obj)
	if err != nil {
		return Plan{}, err
	}
	nodes := d.nodeList()
	now := d.now()
	inputs := &settledPlan{generation: obj.GetGeneration(), targets: targeted(pool, nodes)}
	if next, ok := pool.Spec.NextCampaignFault(inputs.targets, pool.Elapsed(now)); ok {
		inputs.due = now.Add(next)
	}
	versions, complete := d.ownedVersions(obj)
	if st := d.settledFor(obj.GetUID()); complete && st.matches(inputs.generation, inputs.targets, versions, now) {
		return Plan{Nodes: st.nodes, Next: st.next(now), inputs: st}, nil
	}
	desired, err := simdevice.DesiredSlicesAt(pool, nodes, now)
	if err != nil {
		return Plan{}, err
	}
	owned := d.owned(obj)
	for _, s := range append(desired, owned...) {
		if d.awaited(s.Name) {
			return Plan{}, engine.Pending("CacheLag", "waiting for the cache to observe slice "+s.Name, 0)
		}
	}
	byName := func(name string) *resourcev1.ResourceSlice {
		o, ok, _ := d.slices.GetStore().GetByKey(name)
		if !ok {
			return nil
		}
		s, _ := engine.Typed[resourcev1.ResourceSlice](o)
		return s
	}
	alive := func(uid string) bool {
		objs, _ := d.pools.GetIndexer().ByIndex(byUID, uid)
		return len(objs) > 0
	}
	plan := MakePlan(desired, owned, byName, alive)
	plan.Next = inputs.next(now)
	if complete {
		inputs.versions, inputs.nodes = versions, plan.Nodes
		plan.inputs = inputs
		if plan.Empty() {
			d.settle(obj.GetUID(), inputs)
		}
	}
	return plan, nil
}

// owned returns the slices carrying the pool's UID plus legacy slices of the earlier project
// (deterministic name, sdp-name label, no UID label), which are adopted and then replaced.
func (d *Driver) owned(obj *unstructured.Unstructured) []*resourcev1.ResourceSlice {
	var out []*resourcev1.ResourceSlice
	objs, _ := d.slices.GetIndexer().ByIndex(byUID, string(obj.GetUID()))
	legacy, _ := d.slices.GetIndexer().ByIndex(byOwner, obj.GetNamespace()+"/"+obj.GetName())
	legacyNoNS, _ := d.slices.GetIndexer().ByIndex(byOwner, "/"+obj.GetName())
	for _, o := range append(legacy, legacyNoNS...) {
		if s, ok := engine.Typed[resourcev1.ResourceSlice](o); ok && s.Labels[simdevice.LabelSDPUID] == "" &&
			s.Spec.NodeName != nil && s.Name == legacyName(obj.GetName(), *s.Spec.NodeName, obj.GetNamespace()) {
			out = append(out, s)
		}
	}
	for _, o := range objs {
		if s, ok := engine.Typed[resourcev1.ResourceSlice](o); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *Driver) nodeList() []*corev1.Node {
	var nodes []*corev1.Node
	for _, o := range d.nodes.GetStore().List() {
		if n, ok := engine.Typed[corev1.Node](o); ok {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

func (d *Driver) outOfDate(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	if _, probs := d.problems(obj); len(probs) > 0 {
		return engine.Holds(false), nil // invalid, not out of date: the invalid transition handles it
	}
	plan, err := d.plan(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	// A timed fault campaign's next fault changes the slices by itself: look again then.
	return engine.Fact{Holds: !plan.Empty() || !sameNodes(obj, plan.Nodes), RecheckAfter: plan.Next}, nil
}

// publish writes the plan: deletes first, then creates, then updates. Deletes go first because
// one may free a name a create needs (a slice left by a deleted incarnation of the pool); they
// never take devices the pool keeps, since the plan deletes only that incarnation's slices and
// the pool's slices no desired slice names, and a slice whose name stays is updated in place.
// Slice names another live incarnation of the
// pool still holds block publication (PoolNameTaken, mapped to a state in CUE); API errors go
// to the backoff table.
func (d *Driver) publish(ctx context.Context, obj *unstructured.Unstructured) error {
	plan, err := d.plan(ctx, obj)
	if err != nil {
		return err
	}
	d.settle(obj.GetUID(), nil)
	// written collects the resourceVersions the plan's writes leave.
	var mu sync.Mutex
	written := map[string]string{}
	wrote := func(name, rv string) {
		mu.Lock()
		written[name] = rv
		mu.Unlock()
		d.await(obj.GetUID(), name, rv)
	}
	api := d.kube.ResourceV1().ResourceSlices()
	// Each group is written with bounded concurrency: one by one, a thousand-node pool spends
	// most of its time waiting for round trips the client's QPS would allow in parallel.
	if err := writeAll(ctx, plan.Delete, func(ctx context.Context, name string) error {
		if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		wrote(name, "")
		return nil
	}); err != nil {
		return err
	}
	if err := writeAll(ctx, plan.Create, func(ctx context.Context, s *resourcev1.ResourceSlice) error {
		out, err := api.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		wrote(s.Name, out.ResourceVersion)
		return nil
	}); err != nil {
		return err
	}
	if err := writeAll(ctx, plan.Update, func(ctx context.Context, s *resourcev1.ResourceSlice) error {
		out, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		wrote(s.Name, out.ResourceVersion)
		return nil
	}); err != nil {
		return err
	}
	if len(plan.Blocked) > 0 {
		return engine.Blockedf("PoolNameTaken", "ResourceSlice %s is still published by another SimulatedDevicePool of the same name; waiting for it to be deleted", plan.Blocked[0])
	}
	setNodes(obj, plan.Nodes)
	d.settleWritten(obj, plan, written)
	return nil
}

// settleWritten records a publication that wrote its whole plan: the pool's slices are now the
// ones it started from with the writes applied (a deleted slice's name maps to "").
func (d *Driver) settleWritten(obj *unstructured.Unstructured, plan Plan, written map[string]string) {
	in := plan.inputs
	if in == nil {
		return
	}
	versions := maps.Clone(in.versions)
	for name, rv := range written {
		if rv == "" {
			delete(versions, name)
		} else {
			versions[name] = rv
		}
	}
	d.settle(obj.GetUID(), &settledPlan{generation: in.generation, targets: in.targets, versions: versions, nodes: plan.Nodes, due: in.due})
}

// writeConcurrency bounds the slice writes of one pass in flight at once.
const writeConcurrency = 16

// writeAll calls write for every item with at most writeConcurrency calls at once and returns
// the first error (the remaining items are not started once one failed; writes already
// started finish, and their results are recorded by write itself).
func writeAll[T any](ctx context.Context, items []T, write func(context.Context, T) error) error {
	if len(items) == 1 {
		return write(ctx, items[0])
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, writeConcurrency)
	for _, it := range items {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := write(ctx, it); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// await records a write of pool's pass to slice name: rv "" for a delete.
func (d *Driver) await(pool types.UID, name, rv string) {
	d.writes.Wrote(gvr.ResourceSlices, name, rv, string(pool))
}

// lagging returns a slice written by pool's passes that the cache has not caught up with.
func (d *Driver) lagging(pool types.UID) (string, bool) {
	return d.writes.LaggingBy(gvr.ResourceSlices, string(pool), d.cachedSlice)
}

// awaited reports whether the slice cache still lags a write of ours to name.
func (d *Driver) awaited(name string) bool {
	return d.writes.Lags(gvr.ResourceSlices, name, d.cachedSlice(name))
}

// cachedSlice is the slice cache's object called name, nil when it has none.
func (d *Driver) cachedSlice(name string) any {
	if o, ok, _ := d.slices.GetStore().GetByKey(name); ok {
		return o
	}
	return nil
}

func (d *Driver) recordStatus(ctx context.Context, obj *unstructured.Unstructured) error {
	plan, err := d.plan(ctx, obj)
	if err != nil {
		return err
	}
	setNodes(obj, plan.Nodes)
	return nil
}

// MaxStatusNodes is how many nodes status.nodes lists. A pool on more nodes lists the first
// MaxStatusNodes of them by name there and counts them all in status.nodeCount; the slices
// (labelled with the pool's UID) say the rest. Kept small like an EndpointSlice's 100
// endpoints: kube-apiserver's cost of every write of the pool grows with the list, not with
// what changed (measured on the local control plane: a status patch of a pool listing 1,000
// nodes took 65-145 ms, listing 5,000 350-490 ms, listing none 5-8 ms, conditions-only patches
// the same), and every watcher decodes the whole pool on each change. The CRD's maxItems stays
// 5,000, which earlier releases wrote.
const MaxStatusNodes = 100

func setNodes(obj *unstructured.Unstructured, nodes []simdevice.NodeStatus) {
	count := len(nodes)
	if count > MaxStatusNodes {
		nodes = slices.SortedFunc(slices.Values(nodes), func(a, b simdevice.NodeStatus) int { return strings.Compare(a.Node, b.Node) })[:MaxStatusNodes]
	}
	var list []any
	for _, n := range nodes {
		m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&n)
		list = append(list, m)
	}
	if len(list) == 0 {
		unstructured.RemoveNestedField(obj.Object, "status", "nodes")
	} else {
		_ = unstructured.SetNestedSlice(obj.Object, list, "status", "nodes")
	}
	_ = unstructured.SetNestedField(obj.Object, int64(count), "status", "nodeCount")
}

func sameNodes(obj *unstructured.Unstructured, nodes []simdevice.NodeStatus) bool {
	probe := obj.DeepCopy()
	setNodes(probe, nodes)
	a, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "nodes")
	b, _, _ := unstructured.NestedFieldNoCopy(probe.Object, "status", "nodes")
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// removeFinalizer releases the pool only when a live list shows no slice left with its UID:
// the cache may lag behind a slice created just before deletion.
func (d *Driver) removeFinalizer(ctx context.Context, obj *unstructured.Unstructured) error {
	if !slices.Contains(obj.GetFinalizers(), Finalizer) {
		return nil
	}
	left, err := d.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{LabelSelector: simdevice.LabelSDPUID + "=" + string(obj.GetUID())})
	if err != nil {
		return err
	}
	if n := len(left.Items); n > 0 {
		return fmt.Errorf("%d ResourceSlices of the pool still exist", n)
	}
	return d.patchFinalizers(ctx, obj, slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == Finalizer }))
}

// patchFinalizers writes the finalizer list with the cached resourceVersion, so a concurrent
// change is a Conflict to retry rather than a lost finalizer of someone else.
func (d *Driver) patchFinalizers(ctx context.Context, obj *unstructured.Unstructured, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	out, err := d.dyn.Resource(gvr.SimulatedDevicePools).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) && obj.GetDeletionTimestamp() != nil {
		// An earlier pass already let it go; the cache had not seen the deletion yet.
		return nil
	}
	if err != nil {
		return err
	}
	obj.SetFinalizers(out.GetFinalizers())
	obj.SetResourceVersion(out.GetResourceVersion())
	return nil
}

// deleteSlices deletes every slice of the pool found by a live list (UID label) and the
// legacy slices from the cache; NotFound is success.
func (d *Driver) deleteSlices(ctx context.Context, obj *unstructured.Unstructured) error {
	api := d.kube.ResourceV1().ResourceSlices()
	live, err := api.List(ctx, metav1.ListOptions{LabelSelector: simdevice.LabelSDPUID + "=" + string(obj.GetUID())})
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, s := range live.Items {
		names[s.Name] = true
	}
	for _, s := range d.owned(obj) {
		names[s.Name] = true
	}
	for name := range names {
		if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	d.settle(obj.GetUID(), nil)
	unstructured.RemoveNestedField(obj.Object, "status", "nodes")
	_ = unstructured.SetNestedField(obj.Object, int64(0), "status", "nodeCount")
	return nil
}
