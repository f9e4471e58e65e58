package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/inventory/inventorytest"
)

// withPendingPod is Healthy plus pod demo/stuck using the pending claim, marked unschedulable.
func withPendingPod() *inventory.Snapshot {
	s := inventorytest.Healthy()
	p := inventorytest.Pod("demo", "stuck", "waiting", "")
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available: 2 Insufficient cpu."}}
	s.Pods = append(s.Pods, p)
	return s.Sort()
}

func TestPodRoutes(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	s.Publish(withPendingPod, nil)
	get := func(path string, status int) []byte {
		t.Helper()
		resp, b := do(t, "GET", ts.URL+path, nil)
		if resp.StatusCode != status {
			t.Fatalf("%s: status %d, want %d: %s", path, resp.StatusCode, status, b)
		}
		return b
	}
	var pods []inventory.PodView
	if err := json.Unmarshal(get("/api/pods", 200), &pods); err != nil || len(pods) != 2 {
		t.Fatalf("pods %v %+v", err, pods)
	}
	if pods[0].Name != "stuck" || pods[0].PendingClaims != 1 || pods[0].Unschedulable == "" || pods[1].Name != "worker" || len(pods[1].Devices) != 1 {
		t.Errorf("pods %+v", pods)
	}
	if b := get("/api/pods/demo/worker", 200); !strings.Contains(string(b), `"device": "gpu-0"`) {
		t.Errorf("pod: %s", b)
	}
	if b := get("/api/pods/demo/nope", 404); errCode(t, b) != codeNotFound {
		t.Errorf("%s", b)
	}
	b := get("/api/explain/pod/demo/stuck", 200)
	for _, want := range []string{`"message": "0/2 nodes are available: 2 Insufficient cpu."`, `"claim": "waiting"`, `"summary": "pending: claim waiting pending: claim fits on node node-a; scheduler: 0/2`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("explain pod lacks %q: %s", want, b)
		}
	}
	get("/api/explain/pod/demo/nope", 404)
	if b := get("/api/explain/demo/waiting", 200); !strings.Contains(string(b), `"state": "Pending"`) {
		t.Errorf("claim explain route broken: %s", b)
	}

	var page OccupancyPage
	if err := json.Unmarshal(get("/api/occupancy", 200), &page); err != nil {
		t.Fatal(err)
	}
	if page.Total != 2 || page.Nodes != 2 || page.Devices != 4 || page.Allocated != 1 || page.Free != 3 || len(page.Rows) != 2 || page.Rows[0].Strip != "af" {
		t.Errorf("occupancy %+v", page)
	}
	for q, want := range map[string]int{
		"?q=node-b": 1, "?q=kubernetes.io/hostname=node-a": 1, "?q=kubernetes.io/hostname": 2, "?q=demo/gpus": 2,
		"?q=nothing": 0, "?state=allocated": 1, "?state=tainted": 0, "?offset=1&limit=1": 2,
	} {
		var p OccupancyPage
		_ = json.Unmarshal(get("/api/occupancy"+q, 200), &p)
		rows := want
		if q == "?offset=1&limit=1" {
			rows = 1
		}
		if p.Total != want || len(p.Rows) != rows {
			t.Errorf("%s: total %d rows %d, want %d/%d", q, p.Total, len(p.Rows), want, rows)
		}
	}
	// groupBy orders the rows by a label's value before paging and sums each domain.
	var grouped OccupancyPage
	if err := json.Unmarshal(get("/api/occupancy?groupBy=kubernetes.io/hostname&offset=1&limit=1", 200), &grouped); err != nil {
		t.Fatal(err)
	}
	if grouped.GroupBy != "kubernetes.io/hostname" || len(grouped.Groups) != 2 || grouped.Groups[0] != (inventory.OccupancyGroup{Value: "node-a", Nodes: 1, Devices: 2, Allocated: 1, Free: 1}) ||
		len(grouped.Rows) != 1 || grouped.Rows[0].Node != "node-b" || grouped.TopologyKeys == nil {
		t.Errorf("grouped occupancy %+v", grouped)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?offset=-1", "?offset=x", "?state=busy", "?groupBy=a&groupBy=b"} {
		if b := get("/api/occupancy"+q, 400); errCode(t, b) != codeBadRequest {
			t.Errorf("%s: %s", q, b)
		}
	}
	var nd NodeDevices
	if err := json.Unmarshal(get("/api/occupancy/node-a", 200), &nd); err != nil {
		t.Fatal(err)
	}
	if nd.Node != "node-a" || len(nd.DeviceList) != 2 || nd.DeviceList[0].AllocatedTo[0] != "demo/used" || len(nd.Pods) != 1 || nd.Pods[0].Name != "worker" {
		t.Errorf("node devices %+v", nd)
	}
	get("/api/occupancy/node-z", 404)
}

// A pod's change reaches stream clients with the new DRA pod counts, and the pods endpoint
// follows the new snapshot.
func TestPodChangeStreams(t *testing.T) {
	s, ts := newTestServer(t, Options{Heartbeat: time.Hour})
	s.Publish(inventorytest.Healthy, nil)
	_, r := openStream(t, ts.URL, nil)
	if first := r.next(false); first.Event != EventSnapshot || !strings.Contains(first.Data, `"draPods":{"Pending":1}`) {
		t.Fatalf("first %+v", first)
	}
	snap := withPendingPod()
	s.Publish(fixed(snap), []Change{{Kind: "Pod", Namespace: "demo", Name: "stuck", Op: OpAdd}})
	ev := r.next(false)
	if ev.Event != EventChange || !strings.Contains(ev.Data, `{"kind":"Pod","namespace":"demo","name":"stuck","op":"add"}`) || !strings.Contains(ev.Data, `"draPods":{"Pending":2}`) {
		t.Fatalf("change %+v", ev)
	}
	// The stuck pod gets its claim and runs on node-b.
	next := withPendingPod()
	for _, c := range next.Claims {
		if c.Name == "waiting" {
			inventorytest.Allocate(c, "demo", "gpus", "node-b", "gpu-1")
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "stuck", UID: "uid-pod-stuck"}}
		}
	}
	for _, p := range next.Pods {
		if p.Name == "stuck" {
			p.Spec.NodeName, p.Status.Phase, p.Status.Conditions = "node-b", corev1.PodRunning, nil
		}
	}
	s.Publish(fixed(next), []Change{{Kind: "Pod", Namespace: "demo", Name: "stuck", Op: OpUpdate}, {Kind: "ResourceClaim", Namespace: "demo", Name: "waiting", Op: OpUpdate}})
	if ev := r.next(false); !strings.Contains(ev.Data, `"draPods":{"Pending":1,"Running":1}`) {
		t.Errorf("change %+v", ev)
	}
	_, b := do(t, "GET", ts.URL+"/api/pods/demo/stuck", nil)
	if !strings.Contains(string(b), `"node": "node-b"`) || !strings.Contains(string(b), `"device": "gpu-1"`) {
		t.Errorf("pod after update: %s", b)
	}
	_, b = do(t, "GET", ts.URL+"/api/occupancy/node-b", nil)
	if !strings.Contains(string(b), `"strip": "fa"`) {
		t.Errorf("occupancy after update: %s", fmt.Sprint(string(b)))
	}
}
