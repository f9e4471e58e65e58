package e2e

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
)

// TestTimedFaultCampaign: a pool's timed fault campaign (meanTimeToFault) makes the controller
// publish each GPU's XID 79 taint at the GPU's own time after the pool's creation, with no write
// to the pool: the controller looks again when the next fault is due. The taints published at
// any moment are those whose time has come (within the controller's reaction), and they stay.
func TestTimedFaultCampaign(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t)
	ctx := t.Context()
	nodes := []string{"node-a", "node-b"}
	pool := newPool(e.Namespace, "timed", map[string]any{"deviceType": "gpu", "deviceCount": int64(4), "profile": "nvidia-gpu",
		"targetNodes":    []any{"node-a", "node-b"},
		"faultCampaigns": []any{map[string]any{"seed": int64(11), "mode": "xid", "xid": int64(79), "meanTimeToFault": "40s", "start": "5s"}}})
	created := e.Apply(t, "", pool)
	t.Cleanup(func() { e.DeleteDocs(t, []*unstructured.Unstructured{pool}) })
	e.WaitPoolReady(t, e.Namespace, "timed")
	born := created.GetCreationTimestamp().Time

	// Each GPU's time, as the draws give it (simdevice's own functions: the schedule itself is
	// unit-tested; here the controller must publish it on time).
	at := map[string]time.Duration{}
	for _, n := range nodes {
		for i := range 4 {
			at[fmt.Sprintf("%s/gpu-%d", n, i)] = 5*time.Second + simdevice.CampaignOnset(simdevice.CampaignDraw(11, n, i), 40*time.Second)
		}
	}
	order := slices.Collect(maps.Keys(at))
	sort.Slice(order, func(i, j int) bool { return at[order[i]] < at[order[j]] })
	t.Logf("fault times: %v", func() []string {
		var out []string
		for _, k := range order {
			out = append(out, k+"@"+at[k].Round(time.Second).String())
		}
		return out
	}())

	tainted := func() map[string]bool {
		sl, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{LabelSelector: simdevice.LabelSDPUID + "=" + string(created.GetUID())})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, s := range sl.Items {
			for _, d := range s.Spec.Devices {
				if len(d.Taints) == 1 && d.Taints[0].Key == "gpu.nvidia.com/xid" && d.Taints[0].Value == "79" {
					out[ptr.Deref(s.Spec.NodeName, "")+"/"+d.Name] = true
				}
			}
		}
		return out
	}
	// Watch for 100 s (the faults that come by then: about 90% of them with a 40 s mean),
	// checking every 2 s that what is published is what is due, give or take the controller's
	// reaction (3 s) and that no taint goes away.
	const slack = 3 * time.Second
	seen := map[string]bool{}
	checked := 0
	for time.Since(born) < 100*time.Second {
		time.Sleep(2 * time.Second)
		before := time.Since(born)
		got := tainted()
		after := time.Since(born)
		for k := range seen {
			if !got[k] {
				t.Errorf("%s: taint gone at %v", k, after)
			}
		}
		for k, when := range at {
			switch {
			case when <= before-slack && !got[k]:
				t.Errorf("%s: due at %v, not tainted at %v", k, when, after)
			case when > after && got[k]:
				t.Errorf("%s: due at %v, tainted already at %v", k, when, before)
			}
		}
		seen = got
		checked++
	}
	cur, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Get(ctx, "timed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.GetGeneration() != created.GetGeneration() {
		t.Errorf("the pool's spec changed: generation %d -> %d", created.GetGeneration(), cur.GetGeneration())
	}
	due := 0
	for _, when := range at {
		if when <= 100*time.Second-slack {
			due++
		}
	}
	if len(seen) < due || due == 0 || checked < 40 {
		t.Errorf("%d GPUs tainted after 100 s, %d due; %d checks", len(seen), due, checked)
	}
}
