package controller

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/draforge/draforge/engine/health"
	"github.com/draforge/draforge/engine/metrics"
)

// TestRuntimeAndDebugHandlers: the runtime surface (every interface: probes and scraping)
// serves no /debug path, the debug surface serves the machine history, the probes, and pprof
// only with --profiling.
func TestRuntimeAndDebugHandlers(t *testing.T) {
	states := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("history of " + r.PathValue("machine") + " " + r.PathValue("name")))
	})
	m := metrics.New()
	ready := &health.Readiness{}
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	runtime := runtimeHandler(health.Liveness{}, ready, m)
	for _, p := range []string{"/debug/machines/claim/ns/c", "/debug/machines/node/n", "/debug/pprof/"} {
		if code, _ := get(runtime, p); code != http.StatusNotFound {
			t.Errorf("runtime address serves %s: %d", p, code)
		}
	}
	for _, h := range []http.Handler{runtime, debugHandler(health.Liveness{}, ready, m, states, false)} {
		if code, _ := get(h, "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz: %d", code)
		}
		if code, body := get(h, "/metrics"); code != http.StatusOK || !strings.Contains(body, "draforge_controller_") {
			t.Errorf("/metrics: %d", code)
		}
	}
	dbg := debugHandler(health.Liveness{}, ready, m, states, false)
	if code, body := get(dbg, "/debug/machines/claim/ns/c"); code != http.StatusOK || body != "history of claim c" {
		t.Errorf("debug /debug/machines/claim/ns/c: %d %q", code, body)
	}
	if code, body := get(dbg, "/debug/machines/node/n"); code != http.StatusOK || body != "history of node n" {
		t.Errorf("debug /debug/machines/node/n: %d %q", code, body)
	}
	if code, _ := get(dbg, "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("pprof without --profiling: %d", code)
	}
	if code, _ := get(debugHandler(health.Liveness{}, ready, m, states, true), "/debug/pprof/"); code != http.StatusOK {
		t.Errorf("pprof with --profiling: %d", code)
	}
}
