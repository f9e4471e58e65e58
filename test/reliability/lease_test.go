//go:build reliability

package reliability

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// The chart's leader election timings (deploy/helm/draforge/values.yaml leaderElection).
const (
	chartLeaseDuration = 15 * time.Second
	chartRenewDeadline = 10 * time.Second
	chartRetryPeriod   = 2 * time.Second
)

// chartCandidate runs a controller with --leader-elect at the chart's timings.
func chartCandidate(t *testing.T, kubeconfig, namespace, allocator, id string) *e2eutil.Controller {
	t.Helper()
	return e2eutil.StartController(t, kubeconfig, allocatorFlag, allocator, "--leader-elect",
		"--leader-election-lease-namespace", namespace, "--leader-election-identity", id,
		"--leader-election-lease-duration", chartLeaseDuration.String(), "--leader-election-renew-deadline", chartRenewDeadline.String(),
		"--leader-election-retry-period", chartRetryPeriod.String(), "--shutdown-timeout", "3s")
}

// apiWrite is one mutating request as the API server answered it: sent at start, answered at end.
type apiWrite struct {
	method, path string
	code         int
	start, end   time.Time
}

// recordingProxy sits between one controller and kube-apiserver and records every mutating
// request other than Lease and Event writes: the writes the API server saw from that process.
type recordingProxy struct {
	rp     *httputil.ReverseProxy
	mu     sync.Mutex
	writes []apiWrite
}

// upstreamProxy is a reverse proxy to kube-apiserver with the admin client certificate.
func upstreamProxy(t *testing.T, clusterDir, server string) *httputil.ReverseProxy {
	t.Helper()
	up, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(clusterDir, "admin.crt"), filepath.Join(clusterDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(clusterDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots}, ForceAttemptHTTP2: true}
	rp.FlushInterval = -1 // watches stream
	return rp
}

// serveLoopback serves h on a loopback port until the test ends and returns its URL.
func serveLoopback(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

func newRecordingProxy(t *testing.T, clusterDir, server string) (*recordingProxy, string) {
	p := &recordingProxy{rp: upstreamProxy(t, clusterDir, server)}
	return p, writeProxyKubeconfig(t, serveLoopback(t, p))
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		p.rp.ServeHTTP(w, r)
		return
	}
	if strings.Contains(r.URL.Path, "/leases") || strings.Contains(r.URL.Path, "/events") {
		p.rp.ServeHTTP(w, r)
		return
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	start := time.Now()
	p.rp.ServeHTTP(rec, r)
	p.mu.Lock()
	p.writes = append(p.writes, apiWrite{method: r.Method, path: r.URL.Path, code: rec.code, start: start, end: time.Now()})
	p.mu.Unlock()
}

// accepted returns the writes the API server accepted (2xx).
func (p *recordingProxy) accepted() []apiWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []apiWrite
	for _, w := range p.writes {
		if w.code >= 200 && w.code < 300 {
			out = append(out, w)
		}
	}
	return out
}

// TestLeaseTakenAway: two controllers at the chart's timings, each behind its own recording
// proxy, while claims keep arriving. Another holder is written into the Lease under the live
// leader. The leader must stop writing and exit, and its last accepted write must be answered
// before the replica's first write is sent: on the writes the API server saw, not on gauges.
// Afterwards every claim is allocated exactly once (and, with kube-scheduler allocating,
// handed over: the replica finishes what the old leader started).
func TestLeaseTakenAway(t *testing.T) { forEachAllocator(t, testLeaseTakenAway) }

