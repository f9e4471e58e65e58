//go:build reliability

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// Faults on reads and watches, applied in turn to every 2nd watch request and every 3rd list
// or get while the proxy is active.
const (
	faultWatchDrop  = "watch-dropped"     // the stream is cut 1s after it started
	faultWatchGone  = "watch-410-gone"    // one ERROR event with 410 Expired, as the watch cache sends it
	faultWatchReset = "watch-conn-reset"  // the TCP connection is reset before any answer
	faultReadHung   = "read-hung-3s"      // a list or get hangs for 3s, then is answered
	faultStatus504  = "claim-status-504"  // a claim status write lands, the client sees 504
	faultPodPost504 = "alloc-pod-504"     // an allocation pod's creation lands, the client sees 504
	statusFaultsMax = 4                   // ambiguous writes to inject
	claimStatusPath = "/resourceclaims/"  // ... followed by <name>/status
	resourceGroupV1 = "/resource.k8s.io/" // claim paths are under this group
)

// readFaultProxy injects faults on reads, watches and the allocator's writes: claim status
// writes (simulator) or allocation pod creations (kube-scheduler).
type readFaultProxy struct {
	rp http.Handler
	// ambiguous is the write answered 504 after it landed: faultStatus504 or faultPodPost504.
	ambiguous string

	mu       sync.Mutex
	active   bool
	watches  int
	reads    int
	injected map[string]int
	// landed is status.allocation (JSON) of every claim whose status write landed although
	// the client was told 504.
	landed map[string]string
	// created counts the pods created (201) through the proxy, by namespace/name.
	created map[string]int
}

func (p *readFaultProxy) next(kind string) (n int, active bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if kind == "watch" {
		p.watches++
		return p.watches, p.active
	}
	p.reads++
	return p.reads, p.active
}

func (p *readFaultProxy) count(name string) {
	p.mu.Lock()
	p.injected[name]++
	p.mu.Unlock()
}

func (p *readFaultProxy) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

func (p *readFaultProxy) setActive(on bool) {
	p.mu.Lock()
	p.active = on
	p.mu.Unlock()
}

