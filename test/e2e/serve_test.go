package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/test/browser"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// startServe runs `draforge serve` against the package cluster on a free port and waits for
// /readyz; it is killed at test end. It reuses the controller process type (same probes).
func startServe(t *testing.T, args ...string) *controller {
	t.Helper()
	return e2eutil.Run(t, e2eutil.ControllerSpec{Kubeconfig: kubeconfigPath, Subcommand: "serve", AddrFlag: "--address", Args: args})
}

// getJSON GETs path and decodes a 200 answer into v.
func getJSON(t *testing.T, c *controller, path string, v any) {
	t.Helper()
	code, body := c.Get(path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
}

type streamEvent struct{ id, event, data string }

// openEventStream reads /api/stream in the background until ctx ends.
func openEventStream(ctx context.Context, t *testing.T, addr string) <-chan streamEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan streamEvent, 1000)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev streamEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && ev.event != "":
				ch <- ev
				ev = streamEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data += line[6:]
			}
		}
	}()
	return ch
}

// TestServe runs the controller and `draforge serve` against the real API server: the API shows
// the basic-gpu allocation, the stream reports a new claim, explain gives reasons for a pending
// claim, machine history comes from the controller, requests cost no API calls, the dashboard
// renders in Chromium, and SIGTERM ends open streams within --shutdown-timeout.
func TestServe(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	ctrl := startController(t)
	// The history endpoint is on the loopback --debug-address only, not on the runtime address
	// the chart's Service exposes.
	if code, body := ctrl.Get("/debug/machines/node/any"); code != http.StatusNotFound {
		t.Errorf("runtime address serves /debug/machines: %d %s", code, body)
	}
	src, err := os.ReadFile("../../examples/scenarios/basic-gpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := decodeDocs(t, src)
	// Registered after the controller's cleanup, so it runs first and the finalizers go away.
	t.Cleanup(func() { e.DeleteDocs(t, docs) })
	srv := startServe(t, "--controller-url", "http://"+ctrl.DebugAddr, "--doctor-interval", "1h", "--shutdown-timeout", "2s")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := openEventStream(ctx, t, srv.Addr)
	select {
	case ev := <-events:
		if ev.event != "snapshot" || ev.id == "" {
			t.Fatalf("first event %+v, want snapshot with an id", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot event")
	}

	for _, u := range docs {
		e.Apply(t, "", u)
	}
	const ns = "draforge-basic-gpu"
	poolName := simdevice.PoolNameFor(ns, "basic-gpu", "node-a")
	eventually(t, 60*time.Second, func() (bool, string) {
		var claims []struct {
			Namespace, Name, State, Node string
			Allocations                  []struct{ Pool, Device string }
		}
		getJSON(t, srv, "/api/claims", &claims)
		for _, c := range claims {
			if c.Namespace == ns && c.Name == "single-gpu" {
				ok := c.State != "Pending" && c.Node == "node-a" && len(c.Allocations) == 1 && c.Allocations[0].Pool == poolName
				return ok, fmt.Sprintf("%+v", c)
			}
		}
		return false, fmt.Sprintf("single-gpu not in %+v", claims)
	})
	var pools []struct {
		Pool, Node, SDP, Health string
		Devices                 int `json:"deviceCount"`
		Allocated               int `json:"allocatedDevices"`
	}
	getJSON(t, srv, "/api/pools", &pools)
	found := false
	for _, p := range pools {
		if p.Pool == poolName {
			found = true
			if p.Node != "node-a" || p.SDP != ns+"/basic-gpu" || p.Devices != 2 || p.Allocated != 1 || p.Health != "Healthy" {
				t.Errorf("pool %+v", p)
			}
		}
	}
	if !found {
		t.Fatalf("pool %s not in /api/pools: %+v", poolName, pools)
	}

	// A pod bound to node-a using single-gpu: /api/pods shows the device it holds, the node's
	// occupancy row counts it allocated.
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Kube.CoreV1().ServiceAccounts(ns).Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpu-user", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "node-a", ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("single-gpu")}},
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := e.Kube.CoreV1().Pods(ns).Create(t.Context(), user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Pods(ns).Delete(context.Background(), "gpu-user", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	eventually(t, 20*time.Second, func() (bool, string) {
		var pod struct {
			Node    string
			Devices []struct{ Claim, Pool, Device, Node string }
		}
		if code, body := srv.Get("/api/pods/" + ns + "/gpu-user"); code != http.StatusOK {
			return false, body
		}
		getJSON(t, srv, "/api/pods/"+ns+"/gpu-user", &pod)
		ok := pod.Node == "node-a" && len(pod.Devices) == 1 && pod.Devices[0].Claim == "single-gpu" && pod.Devices[0].Pool == poolName && pod.Devices[0].Node == "node-a"
		return ok, fmt.Sprintf("%+v", pod)
	})
	// A pod using single-gpu that kube-scheduler cannot place: /api/pods shows its reason (the
	// pod cache keeps the PodScheduled condition of unbound pods).
	nowhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nowhere", Namespace: ns},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"draforge.test/no-such-node": "true"},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("single-gpu")}},
			Containers:     []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := e.Kube.CoreV1().Pods(ns).Create(t.Context(), nowhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Pods(ns).Delete(context.Background(), "nowhere", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		var pod struct{ Unschedulable string }
		code, body := srv.Get("/api/pods/" + ns + "/nowhere")
		if code != http.StatusOK {
			return false, body
		}
		getJSON(t, srv, "/api/pods/"+ns+"/nowhere", &pod)
		return strings.Contains(pod.Unschedulable, "nodes are available"), body
	})

	// The CLI says which device the bound pod holds (the claim is not reserved for it: no
	// scheduler placed it).
	if ex := mustCLI(t, "explain", "-n", ns, "pod/gpu-user"); !strings.Contains(ex, "on node node-a; holds single-gpu:gpu=") ||
		!strings.Contains(ex, "single-gpu/gpu: ") || !strings.Contains(ex, "/"+poolName+"/") {
		t.Errorf("explain pod/gpu-user:\n%s", ex)
	}
	var occ struct {
		Node               string
		Allocated, Devices int
		Strip              string
		Pods               []struct{ Name string }
		DeviceList         []struct{ Name string }
	}
	getJSON(t, srv, "/api/occupancy/node-a", &occ)
	if occ.Allocated < 1 || occ.Devices < 2 || !strings.Contains(occ.Strip, "a") || len(occ.DeviceList) != occ.Devices || len(occ.Pods) == 0 {
		t.Errorf("occupancy of node-a: %+v", occ)
	}

	// A claim the pool cannot satisfy: a change event, then reasons from explain.
	big := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: e.Namespace},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "draforge-basic-gpu",
				AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 3}}}}}}
	if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(t.Context(), big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"kind":"ResourceClaim","namespace":%q,"name":"too-big","op":"add"}`, e.Namespace)
	deadline := time.After(20 * time.Second)
	var lastID uint64
	for seen := false; !seen; {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("stream ended")
			}
			id, err := strconv.ParseUint(ev.id, 10, 64)
			if err != nil || id <= lastID {
				t.Errorf("event ids not increasing: %q after %d", ev.id, lastID)
			}
			lastID = id
			seen = ev.event == "change" && strings.Contains(ev.data, want)
		case <-deadline:
			t.Fatalf("no change event with %s", want)
		}
	}
	var ex struct {
		Claim       struct{ State string }
		Summary     string
		Explanation struct {
			Requests []struct {
				Matching, Available int
				Devices             []struct{ Reasons []struct{ Code string } }
			}
		}
	}
	getJSON(t, srv, "/api/explain/"+e.Namespace+"/too-big", &ex)
	reasons := 0
	for _, r := range ex.Explanation.Requests {
		for _, d := range r.Devices {
			reasons += len(d.Reasons)
		}
	}
	if ex.Claim.State != "Pending" || ex.Summary == "" || len(ex.Explanation.Requests) != 1 || ex.Explanation.Requests[0].Matching != 2 || reasons == 0 {
		t.Errorf("explain too-big: %+v", ex)
	}
	if code, body := srv.Get("/api/explain/" + e.Namespace + "/absent"); code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
		t.Errorf("explain of a missing claim: %d %s", code, body)
	}

	// Machine state, with the history from the controller.
	var mv struct {
		State, HistorySource string
		History              []struct{ From, To, Event string }
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		getJSON(t, srv, "/api/machines/claim/"+ns+"/single-gpu", &mv)
		return mv.State == "allocated" && mv.HistorySource == "controller" && len(mv.History) > 0, fmt.Sprintf("%+v", mv)
	})

	// Requests are answered from the caches: client-go's GET count does not move (a watch
	// re-established in the window would add one).
	gets := func() float64 { return srv.Metric(t, "rest_client_requests_total", `method="GET"`) }
	before := gets()
	paths := []string{"/api/summary", "/api/pools", "/api/devices", "/api/claims", "/api/graph", "/api/doctor",
		"/api/claims/" + ns + "/single-gpu", "/api/explain/" + ns + "/single-gpu", "/api/explain/" + e.Namespace + "/too-big", "/api/version",
		"/api/pods", "/api/occupancy", "/api/occupancy/node-a", "/api/explain/pod/" + ns + "/gpu-user"}
	for i := range 50 {
		if code, body := srv.Get(paths[i%len(paths)]); code != http.StatusOK {
			t.Fatalf("%s: %d %s", paths[i%len(paths)], code, body)
		}
	}
	if after := gets(); after-before > 2 {
		t.Errorf("50 API requests made %v GET calls to the API server", after-before)
	}
	if srv.Metric(t, "draforge_server_sse_clients") != 1 {
		t.Errorf("sse clients gauge: %v", srv.Metric(t, "draforge_server_sse_clients"))
	}

	t.Run("dashboard", func(t *testing.T) {
		if ok, why := browser.Available(); !ok {
			if os.Getenv(browser.SkipEnv) == "1" {
				t.Skip(why)
			}
			t.Fatal(why)
		}
		bctx, bcancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer bcancel()
		dom, err := browser.RenderedDOM(bctx, "http://"+srv.Addr+"/#claims",
			`document.body.dataset.loaded === "true" && document.getElementById("badge-ready").dataset.level`)
		if err != nil {
			t.Fatalf("%v\n%s", err, dom)
		}
		for _, s := range []string{">single-gpu<", ">too-big<", poolName, ns + "/basic-gpu",
			`id="badge-ready" class="badge badge-ok"`, "Readiness: ready"} {
			if !strings.Contains(dom, s) {
				t.Errorf("dashboard DOM lacks %q", s)
			}
		}
		if t.Failed() {
			t.Logf("DOM:\n%s", dom)
		}
	})

	// SIGTERM: open streams end and the process exits within --shutdown-timeout.
	start := time.Now()
	srv.Signal(syscall.SIGTERM)
	select {
	case <-srv.Exited:
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not exit within 5s of SIGTERM")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("shutdown took %s with --shutdown-timeout 2s", took)
	}
	if srv.ExitErr != nil {
		t.Errorf("serve exit: %v\n%s", srv.ExitErr, srv.Log())
	}
	for range events { // drains; closes when the stream ended
	}
}

// TestServeReadOnly: serve alone (no controller) answers machine states through the pure
// derive step over its caches — a pool with no status is pending, the conditions the
// controller would write make it synced, another generation makes it pending again — and
// makes no write: every request it sends is a GET (client-go's own count), and the pool never
// gets a finalizer or a status from it.
func TestServeReadOnly(t *testing.T) {
	e := newEnv(t)
	e.InstallCRDs(t)
	ctx := t.Context()
	srv := startServe(t, "--doctor-interval", "1h")
	api := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace)
	pool, err := api.Create(ctx, newPool(e.Namespace, "read-only", map[string]any{
		"deviceType": "gpu", "deviceCount": int64(1), "targetNodes": []any{"no-such-node"},
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/machines/pool/" + e.Namespace + "/read-only"
	stateIs := func(want string) {
		t.Helper()
		eventually(t, 20*time.Second, func() (bool, string) {
			code, body := srv.Get(path)
			var mv struct{ State, HistorySource string }
			_ = json.Unmarshal([]byte(body), &mv)
			return code == http.StatusOK && mv.State == want && mv.HistorySource == "none", fmt.Sprintf("%d %s", code, body)
		})
	}
	stateIs("pending")

	// The status the controller writes after publishing, for the current generation.
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": "Published", "message": "",
			"lastTransitionTime": now, "observedGeneration": pool.GetGeneration()}
	}
	pool.Object["status"] = map[string]any{"conditions": []any{cond("Ready"), cond("Synced")}}
	if pool, err = api.UpdateStatus(ctx, pool, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stateIs("synced")
	// A spec change: the conditions are for an older generation, the pool is pending again.
	if pool, err = api.Patch(ctx, "read-only", types.MergePatchType, []byte(`{"spec":{"deviceCount":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	stateIs("pending")
	for _, p := range []string{"/api/summary", "/api/pools", "/api/claims", "/api/graph", "/api/doctor", "/readyz"} {
		if code, body := srv.Get(p); code != http.StatusOK {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}

	time.Sleep(time.Second) // anything serve would do in reaction has had time to happen
	if w := srv.Writes(t); w != 0 {
		t.Errorf("serve made %v write requests", w)
	}
	if gets, all := srv.Metric(t, "rest_client_requests_total", `method="GET"`), srv.Metric(t, "rest_client_requests_total"); gets == 0 || gets != all {
		t.Errorf("serve sent %v requests, %v of them GET", all, gets)
	}
	got, err := api.Get(ctx, "read-only", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetResourceVersion() != pool.GetResourceVersion() || len(got.GetFinalizers()) != 0 {
		t.Errorf("the pool changed under serve: resourceVersion %s -> %s, finalizers %v",
			pool.GetResourceVersion(), got.GetResourceVersion(), got.GetFinalizers())
	}
}
