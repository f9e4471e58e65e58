package pools

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/engine"
)

// cachedDriver is a driver over informers whose stores the test fills, with the driver's
// own indexers.
func cachedDriver(t *testing.T) *Driver {
	t.Helper()
	d := &Driver{
		slices:  cache.NewSharedIndexInformer(&cache.ListWatch{}, &resourcev1.ResourceSlice{}, 0, cache.Indexers{}),
		nodes:   cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Node{}, 0, cache.Indexers{}),
		pools:   cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{}),
		writes:  &engine.Writes{},
		settled: map[types.UID]*settledPlan{},
		now:     time.Now,
	}
	if err := d.slices.AddIndexers(sliceIndexers); err != nil {
		t.Fatal(err)
	}
	if err := d.pools.AddIndexers(poolIndexers); err != nil {
		t.Fatal(err)
	}
	return d
}

func labelledNode(name, rack string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{"rack": rack}}}
}

func selectorPool(generation int64) *unstructured.Unstructured {
	p := pooltest.Object("ns", "p", map[string]any{"deviceType": "gpu", "deviceCount": int64(2), "nodeSelector": map[string]any{"rack": "a"}})
	p.SetUID("uid-1")
	p.SetGeneration(generation)
	return p
}

// store writes slices to the slice cache as the API server would hold them at rv.
func store(t *testing.T, d *Driver, rv string, ss ...*resourcev1.ResourceSlice) map[string]string {
	t.Helper()
	written := map[string]string{}
	for _, s := range ss {
		c := s.DeepCopy()
		c.ResourceVersion = rv
		if err := d.slices.GetStore().Update(c); err != nil {
			t.Fatal(err)
		}
		written[c.Name] = rv
	}
	return written
}