func testLeaseTakenAway(t *testing.T, allocator string) {
	e := newEnv(t)
	class := "rel-lease-" + e.Namespace
	deviceClass(t, e, class, class)
	createPool(t, e, "gpus", pool(60, class, "node-a", "node-b"))

	proxies := map[string]*recordingProxy{}
	procs := map[string]*e2eutil.Controller{}
	for _, id := range []string{"a", "b"} {
		p, kc := newRecordingProxy(t, shared.Dir, shared.Server)
		proxies[id] = p
		procs[id] = chartCandidate(t, kc, e.Namespace, allocator, id)
	}
	var leader string
	eventually(t, 60*time.Second, func() (bool, string) {
		leader = holder(e)
		return leader == "a" || leader == "b", fmt.Sprintf("holder %q", leader)
	})
	standby := map[string]string{"a": "b", "b": "a"}[leader]
	eventually(t, 60*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "gpus", 60, "node-a", "node-b") })

	// Claims arrive every 250ms for the whole test: each one is a write for whoever leads.
	var created atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	var stopOnce sync.Once
	stopClaims := func() { stopOnce.Do(func() { close(stop) }); <-done }
	t.Cleanup(stopClaims) // also when the test stops early: no t.Errorf after it ended
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			createClaims(t, e, "c", class, i, i+1, 0)
			created.Add(1)
		}
	}()
	eventually(t, 30*time.Second, func() (bool, string) {
		n := len(allocations(t, e))
		return n >= 3, fmt.Sprintf("%d allocated before the takeover", n)
	})

	// Take the Lease away: another holder, freshly renewed, for the chart's lease duration.
	lease, err := e.Kube.CoordinationV1().Leases(e.Namespace).Get(bg(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("intruder"), LeaseDurationSeconds: ptr.To(int32(chartLeaseDuration / time.Second)),
		AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)}
	if _, err := e.Kube.CoordinationV1().Leases(e.Namespace).Update(bg(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	takenAt := time.Now()

	// The old leader exits once its renew deadline has passed (plus a retry and the drain).
	select {
	case <-procs[leader].Exited:
	case <-time.After(chartRenewDeadline + chartRetryPeriod + 5*time.Second):
		t.Fatalf("leader %s still running %s after its Lease was taken away", leader, time.Since(takenAt).Round(time.Millisecond))
	}
	exitedAfter := time.Since(takenAt)
	if procs[leader].ExitErr == nil {
		t.Errorf("leader %s exited with status 0 after losing its Lease, want a failure", leader)
	}
	if !strings.Contains(procs[leader].Log(), "leader lease lost") {
		t.Errorf("leader %s log does not say the lease was lost", leader)
	}
	// The replica takes over once the intruder's lease expires.
	eventually(t, chartLeaseDuration+3*chartRetryPeriod+5*time.Second, func() (bool, string) {
		h := holder(e)
		return h == standby, fmt.Sprintf("holder %q", h)
	})
	tookOver := time.Since(takenAt)
	time.Sleep(3 * time.Second) // a few claims for the new leader
	stopClaims()
	n := int(created.Load())
	var allocs map[string]string
	eventually(t, 60*time.Second, func() (bool, string) {
		allocs = allocations(t, e)
		return len(allocs) == n, fmt.Sprintf("%d of %d allocated", len(allocs), n)
	})
	if u := checkUnique(t, allocs); u != n {
		t.Errorf("%d claims hold %d distinct devices", n, u)
	}
	eventually(t, 60*time.Second, func() (bool, string) { return handedOver(t, e, allocator) })

	old, repl := proxies[leader].accepted(), proxies[standby].accepted()
	if len(old) == 0 || len(repl) == 0 {
		t.Fatalf("writes seen: old leader %d, replica %d; both must have written", len(old), len(repl))
	}
	var lastOld apiWrite
	for _, w := range old {
		if w.end.After(lastOld.end) {
			lastOld = w
		}
	}
	firstNew := repl[0]
	for _, w := range repl {
		if w.start.Before(firstNew.start) {
			firstNew = w
		}
	}
	t.Logf("FIGURE lease taken away (%s): old leader %s exited after %s, last write answered %s after the takeover (%s %s); replica %s held the Lease after %s, first write sent %s after the takeover (%s %s); %d claims",
		allocator, leader, exitedAfter.Round(time.Millisecond), lastOld.end.Sub(takenAt).Round(time.Millisecond), lastOld.method, lastOld.path,
		standby, tookOver.Round(time.Millisecond), firstNew.start.Sub(takenAt).Round(time.Millisecond), firstNew.method, firstNew.path, n)
	if !lastOld.end.Before(firstNew.start) {
		t.Errorf("split brain: the old leader's last write (%s %s) was answered at +%s, after the replica's first write (%s %s) was sent at +%s",
			lastOld.method, lastOld.path, lastOld.end.Sub(takenAt), firstNew.method, firstNew.path, firstNew.start.Sub(takenAt))
	}
}

// TestLeaderElectionOutage: two controllers with leader election at the chart's timings on a
// dedicated cluster whose kube-apiserver is stopped for 20s. The leader cannot renew, so it
// loses its lease after the renew deadline and exits; the replica keeps running and takes the
// Lease once the API server is back; allocations made before the outage are unchanged, new
// claims are allocated, no device is held twice.
func TestLeaderElectionOutage(t *testing.T) { forEachAllocator(t, testLeaderElectionOutage) }

func testLeaderElectionOutage(t *testing.T, allocator string) {
	c, e := dedicatedCluster(t)
	class := "rel-le-outage"
	deviceClass(t, e, class, class)
	createPool(t, e, "gpus", pool(6, class, "node-a", "node-b"))
	procs := map[string]*e2eutil.Controller{"a": chartCandidate(t, c.Kubeconfig, e.Namespace, allocator, "a"), "b": chartCandidate(t, c.Kubeconfig, e.Namespace, allocator, "b")}
	var leader string
	eventually(t, 60*time.Second, func() (bool, string) {
		leader = holder(e)
		return leader == "a" || leader == "b", fmt.Sprintf("holder %q", leader)
	})
	standby := map[string]string{"a": "b", "b": "a"}[leader]
	createClaims(t, e, "old", class, 0, 5, 0)
	var before map[string]string
	eventually(t, 60*time.Second, func() (bool, string) {
		before = allocations(t, e)
		return len(before) == 5, fmt.Sprintf("%d of 5 allocated", len(before))
	})

	// StopComponent waits for kube-apiserver's graceful shutdown (up to 10s): renewals fail
	// from the SIGTERM on, the 20s outage is counted from the process being gone.
	sigterm := time.Now()
	if err := c.StopComponent(cluster.APIServer); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	var exitedAt time.Duration
	for time.Since(down) < outageLength {
		if exitedAt == 0 && !procs[leader].Running() {
			exitedAt = time.Since(down)
		}
		if !procs[standby].Running() {
			t.Fatalf("replica %s exited during the outage: %v\n%s", standby, procs[standby].ExitErr, procs[standby].Log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if exitedAt == 0 {
		t.Fatalf("leader %s still running after a %s outage (renew deadline %s)", leader, outageLength, chartRenewDeadline)
	}
	if procs[leader].ExitErr == nil || !strings.Contains(procs[leader].Log(), "leader lease lost") {
		t.Errorf("leader %s exit %v; want a failure saying the lease was lost", leader, procs[leader].ExitErr)
	}
	if err := c.StartComponent(t.Context(), cluster.APIServer); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	eventually(t, chartLeaseDuration+3*chartRetryPeriod+5*time.Second, func() (bool, string) {
		h := holder(e)
		return h == standby, fmt.Sprintf("holder %q", h)
	})
	t.Logf("FIGURE leader election outage (%s): leader %s exited %s after kube-apiserver's SIGTERM (%s after it was gone, outage %s); replica %s held the Lease %s after kube-apiserver was back",
		allocator, leader, (down.Sub(sigterm) + exitedAt).Round(time.Millisecond), exitedAt.Round(time.Millisecond), outageLength, standby, time.Since(up).Round(time.Millisecond))

	createClaims(t, e, "new", class, 0, 5, 0)
	created := time.Now()
	var after map[string]string
	eventually(t, allocationBound(allocator), func() (bool, string) {
		after = allocations(t, e)
		return len(after) == 10, fmt.Sprintf("%d of 10 allocated; %d allocation pods", len(after), allocationPods(t, e))
	})
	t.Logf("FIGURE leader election outage (%s): the 5 new claims allocated %s after their creation (%s after kube-apiserver was back)",
		allocator, time.Since(created).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	sameAllocations(t, "leader election outage", before, after)
	if n := checkUnique(t, after); n != 10 {
		t.Errorf("10 claims hold %d distinct devices", n)
	}
	// The controller hands the claims over itself, not waiting for kube-controller-manager.
	eventually(t, handoffBound, func() (bool, string) { return handedOver(t, e, allocator) })
}
