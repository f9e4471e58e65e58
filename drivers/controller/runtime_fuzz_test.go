package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/draforge/draforge/engine/health"
	"github.com/draforge/draforge/engine/metrics"
)

// secret is what a failing API call's error carries; no response may ever contain it.
const secret = "https://10.1.2.3:6443 token=SEKRET dial tcp: connection refused"

// FuzzRuntimeHandlers sends arbitrary methods, paths, headers and bodies to the controller's
// runtime server (/healthz, /readyz, /metrics) while the API server alternately answers and
// fails. (serve's API has its own: drivers/httpapi's FuzzAPI.)
// Invariants: no panic; only the expected status codes; probe answers are JSON with a stable
// reason; no body ever contains error text, the server URL or a token.
func FuzzRuntimeHandlers(f *testing.F) {
	for _, s := range []struct {
		method, path, hk, hv string
		body                 []byte
		fail                 bool
	}{
		{"GET", "/healthz", "", "", nil, false},
		{"GET", "/readyz", "", "", nil, false},
		{"GET", "/readyz", "", "", nil, true},
		{"GET", "/metrics", "Accept", "application/openmetrics-text; version=1.0.0", nil, false},
		{"GET", "/metrics", "Accept-Encoding", "gzip", nil, false},
		{"POST", "/readyz", "Content-Type", "application/json", []byte(`{"x":1}`), true},
		{"DELETE", "/healthz/../readyz", "", "", nil, false},
		{"PROPFIND", "//metrics?x=%zz", "X-Forwarded-For", "1.2.3.4", nil, false},
		{"GET", "/readyz?timeout=1h", "Connection", "close", nil, true},
		{"HEAD", "/", "", "", nil, false},
	} {
		f.Add(s.method, s.path, s.hk, s.hv, s.body, s.fail)
	}
	kube := fake.NewClientset()
	var fail atomic.Bool
	kube.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail.Load() {
			return true, nil, errors.New(secret)
		}
		return false, nil, nil
	})
	now := time.Unix(1_700_000_000, 0)
	ready := &health.Readiness{Kube: kube, Timeout: time.Second, Grace: 5 * time.Second, Synced: func() bool { return true },
		Now: func() time.Time { now = now.Add(time.Second); return now }}
	live := health.Liveness{Watchdogs: map[string]func(*http.Request) error{
		"leader_election": func(r *http.Request) error {
			if r.Header.Get("X-Fail-Watchdog") != "" {
				return errors.New(secret)
			}
			return nil
		},
	}}
	h := runtimeHandler(live, ready, metrics.New())
	allowed := map[int]bool{200: true, 301: true, 307: true, 308: true, 400: true, 404: true, 405: true, 406: true, 500: true, 503: true}
	f.Fuzz(func(t *testing.T, method, path, hk, hv string, body []byte, failAPI bool) {
		req, err := http.NewRequest(method, "http://runtime"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a server could receive
		}
		if hk != "" {
			req.Header.Set(hk, hv)
		}
		fail.Store(failAPI)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out := rec.Body.String()
		if !allowed[rec.Code] {
			t.Fatalf("%s %q: status %d", method, path, rec.Code)
		}
		for _, leak := range []string{"SEKRET", "10.1.2.3", "connection refused", "dial tcp"} {
			if strings.Contains(out, leak) {
				t.Fatalf("%s %q: body leaks %q: %s", method, path, leak, out)
			}
		}
		if req.URL.Path == "/readyz" || req.URL.Path == "/healthz" {
			if ct := rec.Header().Get("Content-Type"); rec.Code != 405 && ct != "application/json" {
				t.Fatalf("%s %s: Content-Type %q", method, req.URL.Path, ct)
			}
			var res struct{ Status, Reason string }
			if rec.Code != 405 && json.Unmarshal(rec.Body.Bytes(), &res) != nil {
				t.Fatalf("%s %s: not JSON: %s", method, req.URL.Path, out)
			}
			if req.URL.Path == "/readyz" && rec.Code != 405 {
				switch res.Reason {
				case health.ReasonOK, health.ReasonAPIUnavailable, health.ReasonCanceled, health.ReasonCachesNotSync:
				default:
					t.Fatalf("/readyz reason %q not a stable code: %s", res.Reason, out)
				}
			}
		}
	})
}
