//go:build reliability

package reliability

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// fault is one injected API answer.
type fault struct {
	name       string // label in the figures
	code       int
	reason     metav1.StatusReason
	retryAfter bool // send Retry-After: 0
	forward    bool // forward upstream first and lose the answer (a write that timed out after it happened)
	hold       time.Duration
}

// faultCycle is applied, in turn, to every 5th mutating request.
var faultCycle = []fault{
	{name: "409", code: http.StatusConflict, reason: metav1.StatusReasonConflict},
	{name: "429+Retry-After:0", code: http.StatusTooManyRequests, reason: metav1.StatusReasonTooManyRequests, retryAfter: true},
	{name: "429", code: http.StatusTooManyRequests, reason: metav1.StatusReasonTooManyRequests},
	{name: "500", code: http.StatusInternalServerError, reason: metav1.StatusReasonInternalError},
	{name: "504-after-write", code: http.StatusGatewayTimeout, reason: metav1.StatusReasonTimeout, forward: true, hold: time.Second},
}

// faultProxy is a loopback reverse proxy in front of kube-apiserver: plain HTTP towards the
// controller, TLS with the cluster CA and the admin client certificate upstream. Reads and
// watches pass untouched; every 5th mutating request gets the next fault of faultCycle;
// mutating requests on the main resource of SimulatedDevicePool `forbidden` get 403.
type faultProxy struct {
	rp        *httputil.ReverseProxy
	forbidden string

	mu       sync.Mutex
	mutating int
	injected map[string]int
	log      []string
}

func newFaultProxy(t *testing.T, clusterDir, server, forbidden string) (*faultProxy, string) {
	t.Helper()
	rp := upstreamProxy(t, clusterDir, server)
	p := &faultProxy{rp: rp, forbidden: forbidden, injected: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p, "http://" + l.Addr().String()
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		p.rp.ServeHTTP(w, r)
		return
	}
	path := r.URL.Path
	// Events and leases are not the controller's reconciliation; leave them alone.
	if strings.Contains(path, "/events") || strings.Contains(path, "/leases") {
		p.rp.ServeHTTP(w, r)
		return
	}
	target := "/simulateddevicepools/" + p.forbidden
	if strings.HasSuffix(path, target) {
		p.count("403 " + r.Method + " " + path)
		writeStatus(w, fault{code: http.StatusForbidden, reason: metav1.StatusReasonForbidden})
		return
	}
	if strings.Contains(path, target+"/") { // its status: let the terminal condition through
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.mutating++
	n := p.mutating
	p.mu.Unlock()
	if n%5 != 0 {
		p.rp.ServeHTTP(w, r)
		return
	}
	f := faultCycle[(n/5-1)%len(faultCycle)]
	p.count(f.name + " " + r.Method + " " + path)
	if f.forward {
		p.rp.ServeHTTP(httptest.NewRecorder(), r)
	}
	time.Sleep(f.hold)
	writeStatus(w, f)
}

func (p *faultProxy) count(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name, _, _ := strings.Cut(what, " ")
	p.injected[name]++
	p.log = append(p.log, what)
}

func (p *faultProxy) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

func writeStatus(w http.ResponseWriter, f fault) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: int32(f.code), Reason: f.reason, Message: "injected by the reliability suite: " + string(f.reason)}
	w.Header().Set("Content-Type", "application/json")
	if f.retryAfter {
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(f.code)
	_ = json.NewEncoder(w).Encode(st)
}