// TestSettledPlanIsReusedUntilAnInputChanges: after a publication wrote its whole plan, a pass
// whose pool generation, targeted nodes and slice resourceVersions are unchanged gets the
// empty plan without building the desired slices; a change of any of them (including a write
// by someone else, which only shows as a new resourceVersion) takes the full plan again.
func TestSettledPlanIsReusedUntilAnInputChanges(t *testing.T) {
	d := cachedDriver(t)
	for _, n := range []*corev1.Node{labelledNode("n1", "a"), labelledNode("n2", "a"), labelledNode("n3", "b")} {
		if err := d.nodes.GetStore().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	pool := selectorPool(1)
	first, err := d.makePlan(pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Create) != 2 || d.settledFor("uid-1") != nil {
		t.Fatalf("first plan creates %d slices (want 2), settled %v", len(first.Create), d.settledFor("uid-1"))
	}
	// The publication's writes, then the cache catching up with them.
	d.settleWritten(pool, first, store(t, d, "10", first.Create...))

	reused, err := d.makePlan(pool)
	if err != nil {
		t.Fatal(err)
	}
	if st := d.settledFor("uid-1"); st == nil || reused.inputs != st || !reused.Empty() || len(reused.Nodes) != 2 {
		t.Fatalf("after the publication: plan %+v, settled %+v; want the settled empty plan with 2 nodes", reused, st)
	}

	// A label change that leaves the targeted nodes as they were keeps the settled plan.
	if err := d.nodes.GetStore().Update(labelledNode("n3", "c")); err != nil {
		t.Fatal(err)
	}
	if p, err := d.makePlan(pool); err != nil || p.inputs != d.settledFor("uid-1") {
		t.Fatalf("n3 relabelled, still not targeted: plan %+v, %v; want the settled plan", p, err)
	}

	// A new spec generation takes the full plan, which finds nothing to write and settles anew.
	pool2 := selectorPool(2)
	before := d.settledFor("uid-1")
	if p, err := d.makePlan(pool2); err != nil || p.inputs == before || !p.Empty() || d.settledFor("uid-1") == before {
		t.Fatalf("generation 2 with the same content: plan %+v, %v; want a full, empty plan settled again", p, err)
	}

	// Someone else rewrites a slice with fewer devices: only its resourceVersion tells, and the
	// full plan puts the desired devices back.
	changed := first.Create[0].DeepCopy()
	changed.Spec.Devices = changed.Spec.Devices[:1]
	store(t, d, "11", changed)
	drift, err := d.makePlan(pool2)
	if err != nil {
		t.Fatal(err)
	}
	if len(drift.Update) != 1 || drift.Update[0].Name != changed.Name || len(drift.Update[0].Spec.Devices) != 2 {
		t.Fatalf("a slice changed behind the pool's back: plan %+v; want %s updated back to 2 devices", drift, changed.Name)
	}
	if d.settledFor("uid-1") != nil && d.settledFor("uid-1").versions[changed.Name] != "10" {
		t.Fatal("a plan with writes to make was recorded as settled")
	}

	// n3 joins the selector: a full plan creating its slice.
	if err := d.nodes.GetStore().Update(labelledNode("n3", "a")); err != nil {
		t.Fatal(err)
	}
	store(t, d, "12", first.Create[0])
	joined, err := d.makePlan(pool2)
	if err != nil {
		t.Fatal(err)
	}
	if len(joined.Create) != 1 || *joined.Create[0].Spec.NodeName != "n3" {
		t.Fatalf("n3 joined: plan %+v; want one slice created for n3", joined)
	}
}

// TestTimedCampaignComesDue: a pool whose timed fault campaign has a fault to come keeps its
// settled plan only until that fault is due; the plan says how long that is, and at the time
// the fault's taint is to be written.
func TestTimedCampaignComesDue(t *testing.T) {
	d := cachedDriver(t)
	for _, n := range []*corev1.Node{labelledNode("n1", "a"), labelledNode("n2", "a")} {
		if err := d.nodes.GetStore().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	clock := created.Add(time.Second)
	d.now = func() time.Time { return clock }
	pool := selectorPool(1)
	pool.Object["spec"].(map[string]any)["faultCampaigns"] = []any{map[string]any{"seed": int64(5), "mode": "unhealthy", "meanTimeToFault": "1h"}}
	pool.SetCreationTimestamp(metav1.NewTime(created))
	first, err := d.makePlan(pool)
	if err != nil {
		t.Fatal(err)
	}
	d.settleWritten(pool, first, store(t, d, "10", first.Create...))
	settled, err := d.makePlan(pool)
	if err != nil || !settled.Empty() || settled.inputs != d.settledFor("uid-1") || settled.Next <= 0 {
		t.Fatalf("after the publication: plan %+v, %v; want the settled empty plan with the next fault's time", settled, err)
	}
	// Just before the next fault: still settled, the wait shrinking; at it: one slice to update.
	next := settled.Next
	clock = clock.Add(next - time.Millisecond)
	if p, err := d.makePlan(pool); err != nil || p.inputs != d.settledFor("uid-1") || p.Next != time.Millisecond {
		t.Fatalf("1ms before the fault: plan %+v, %v; want the settled plan, next in 1ms", p, err)
	}
	clock = clock.Add(time.Millisecond)
	due, err := d.makePlan(pool)
	if err != nil || len(due.Update) != 1 {
		t.Fatalf("at the fault's time: plan %+v, %v; want one slice updated with the taint", due, err)
	}
	tainted := 0
	for _, dev := range due.Update[0].Spec.Devices {
		tainted += len(dev.Taints)
	}
	if tainted != 1 {
		t.Errorf("%d devices tainted at the first fault's time, want 1", tainted)
	}
	// outOfDate asks the engine to look again when the next fault after this one is due.
	fact, err := d.outOfDate(t.Context(), pool)
	p, _ := simdevice.FromUnstructured(pool)
	want, ok := p.Spec.NextCampaignFault([]string{"n1", "n2"}, clock.Sub(created))
	if err != nil || !fact.Holds || !ok || fact.RecheckAfter != want {
		t.Errorf("outOfDate at the fault: %+v, %v; want out of date, recheck after %v (the next fault)", fact, err, want)
	}
}
