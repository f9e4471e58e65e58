package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/inventory"
	it "github.com/draforge/draforge/drivers/inventory/inventorytest"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/test/browser"
)

// occupancyBound is how long the nodes view may take to render 1,000 nodes (8,000 devices),
// measured from navigation start inside the page, everything else on the dashboard loading
// at the same time.
const occupancyBound = 5 * time.Second

// thousandNodes is 1,000 nodes sim-0000…sim-0999 with 8 GPUs each (SimulatedDevicePools
// demo/gpus-NN): gpu-0 allocated on even nodes (500 claims), gpu-7 tainted NoExecute on every
// tenth node (100 devices), pod demo/trainer running on sim-0990 with its claim and pod
// demo/stuck pending (its claim not created yet) with the scheduler's message.
func thousandNodes() *inventory.Snapshot {
	var nodes []*corev1.Node
	var names []string
	for i := range 1000 {
		n := it.Node(fmt.Sprintf("sim-%04d", i))
		n.Labels["draforge.io/rack"] = "rack-" + strconv.Itoa(i/100)
		nodes = append(nodes, n)
		names = append(names, n.Name)
	}
	// A SimulatedDevicePool targets at most 64 nodes: 20 pools gpus-00…gpus-19 of 50 nodes.
	s := &inventory.Snapshot{Classes: []*resourcev1.DeviceClass{it.Class("gpu")}, Nodes: nodes}
	for g := range 20 {
		p := it.Pool("demo", fmt.Sprintf("gpus-%02d", g), 8, names[g*50:(g+1)*50]...)
		s.Pools = append(s.Pools, p)
		s.Slices = append(s.Slices, it.Slices(p, nodes[g*50:(g+1)*50])...)
	}
	for _, sl := range s.Slices {
		var i int
		_, _ = fmt.Sscanf(ptr.Deref(sl.Spec.NodeName, ""), "sim-%d", &i)
		if i%10 == 0 {
			sl.Spec.Devices[7].Taints = []resourcev1.DeviceTaint{{Key: "draforge.io/fault", Value: "xid-79", Effect: resourcev1.DeviceTaintEffectNoExecute}}
		}
	}
	for i := 0; i < 1000; i += 2 {
		c := it.Claim("demo", fmt.Sprintf("job-%04d", i), "gpu")
		it.Allocate(c, "demo", fmt.Sprintf("gpus-%02d", i/50), names[i], "gpu-0")
		s.Claims = append(s.Claims, c)
	}
	trainer := it.Pod("demo", "trainer", "job-0990", "sim-0990")
	trainer.Status.Phase = corev1.PodRunning
	stuck := it.Pod("demo", "stuck", "waiting", "")
	stuck.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1000 nodes are available: 1000 Insufficient cpu."}}
	// No pending claim: the dashboard would explain it on load, which at 1,000 nodes runs the
	// allocator per node for seconds (the nodes view does not wait for it, but the test would).
	s.Pods = []*corev1.Pod{trainer, stuck}
	return s.Sort()
}

const occupancyLoaded = dashboardLoaded + ` && document.body.dataset.occupancy === "true"`

