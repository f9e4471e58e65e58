package pools

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
)

func desired(t *testing.T, count int, nodes ...string) []*resourcev1.ResourceSlice {
	t.Helper()
	p := pooltest.Pool("ns", "p", "uid-1", simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: count, TargetNodes: nodes})
	var ns []*corev1.Node
	for _, n := range nodes {
		ns = append(ns, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	s, err := simdevice.DesiredSlices(p, ns)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stored turns desired slices into what the API server would hold at generation gen.
func stored(in []*resourcev1.ResourceSlice, gen int64) []*resourcev1.ResourceSlice {
	var out []*resourcev1.ResourceSlice
	for i, s := range in {
		c := s.DeepCopy()
		c.Spec.Pool.Generation = gen
		c.ResourceVersion = string(rune('1' + i))
		out = append(out, c)
	}
	return out
}

func none(string) *resourcev1.ResourceSlice { return nil }
func dead(string) bool                      { return false }

func names(ss []*resourcev1.ResourceSlice) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name+"@"+string(rune('0'+s.Spec.Pool.Generation)))
	}
	return strings.Join(n, ",")
}

func TestPlanCreatesThenIsIdempotent(t *testing.T) {
	want := desired(t, 2, "a", "b")
	p := MakePlan(want, nil, none, dead)
	if len(p.Create) != 2 || len(p.Update)+len(p.Delete)+len(p.Blocked) != 0 {
		t.Fatalf("first plan %+v", p)
	}
	for _, s := range p.Create {
		if s.Spec.Pool.Generation != 1 {
			t.Errorf("%s created at generation %d, want 1", s.Name, s.Spec.Pool.Generation)
		}
	}
	again := MakePlan(want, stored(want, 1), none, dead)
	if !again.Empty() {
		t.Fatalf("nothing changed but the plan writes: %+v", again)
	}
	if len(again.Nodes) != 2 || again.Nodes[0].Generation != 1 || again.Nodes[0].DeviceCount != 2 {
		t.Errorf("status nodes %+v", again.Nodes)
	}
}

func TestPlanBumpsGenerationOfChangedPoolOnly(t *testing.T) {
	old := stored(desired(t, 2, "a", "b"), 3)
	want := desired(t, 3, "a", "b")
	// Only node a's pool changes if we keep b's slice equal: rebuild b from the old spec.
	want[1] = desired(t, 2, "a", "b")[1]
	p := MakePlan(want, old, none, dead)
	if got := names(p.Update); got != want[0].Name+"@4" {
		t.Fatalf("updates %q, want only node a's slice at generation 4", got)
	}
	if p.Update[0].ResourceVersion != old[0].ResourceVersion {
		t.Errorf("update must carry the stored resourceVersion for optimistic concurrency")
	}
}

func TestPlanDeletesSlicesOfUntargetedNodes(t *testing.T) {
	old := stored(desired(t, 1, "a", "b"), 1)
	p := MakePlan(desired(t, 1, "a"), old, none, dead)
	if len(p.Delete) != 1 || p.Delete[0] != old[1].Name || len(p.Create)+len(p.Update) != 0 {
		t.Fatalf("plan %+v", p)
	}
}

func TestPlanNeverTakesANameHeldByALivePool(t *testing.T) {
	want := desired(t, 1, "a")
	other := want[0].DeepCopy()
	other.Labels[simdevice.LabelSDPUID] = "uid-old"
	byName := func(n string) *resourcev1.ResourceSlice {
		if n == other.Name {
			return other
		}
		return nil
	}
	alive := MakePlan(want, nil, byName, func(uid string) bool { return uid == "uid-old" })
	if len(alive.Blocked) != 1 || len(alive.Create)+len(alive.Delete) != 0 {
		t.Fatalf("a live incarnation's slice must block, got %+v", alive)
	}
	gone := MakePlan(want, nil, byName, dead)
	if len(gone.Delete) != 1 || len(gone.Create) != 1 || len(gone.Blocked) != 0 {
		t.Fatalf("an orphan's slice must be replaced, got %+v", gone)
	}
}

func TestPlanRepairsMixedGenerations(t *testing.T) {
	old := stored(desired(t, 1, "a"), 2)
	old[0].Spec.Pool.Generation = 1
	extra := old[0].DeepCopy()
	extra.Name += "-extra"
	extra.Spec.Pool.Generation = 2
	p := MakePlan(desired(t, 1, "a"), append(old, extra), none, dead)
	if names(p.Update) != old[0].Name+"@3" || len(p.Delete) != 1 || p.Delete[0] != extra.Name {
		t.Fatalf("plan %+v", p)
	}
}