// writeProxyKubeconfig writes a kubeconfig without credentials pointing at the proxy.
func writeProxyKubeconfig(t *testing.T, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFaultInjection runs the controller through a proxy that answers every 5th mutating
// request with 409, 429 (with and without Retry-After: 0), 500 or a 504 after forwarding the
// write, and 403 for every write to one pool. The controller converges pools and claims; the
// retry counters show each class the controller saw; the one forbidden pool is terminal
// (Ready=False TerminalError, a Warning event, terminal_errors_total{class=Forbidden} 1); no
// device is allocated twice. With kube-scheduler allocating, the faults also hit the
// allocation pods' creation and deletion and the claims' finalizer removal: every claim is
// still handed over once.
func TestFaultInjection(t *testing.T) { forEachAllocator(t, testFaultInjection) }

func testFaultInjection(t *testing.T, allocator string) {
	e := newEnv(t)
	class := "rel-faults-" + e.Namespace
	deviceClass(t, e, class, class)
	proxy, addr := newFaultProxy(t, shared.Dir, shared.Server, "forbidden")
	kc := writeProxyKubeconfig(t, addr)
	ctrl := e2eutil.StartController(t, kc, allocatorFlag, allocator)

	for i := range 3 {
		createPool(t, e, fmt.Sprintf("pool-%d", i), pool(8, class, "node-a", "node-b"))
	}
	createPool(t, e, "forbidden", pool(2, "other", "node-c"))
	createClaims(t, e, "c", class, 0, 30, 50*time.Millisecond)
	// Churn a pool so more writes go through the proxy.
	for _, n := range []int{10, 12, 9} {
		if err := patchCount(e, "pool-2", n); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	var allocs map[string]string
	eventually(t, 120*time.Second, func() (bool, string) {
		allocs = allocations(t, e)
		return len(allocs) == 30, fmt.Sprintf("%d of 30 allocated; injected %v", len(allocs), proxy.counts())
	})
	for i, n := range []int{8, 8, 9} {
		eventually(t, 60*time.Second, func() (bool, string) { return checkPoolSlices(t, e, fmt.Sprintf("pool-%d", i), n, "node-a", "node-b") })
	}
	if n := checkUnique(t, allocs); n != 30 {
		t.Errorf("30 claims hold %d distinct devices", n)
	}
	eventually(t, 60*time.Second, func() (bool, string) { return handedOver(t, e, allocator) })

	// The forbidden pool: terminal, visible, counted once.
	eventually(t, 60*time.Second, func() (bool, string) {
		u := getPool(t, e, "forbidden")
		c := e2eutil.Condition(u, "Ready")
		return c != nil && c["status"] == "False" && c["reason"] == "TerminalError" &&
			strings.Contains(fmt.Sprint(c["message"]), "Forbidden"), fmt.Sprintf("forbidden pool status %v", u.Object["status"])
	})
	if s := e.PoolSlices(t, e.Namespace, "forbidden"); len(s) != 0 {
		t.Errorf("the forbidden pool published %v", s)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		evs, err := e.Kube.CoreV1().Events(e.Namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=forbidden"})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning && ev.Reason == "TerminalError" && strings.Contains(ev.Message, "Forbidden") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, no Warning TerminalError", len(evs.Items))
	})
	time.Sleep(2 * time.Second) // let in-flight retries settle before reading counters

	injected := proxy.counts()
	retries := map[string]float64{}
	for _, c := range []string{"Conflict", "TooManyRequests", "InternalError", "Timeout", "AlreadyExists", "Unknown", "ServiceUnavailable"} {
		retries[c] = ctrl.Metric(t, "draforge_controller_reconcile_retries_total", `class="`+c+`"`)
	}
	terminal := ctrl.Metric(t, "draforge_controller_terminal_errors_total")
	forbidden := ctrl.Metric(t, "draforge_controller_terminal_errors_total", `pipeline="pool"`, `class="Forbidden"`)
	seen429 := ctrl.Metric(t, "rest_client_requests_total", `code="429"`)
	t.Logf("FIGURE faults (%s): injected %v", allocator, injected)
	t.Logf("FIGURE faults (%s): reconcile_retries_total by class %v; terminal_errors_total %v (pool/Forbidden %v); rest_client_requests_total{code=429} %v",
		allocator, retries, terminal, forbidden, seen429)

	for _, f := range faultCycle {
		if injected[f.name] == 0 {
			t.Errorf("fault %s never injected: the test proves nothing for it", f.name)
		}
	}
	// client-go retries a 429 carrying Retry-After itself (up to 10 times), so only the bare
	// 429s reach the controller's queue; both are counted by client-go per attempt.
	if want := float64(injected["429"] + injected["429+Retry-After:0"]); seen429 != want {
		t.Errorf("rest_client_requests_total{code=429} = %v, want every injected 429 (%v)", seen429, want)
	}
	for class, want := range map[string]int{"TooManyRequests": injected["429"], "InternalError": injected["500"], "Timeout": injected["504-after-write"]} {
		if retries[class] != float64(want) {
			t.Errorf("retries{class=%s} = %v, want %d (one per injected fault)", class, retries[class], want)
		}
	}
	// At least the injected 409s; at most two more, real ones (two writers of one object). A
	// controller racing kube-controller-manager's reservedFor write after each hand-off counted
	// 24 for 7 injected here (30 claims).
	if c, inj := retries["Conflict"], float64(injected["409"]); c < inj || c > inj+2 {
		t.Errorf("retries{class=Conflict} = %v, want the %v injected (at most 2 more)", c, inj)
	}
	if forbidden != 1 || terminal != 1 {
		t.Errorf("terminal errors: %v in total, %v pool/Forbidden; want exactly the forbidden pool's 1", terminal, forbidden)
	}
}
