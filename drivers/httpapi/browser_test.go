package httpapi

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/draforge/draforge/drivers/inventory/inventorytest"
	"github.com/draforge/draforge/test/browser"
)

// requireBrowser fails (or skips with DRAFORGE_SKIP_BROWSER=1) when Chromium is missing.
func requireBrowser(t *testing.T) {
	t.Helper()
	if ok, why := browser.Available(); !ok {
		if os.Getenv(browser.SkipEnv) == "1" {
			t.Skip(why)
		}
		t.Fatal(why)
	}
}

// dashboardLoaded is true once every view rendered and the readiness badge has a verdict.
const dashboardLoaded = `document.body.dataset.loaded === "true" && document.getElementById("badge-ready").dataset.level && document.getElementById("badge-stream").dataset.level === "ok"`

// TestDashboardRenders loads the embedded dashboard in headless Chromium over a hand-built
// snapshot: pool, device and claim names, the explain reasons of the pending claim, and badges
// that follow /readyz (here: not ready) and the doctor, not hard-coded green.
func TestDashboardRenders(t *testing.T) {
	requireBrowser(t)
	s, ts := newTestServer(t, Options{Readiness: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "ready": false, "reason": "kubernetes_api_unavailable"})
	})})
	s.Publish(inventorytest.Healthy, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := browser.RenderedDOM(ctx, ts.URL+"/", dashboardLoaded+` && document.getElementById("explain-summary")`)
	if err != nil {
		t.Fatalf("%v\nDOM:\n%s", err, dom)
	}
	for _, want := range []string{
		"demo/gpus",     // SimulatedDevicePool of the pool
		">gpu-0<",       // a device
		">used<",        // claims
		">waiting<",     //
		`<svg viewBox=`, // the graph
		`id="badge-ready" class="badge badge-bad"`,
		"Readiness: not_ready (kubernetes_api_unavailable)",
		`id="badge-stream" class="badge badge-ok"`,
		`id="explain-summary"`, // the pending claim was explained
		`<option value="demo/waiting">`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, `id="error" class="error" role="alert">`) && !strings.Contains(dom, `role="alert" hidden`) {
		t.Errorf("the dashboard shows an error:\n%s", dom)
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}