// The nodes view at 1,000 nodes: totals over all of them, one page of 100 rows in the DOM
// (not 1,000, not 8,000 devices), each with its counts and heat strip, within occupancyBound.
func TestOccupancyThousandNodes(t *testing.T) {
	requireBrowser(t)
	s, ts := newTestServer(t, Options{})
	s.Publish(thousandNodes, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dom, err := browser.RenderedDOM(ctx, ts.URL+"/#nodes", occupancyLoaded)
	if err != nil {
		t.Fatalf("%v\nDOM:\n%.4000s", err, dom)
	}
	for _, want := range []string{
		"1000 of 1000 nodes · 8000 devices: 500 allocated, 7400 free, 100 tainted",
		"nodes 1–100 of 1000",
		`data-node="sim-0000"`, `data-node="sim-0099"`,
		// sim-0000: gpu-0 allocated, gpu-7 tainted.
		`<span class="cell cell-a"></span><span class="cell cell-f"></span><span class="cell cell-f"></span><span class="cell cell-f"></span><span class="cell cell-f"></span><span class="cell cell-f"></span><span class="cell cell-f"></span><span class="cell cell-t"></span>`,
		`<button type="button" id="occ-prev" disabled="">`,
		"demo/stuck", "0/1000 nodes are available: 1000 Insufficient cpu.", // pods view
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if rows := strings.Count(dom, `data-node="`); rows != 100 {
		t.Errorf("%d node rows in the DOM, want one page of 100", rows)
	}
	if strings.Contains(dom, `data-node="sim-0100"`) {
		t.Error("the second page is in the DOM")
	}
	ms := regexp.MustCompile(`data-occupancy-ms="(\d+)"`).FindStringSubmatch(dom)
	if ms == nil {
		t.Fatal("no render time recorded")
	}
	took, _ := strconv.Atoi(ms[1])
	t.Logf("nodes view rendered %d ms after navigation start", took)
	if time.Duration(took)*time.Millisecond > occupancyBound {
		t.Errorf("nodes view took %d ms, bound %v", took, occupancyBound)
	}
}

// Filter and drill-down from the URL: one node's row, its devices (tainted, allocated) and
// the pod running on it.
func TestOccupancyFilterAndDrillDown(t *testing.T) {
	requireBrowser(t)
	s, ts := newTestServer(t, Options{})
	s.Publish(thousandNodes, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dom, err := browser.RenderedDOM(ctx, ts.URL+"/#nodes?q=draforge.io/rack=rack-9&state=tainted&node=sim-0990", occupancyLoaded+` && document.getElementById("occ-node-title")`)
	if err != nil {
		t.Fatalf("%v\nDOM:\n%.4000s", err, dom)
	}
	for _, want := range []string{
		"10 of 1000 nodes · 80 devices: 10 allocated, 60 free, 10 tainted",
		`data-node="sim-0900"`, `data-node="sim-0990"`,
		"Node sim-0990: 1/8 allocated, 1 tainted",
		"draforge.io/fault=xid-79:NoExecute",
		"demo/job-0990",
		"demo/trainer", "job-0990:" + simdevice.PoolNameFor("demo", "gpus-19", "sim-0990") + "/gpu-0",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if rows := strings.Count(dom, `data-node="`); rows != 10 {
		t.Errorf("%d node rows, want the 10 tainted nodes of rack-9", rows)
	}
}

// Grouped by a topology label (from the URL): one table per rack on the page, each captioned
// with its rack's totals, and the label offered in the group-by menu.
func TestOccupancyGroupedByRack(t *testing.T) {
	requireBrowser(t)
	s, ts := newTestServer(t, Options{})
	s.Publish(thousandNodes, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dom, err := browser.RenderedDOM(ctx, ts.URL+"/#nodes?state=tainted&groupBy=draforge.io/rack", occupancyLoaded)
	if err != nil {
		t.Fatalf("%v\nDOM:\n%.4000s", err, dom)
	}
	for _, want := range []string{
		`<option value="draforge.io/rack">draforge.io/rack</option>`,
		"draforge.io/rack = rack-0: 10 nodes, 80 devices: 10 allocated, 60 free, 10 tainted (10)",
		"draforge.io/rack = rack-9: 10 nodes, 80 devices: 10 allocated, 60 free, 10 tainted (10)",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if n := strings.Count(dom, "draforge.io/rack = rack-"); n != 10 {
		t.Errorf("%d rack tables, want one per rack", n)
	}
	if t.Failed() {
		t.Logf("DOM:\n%.6000s", dom)
	}
}

// The pods tab lists pods with their devices and the scheduler's message, and explains the
// pod named in the URL: its pending claim and the scheduler's reason.
func TestDashboardExplainsPod(t *testing.T) {
	requireBrowser(t)
	s, ts := newTestServer(t, Options{})
	s.Publish(withPendingPod, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := browser.RenderedDOM(ctx, ts.URL+"/#pods?explain=demo%2Fstuck", dashboardLoaded+` && document.getElementById("pod-explain-summary")`)
	if err != nil {
		t.Fatalf("%v\nDOM:\n%.4000s", err, dom)
	}
	for _, want := range []string{
		`data-explain-pod="demo/stuck"`, `data-explain-pod="demo/worker"`,
		"used:" + simdevice.PoolNameFor("demo", "gpus", "node-a") + "/gpu-0 on node-a", // worker's device
		"Pod demo/stuck",
		"pending: claim waiting pending: claim fits on node node-a; scheduler: 0/2 nodes are available: 2 Insufficient cpu.",
		"Unschedulable: 0/2 nodes are available",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// explainBound is how long the Explain tab may take to fetch and show a pending claim at 1,000
// nodes once serve has explained it (serve explains a claim once per snapshot; computing that
// explanation is the bench's explain latency row, and under -race it is several times slower
// than the product's).
const explainBound = time.Second

// The Explain tab at 1,000 nodes is summary-first, as `draforge explain` is: reason counts and
// node groups, not 8,000 device rows and 1,000 node rows; the devices come on request, capped.
func TestDashboardExplainThousandNodes(t *testing.T) {
	requireBrowser(t)
	s, ts := newTestServer(t, Options{})
	snap := thousandNodes()
	big := it.Claim("demo", "big", "gpu")
	big.Spec.Devices.Requests[0].Exactly.Count = 9 // more than any node has
	snap.Claims = append(snap.Claims, big)
	s.Publish(fixed(snap.Sort()), nil)
	loaded := dashboardLoaded + ` && document.getElementById("explain-summary") && document.body.dataset.explainMs`
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The summary leaves the per-device lists out: under a fifth of the full answer.
	full, summary := getSize(t, ts.URL+"/api/explain/demo/big"), getSize(t, ts.URL+"/api/explain/demo/big?devices=false")
	if summary*5 > full {
		t.Errorf("explain summary %d bytes, full %d bytes", summary, full)
	}

	dom, err := browser.RenderedDOM(ctx, ts.URL+"/#explain?claim=demo%2Fbig", loaded)
	if err != nil {
		t.Fatalf("%v\nDOM:\n%.4000s", err, dom)
	}
	for _, want := range []string{
		"no node fits the claim (1000 nodes tried)",
		"Request gpu (class gpu, ExactCount 9): 8000 matching, 7400 available",
		"Excluded: AlreadyAllocated 500, Tainted 100",
		`data-explain-devices="demo/big"`,
		"Node groups (",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("summary DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, "Devices for gpu") {
		t.Error("the summary rendered the device list")
	}
	if rows := strings.Count(dom, "does not fit</span>"); rows == 0 || rows > 10 {
		t.Errorf("%d node group rows, want a few groups for 1,000 nodes", rows)
	}
	ms := regexp.MustCompile(`data-explain-ms="(\d+)"`).FindStringSubmatch(dom)
	if ms == nil {
		t.Fatal("no explain render time recorded")
	}
	took, _ := strconv.Atoi(ms[1])
	t.Logf("explain fetched and rendered in %d ms", took)
	if time.Duration(took)*time.Millisecond > explainBound {
		t.Errorf("explain took %d ms, bound %v", took, explainBound)
	}

	dom, err = browser.RenderedDOM(ctx, ts.URL+"/#explain?claim=demo%2Fbig&devices=1", loaded+` && document.body.innerHTML.includes("Devices for gpu")`)
	if err != nil {
		t.Fatalf("%v\nDOM:\n%.4000s", err, dom)
	}
	for _, want := range []string{"Devices for gpu (200)", "7800 more devices: draforge explain --devices claim/big -n demo lists them all"} {
		if !strings.Contains(dom, want) {
			t.Errorf("devices DOM lacks %q", want)
		}
	}
}

// getSize is the length of a 200 answer's body.
func getSize(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return len(b)
}

// The pods tab's explanation of a gang member shows its PodGroup: policy and minCount, members
// placed, and kube-scheduler's verdict on the group.
func TestDashboardExplainsGangMember(t *testing.T) {
	requireBrowser(t)
	s, ts := newTestServer(t, Options{})
	s.Publish(func() *inventory.Snapshot {
		snap := withPendingPod()
		for _, p := range snap.Pods {
			if p.Name == "stuck" {
				p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("big")}
			}
		}
		snap.PodGroups = []*schedulingv1beta1.PodGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "big"},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
			Status: schedulingv1beta1.PodGroupStatus{Conditions: []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
				Reason: "Unschedulable", Message: "pod group is unschedulable, 0/1 placements are available"}}}}}
		snap.PodGroupsRead = true
		return snap.Sort()
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := browser.RenderedDOM(ctx, ts.URL+"/#pods?explain=demo%2Fstuck", dashboardLoaded+` && document.getElementById("pod-explain-gang")`)
	if err != nil {
		t.Fatalf("%v\nDOM:\n%.4000s", err, dom)
	}
	for _, want := range []string{
		"PodGroup big (gang, minCount 3): 1 pods, 0 placed",
		"Group scheduling: </strong>False Unschedulable: pod group is unschedulable, 0/1 placements are available",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%.6000s", dom)
	}
}