func (p *readFaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	up := p.rp
	path := r.URL.Path
	if strings.Contains(path, "/leases") || strings.Contains(path, "/events") {
		up.ServeHTTP(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet:
		watch := r.URL.Query().Get("watch")
		if watch == "true" || watch == "1" {
			n, active := p.next("watch")
			if !active || n%2 != 0 {
				up.ServeHTTP(w, r)
				return
			}
			switch (n / 2) % 3 {
			case 0:
				p.count(faultWatchDrop)
				ctx, cancel := context.WithTimeout(r.Context(), time.Second)
				defer cancel()
				up.ServeHTTP(w, r.WithContext(ctx))
			case 1:
				p.count(faultWatchGone)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				ev := map[string]any{"type": "ERROR", "object": metav1.Status{
					TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: http.StatusGone,
					Reason: metav1.StatusReasonExpired, Message: "too old resource version (injected by the reliability suite)"}}
				_ = json.NewEncoder(w).Encode(ev)
			case 2:
				p.count(faultWatchReset)
				resetConn(w)
			}
			return
		}
		n, active := p.next("read")
		if active && n%3 == 0 {
			p.count(faultReadHung)
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		up.ServeHTTP(w, r)
		return
	case http.MethodPost:
		if strings.HasPrefix(path, "/api/v1/namespaces/") && strings.HasSuffix(path, "/pods") {
			p.createPod(w, r)
			return
		}
	case http.MethodPut, http.MethodPatch:
		if p.ambiguous == faultStatus504 && strings.Contains(path, resourceGroupV1) && strings.Contains(path, claimStatusPath) && strings.HasSuffix(path, "/status") {
			p.mu.Lock()
			inject := p.active && p.injected[faultStatus504] < statusFaultsMax
			if inject {
				p.injected[faultStatus504]++
			}
			p.mu.Unlock()
			if inject {
				// The client never sees this answer: ask for JSON to read what landed.
				r.Header.Set("Accept", "application/json")
				rec := httptest.NewRecorder()
				up.ServeHTTP(rec, r)
				var c resourcev1.ResourceClaim
				if rec.Code/100 == 2 && json.Unmarshal(rec.Body.Bytes(), &c) == nil && c.Status.Allocation != nil {
					b, _ := json.Marshal(c.Status.Allocation)
					p.mu.Lock()
					p.landed[c.Namespace+"/"+c.Name] = string(b)
					p.mu.Unlock()
				}
				time.Sleep(500 * time.Millisecond)
				writeStatus(w, fault{code: http.StatusGatewayTimeout, reason: metav1.StatusReasonTimeout})
				return
			}
		}
	}
	up.ServeHTTP(w, r)
}

// createPod forwards a pod creation and counts what was created; the first statusFaultsMax
// creations (when ambiguous is faultPodPost504) land and the client is told 504.
func (p *readFaultProxy) createPod(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	inject := p.ambiguous == faultPodPost504 && p.active && p.injected[faultPodPost504] < statusFaultsMax
	if inject {
		p.injected[faultPodPost504]++
	}
	p.mu.Unlock()
	// Read what was created as JSON (the client may ask for protobuf).
	r.Header.Set("Accept", "application/json")
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	var pod corev1.Pod
	if rec.Code == http.StatusCreated && json.Unmarshal(rec.Body.Bytes(), &pod) == nil {
		p.mu.Lock()
		p.created[pod.Namespace+"/"+pod.Name]++
		if inject {
			p.landed[pod.Namespace+"/"+pod.Name] = string(pod.UID)
		}
		p.mu.Unlock()
	}
	if inject {
		time.Sleep(500 * time.Millisecond)
		writeStatus(w, fault{code: http.StatusGatewayTimeout, reason: metav1.StatusReasonTimeout})
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// resetConn closes the client's connection with SO_LINGER 0: the client sees a TCP reset.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// TestReadAndWatchFaults runs the controller through a proxy that cuts every 2nd watch in
// turn by dropping the stream after 1s, answering 410 Gone in the stream (the informer must
// relist) or resetting the connection; hangs every 3rd list or get for 3s; and answers the
// allocator's first writes with 504 after they landed (the ambiguous write): the claim status
// writes of the simulator, the allocation pods' creations with kube-scheduler. While the faults
// go on, pools publish and every claim is allocated exactly once; a claim whose status write
// landed keeps the allocation that landed (the retry does not allocate it again), an
// allocation pod whose creation landed is the claim's only one (the retry finds it, it is never
// created twice); each ambiguous write counts one Timeout retry; no fault becomes a terminal
// error.
func TestReadAndWatchFaults(t *testing.T) { forEachAllocator(t, testReadAndWatchFaults) }

func testReadAndWatchFaults(t *testing.T, allocator string) {
	e := newEnv(t)
	class := "rel-readfaults-" + e.Namespace
	deviceClass(t, e, class, class)
	ambiguous := faultStatus504
	if allocator == "kube-scheduler" {
		ambiguous = faultPodPost504
	}
	proxy := &readFaultProxy{rp: upstreamProxy(t, shared.Dir, shared.Server), ambiguous: ambiguous, active: true,
		injected: map[string]int{}, landed: map[string]string{}, created: map[string]int{}}
	kc := writeProxyKubeconfig(t, serveLoopback(t, proxy))
	ctrl := e2eutil.StartController(t, kc, allocatorFlag, allocator)

	createPool(t, e, "gpus", pool(12, class, "node-a", "node-b"))
	createClaims(t, e, "c", class, 0, 10, 300*time.Millisecond)
	eventually(t, 60*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "gpus", 12, "node-a", "node-b") })
	// Keep watches restarting: a second pool and more claims later.
	time.Sleep(3 * time.Second)
	createPool(t, e, "more", pool(4, class, "node-c"))
	createClaims(t, e, "d", class, 0, 10, 300*time.Millisecond)
	var allocs map[string]string
	eventually(t, 90*time.Second, func() (bool, string) {
		allocs = allocations(t, e)
		return len(allocs) == 20, fmt.Sprintf("%d of 20 allocated; injected %v", len(allocs), proxy.counts())
	})
	eventually(t, 60*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "more", 4, "node-c") })
	// Handed over (kube-scheduler): the controller has retried every ambiguous creation by now.
	eventually(t, 60*time.Second, func() (bool, string) { return handedOver(t, e, allocator) })
	injected := proxy.counts()
	proxy.setActive(false)
	timeouts := ctrl.Metric(t, "draforge_controller_reconcile_retries_total", `class="Timeout"`)
	terminal := ctrl.Metric(t, "draforge_controller_terminal_errors_total")
	t.Logf("FIGURE read and watch faults (%s): injected %v; reconcile_retries_total{class=Timeout} %v; terminal errors %v", allocator, injected, timeouts, terminal)
	// Each ambiguous write is one Timeout retry; reads and watches are the informers'
	// business and never reach the machines' retry or terminal paths.
	if timeouts != float64(injected[ambiguous]) {
		t.Errorf("retries{class=Timeout} = %v, want one per ambiguous write %s (%d)", timeouts, ambiguous, injected[ambiguous])
	}
	if terminal != 0 {
		t.Errorf("terminal errors %v: every injected fault is transient", terminal)
	}

	for _, f := range []string{faultWatchDrop, faultWatchGone, faultWatchReset, faultReadHung, ambiguous} {
		if injected[f] == 0 {
			t.Errorf("fault %s never injected: the test proves nothing for it", f)
		}
	}
	if n := checkUnique(t, allocs); n != 20 {
		t.Errorf("20 claims hold %d distinct devices", n)
	}
	proxy.mu.Lock()
	landed, created := proxy.landed, proxy.created
	proxy.mu.Unlock()
	if len(landed) == 0 {
		t.Errorf("no ambiguous write %s landed", ambiguous)
	}
	for pod, n := range created {
		if n > 1 {
			t.Errorf("pod %s created %d times", pod, n)
		}
	}
	if allocator == "kube-scheduler" {
		if len(created) != 20 {
			t.Errorf("%d allocation pods created for 20 claims", len(created))
		}
		landed = nil // pods: their single creation is checked above
	}
	for key, a := range landed {
		ns, name, _ := strings.Cut(key, "/")
		if ns != e.Namespace {
			continue
		}
		if allocs[name] != a {
			t.Errorf("claim %s: the allocation that landed behind a 504 was replaced:\n landed %s\n now    %s", name, a, allocs[name])
		}
	}
	if !ctrl.Running() {
		t.Fatalf("controller exited: %v", ctrl.ExitErr)
	}
	// Steady after the faults stop: nothing changes.
	time.Sleep(2 * time.Second)
	sameAllocations(t, "after the faults", allocs, allocations(t, e))
}
