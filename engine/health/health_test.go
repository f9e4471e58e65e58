package health

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// secret is what a failing API call says; it must never reach a probe body.
const secret = "dial tcp 10.0.0.1:6443: token=s3cr3t kubeconfig=/home/u/.kube/config"

type fakeAPI struct {
	mu   sync.Mutex
	fail bool
	// calls counts namespace lists.
	calls int
}

func (f *fakeAPI) set(fail bool) { f.mu.Lock(); f.fail = fail; f.mu.Unlock() }

func newReadiness(t *testing.T, grace time.Duration) (*Readiness, *fakeAPI, *time.Time) {
	t.Helper()
	api := &fakeAPI{}
	kube := fake.NewClientset()
	kube.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		api.mu.Lock()
		defer api.mu.Unlock()
		api.calls++
		if api.fail {
			return true, nil, errors.New(secret)
		}
		return false, nil, nil
	})
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	r := &Readiness{Kube: kube, Timeout: time.Second, Grace: grace, Now: func() time.Time { return now }}
	return r, api, &now
}

type probe struct {
	code int
	body string
	res  Result
}

func get(t *testing.T, h http.Handler) probe {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/readyz", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	p := probe{code: w.Code, body: w.Body.String()}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p.res); err != nil {
		t.Fatalf("body is not JSON: %q: %v", p.body, err)
	}
	for _, leak := range []string{"s3cr3t", "10.0.0.1", "kubeconfig", "dial tcp"} {
		if strings.Contains(p.body, leak) {
			t.Errorf("body leaks %q: %s", leak, p.body)
		}
	}
	return p
}

func expect(t *testing.T, p probe, code int, status, reason string, ready, degraded bool) {
	t.Helper()
	if p.code != code || p.res.Status != status || p.res.Reason != reason || p.res.Ready != ready || p.res.Degraded != degraded {
		t.Errorf("got %d %s, want %d status=%s reason=%s ready=%v degraded=%v", p.code, p.body, code, status, reason, ready, degraded)
	}
}

func TestReadinessGrace(t *testing.T) {
	r, api, now := newReadiness(t, 15*time.Second)
	start := *now

	// No success yet: no grace, even though the grace period is long.
	api.set(true)
	p := get(t, r)
	expect(t, p, http.StatusServiceUnavailable, StatusNotReady, ReasonAPIUnavailable, false, false)
	if p.res.LastSuccess != nil {
		t.Errorf("lastSuccess before any success: %v", p.res.LastSuccess)
	}

	api.set(false)
	p = get(t, r)
	expect(t, p, http.StatusOK, StatusReady, ReasonOK, true, false)
	if p.res.LastSuccess == nil || !p.res.LastSuccess.Equal(start) || !p.res.CheckedAt.Equal(start) {
		t.Errorf("lastSuccess %v checkedAt %v, want %v", p.res.LastSuccess, p.res.CheckedAt, start)
	}

	// Failing within the grace period after a success: 200 degraded.
	api.set(true)
	for _, after := range []time.Duration{time.Second, 15 * time.Second} {
		*now = start.Add(after)
		p = get(t, r)
		expect(t, p, http.StatusOK, StatusDegraded, ReasonAPIUnavailable, true, true)
		if p.res.LastSuccess == nil || !p.res.LastSuccess.Equal(start) {
			t.Errorf("+%s: lastSuccess %v, want %v", after, p.res.LastSuccess, start)
		}
	}
	// Past the grace period: 503.
	*now = start.Add(15*time.Second + time.Nanosecond)
	expect(t, get(t, r), http.StatusServiceUnavailable, StatusNotReady, ReasonAPIUnavailable, false, false)

	// A new success restarts the grace period from then.
	api.set(false)
	*now = start.Add(time.Minute)
	expect(t, get(t, r), http.StatusOK, StatusReady, ReasonOK, true, false)
	api.set(true)
	*now = start.Add(time.Minute + 10*time.Second)
	expect(t, get(t, r), http.StatusOK, StatusDegraded, ReasonAPIUnavailable, true, true)
	if api.calls != 7 {
		t.Errorf("namespace lists = %d, want one per probe (7)", api.calls)
	}
}

func TestReadinessZeroGrace(t *testing.T) {
	r, api, now := newReadiness(t, 0)
	expect(t, get(t, r), http.StatusOK, StatusReady, ReasonOK, true, false)
	// Same instant as the success (a coarse or injected clock): still no grace at all.
	api.set(true)
	expect(t, get(t, r), http.StatusServiceUnavailable, StatusNotReady, ReasonAPIUnavailable, false, false)
	*now = now.Add(time.Millisecond)
	expect(t, get(t, r), http.StatusServiceUnavailable, StatusNotReady, ReasonAPIUnavailable, false, false)
}

func TestReadinessCachesNotSynced(t *testing.T) {
	r, _, _ := newReadiness(t, 15*time.Second)
	synced := false
	r.Synced = func() bool { return synced }
	expect(t, get(t, r), http.StatusServiceUnavailable, StatusNotReady, ReasonCachesNotSync, false, false)
	synced = true
	expect(t, get(t, r), http.StatusOK, StatusReady, ReasonOK, true, false)
}

func TestReadinessLastSuccessNeverGoesBack(t *testing.T) {
	r, _, now := newReadiness(t, 15*time.Second)
	later := *now
	r.Check(t.Context())
	// A slow check that started earlier finishing last must not move lastSuccess back.
	*now = later.Add(-5 * time.Second)
	res := r.Check(t.Context())
	if res.LastSuccess == nil || !res.LastSuccess.Equal(later) {
		t.Errorf("lastSuccess = %v, want %v", res.LastSuccess, later)
	}
}

func TestLiveness(t *testing.T) {
	failing := false
	l := Liveness{Watchdogs: map[string]func(*http.Request) error{"leader_election": func(*http.Request) error {
		if failing {
			return errors.New(secret)
		}
		return nil
	}}}
	w := httptest.NewRecorder()
	l.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"status":"ok"}` {
		t.Errorf("healthy: %d %s", w.Code, w.Body)
	}
	failing = true
	w = httptest.NewRecorder()
	l.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if w.Code != http.StatusInternalServerError || strings.TrimSpace(w.Body.String()) != `{"reason":"leader_election_failed","status":"unhealthy"}` {
		t.Errorf("watchdog failing: %d %s", w.Code, w.Body)
	}
}
