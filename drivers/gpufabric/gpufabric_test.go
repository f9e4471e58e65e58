package gpufabric

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/engine"
)

const clique = "a1b2c3d4-e5f6-7890-abcd-ef1234567890.0"

func fault(device int, node string, mode simdevice.FaultMode) simdevice.Fault {
	return simdevice.Fault{Device: intstr.FromInt32(int32(device)), Node: node, Mode: mode}
}

func gpus(name string, faults ...simdevice.Fault) *simdevice.Pool {
	return pooltest.Pool("ml", name, "", simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 4,
		Profile: simdevice.ProfileNvidiaGPUGB200, NodeSelector: map[string]string{CliqueLabel: clique}, Faults: faults})
}

func TestOf(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0", Labels: map[string]string{CliqueLabel: clique}}}
	all := func(mode simdevice.FaultMode) []simdevice.Fault {
		return []simdevice.Fault{fault(0, "n0", mode), fault(1, "", mode), fault(2, "n0", mode), fault(3, "n0", mode)}
	}
	channels := pooltest.Pool("ml", "imex", "", simdevice.PoolSpec{DriverName: "compute-domain.nvidia.com", DeviceType: "channel", DeviceCount: 1,
		Profile: simdevice.ProfileNvidiaComputeDomain, TargetNodes: []string{"n0"}})
	for _, c := range []struct {
		name           string
		pools          []*simdevice.Pool
		gpus, attached int
		detached       bool
	}{
		{"no fault", []*simdevice.Pool{gpus("gb200")}, 4, 4, false},
		{"every GPU detached", []*simdevice.Pool{gpus("gb200", all(simdevice.FaultFabricDetached)...)}, 4, 0, true},
		{"one GPU still attached", []*simdevice.Pool{gpus("gb200", all(simdevice.FaultFabricDetached)[:3]...)}, 4, 1, false},
		{"another node's fault", []*simdevice.Pool{gpus("gb200", fault(0, "n1", simdevice.FaultFabricDetached))}, 4, 4, false},
		// NVML does not enumerate a GPU that is gone: the rest decide.
		{"the attached GPU disappeared", []*simdevice.Pool{gpus("gb200", append(all(simdevice.FaultFabricDetached)[:3], fault(3, "n0", simdevice.FaultDisappear))...)}, 3, 0, true},
		{"every GPU gone", []*simdevice.Pool{gpus("gb200", all(simdevice.FaultDisappear)...)}, 0, 0, false},
		// Taints are the driver's health events: the fabric stays attached.
		{"XID 74 is not a detached fabric", []*simdevice.Pool{gpus("gb200", all(simdevice.FaultNVLink)...)}, 4, 4, false},
		{"a second pool still attached", []*simdevice.Pool{gpus("gb200", all(simdevice.FaultFabricDetached)...), gpus("more")}, 8, 4, false},
		{"the compute-domain driver's channels are no GPUs", []*simdevice.Pool{channels}, 0, 0, false},
		{"a campaign hitting every node", []*simdevice.Pool{func() *simdevice.Pool {
			p := gpus("gb200")
			p.Spec.FaultCampaigns = []simdevice.FaultCampaign{{Seed: 1, Mode: simdevice.FaultFabricDetached, Fraction: ptr.To(float64(1))}}
			return p
		}()}, 4, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range c.pools {
				if errs := p.Validate(); len(errs) > 0 {
					t.Fatal(errs)
				}
			}
			f := Of(node, c.pools, time.Now())
			if f.GPUs != c.gpus || f.Attached != c.attached || f.Detached() != c.detached {
				t.Errorf("got %+v detached %v, want %d GPUs, %d attached, detached %v", f, f.Detached(), c.gpus, c.attached, c.detached)
			}
		})
	}
}

// TestOfNext: a timed fabric-detached campaign makes the node's fact say when to look again.
func TestOfNext(t *testing.T) {
	created := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	p := gpus("gb200")
	p.CreationTimestamp = metav1.NewTime(created)
	p.Spec.FaultCampaigns = []simdevice.FaultCampaign{{Seed: 3, Mode: simdevice.FaultFabricDetached, MeanTimeToFault: "1h"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0", Labels: map[string]string{CliqueLabel: clique}}}
	want, ok := p.Spec.NextCampaignFault([]string{"n0"}, time.Second)
	f := Of(node, []*simdevice.Pool{p}, created.Add(time.Second))
	if !ok || f.Next != want || f.Next <= 0 {
		t.Errorf("Next %v, want %v (%v)", f.Next, want, ok)
	}
	if f = Of(node, []*simdevice.Pool{p}, created.Add(time.Second+want)); !f.Detached() || f.Next != 0 {
		t.Errorf("at the node's time: %+v detached %v, want every GPU detached and nothing more to come", f, f.Detached())
	}
}

// TestDetachedNodeStaysTargeted: a pool selecting nodes by their clique keeps counting the GPUs
// of a node whose label is gone (kept in the annotation), so the label does not come back while
// the fabric is detached; the pool's own pools are the node's.
func TestDetachedNodeStaysTargeted(t *testing.T) {
	inf := engine.NewInformers(nil)
	pools := clusterview.NewPools()
	reg := engine.NewRegistry()
	d := Register(reg, inf, pools)
	pool := pooltest.Object("ml", "gb200", map[string]any{"deviceType": "gpu", "deviceCount": int64(4), "profile": "nvidia-gpu-gb200",
		"nodeSelector":   map[string]any{CliqueLabel: clique},
		"faultCampaigns": []any{map[string]any{"seed": int64(1), "mode": "fabric-detached", "fraction": float64(1)}}})
	pools.Upsert(pool)
	node := func(name string, labels, annotations map[string]string) *corev1.Node {
		labels["draforge.oaslananka/simulated"] = "true"
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	}
	store := inf.For(gvr.Nodes).GetStore()
	for _, n := range []*corev1.Node{
		node("labelled", map[string]string{CliqueLabel: clique}, nil),
		node("detached", map[string]string{}, map[string]string{DetachedCliqueAnnotation: clique}),
		node("other-clique", map[string]string{CliqueLabel: "a1b2c3d4-e5f6-7890-abcd-ef1234567890.1"}, nil),
		node("no-clique", map[string]string{}, nil),
		{ObjectMeta: metav1.ObjectMeta{Name: "real", Labels: map[string]string{CliqueLabel: clique}}},
	} {
		if err := store.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, k := range d.poolNodes(pool) {
		got = append(got, k.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"detached", "labelled"}) {
		t.Errorf("pool maps to %v, want [detached labelled]", got)
	}
	u := &unstructured.Unstructured{}
	u.SetName("detached")
	u.SetAnnotations(map[string]string{DetachedCliqueAnnotation: clique})
	fact, err := d.detached(context.Background(), u)
	if err != nil || !fact.Holds || fact.Message != "0 of 4 GPUs (pools ml/gb200) have their NVLink fabric attached" {
		t.Errorf("detached node: %+v, %v", fact, err)
	}
	u.SetName("other-clique")
	u.SetAnnotations(nil)
	u.SetLabels(map[string]string{CliqueLabel: "a1b2c3d4-e5f6-7890-abcd-ef1234567890.1"})
	if fact, _ := d.detached(context.Background(), u); fact.Holds || fact.Message != "no simulated NVIDIA GPU on the node" {
		t.Errorf("untargeted node: %+v", fact)
	}
}
