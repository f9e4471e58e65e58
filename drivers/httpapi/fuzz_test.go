package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/draforge/draforge/drivers/inventory/inventorytest"
)

// FuzzAPI sends arbitrary methods, paths and headers to the read-only API over a published
// snapshot. Invariants: no panic; only expected status codes; every response carries the
// security headers; nothing but GET/HEAD (and CORS preflight) reaches a handler; /api errors use
// the JSON envelope.
func FuzzAPI(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/api/summary", ""},
		{"GET", "/api/claims/demo/used", ""},
		{"GET", "/api/explain/demo/missing", ""},
		{"GET", "/api/machines/claim/demo/used", ""},
		{"HEAD", "/api/graph", ""},
		{"POST", "/api/pools", "https://evil.example"},
		{"OPTIONS", "/api/pools", "https://evil.example"},
		{"GET", "/api/stream", ""},
		{"GET", "/api/../../etc/passwd", ""},
		{"DELETE", "/", ""},
		{"GET", "/api/claims/%2e%2e/x", ""},
		{"GET", "/app.js?x=%zz", "null"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	srv, err := New(Options{Version: "fuzz", Machines: fakeMachines{},
		Readiness: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ready"}) }),
		Liveness:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) }),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	srv.Publish(inventorytest.Healthy, nil)
	h := srv.Handler()
	allowed := map[int]bool{200: true, 204: true, 301: true, 304: true, 307: true, 308: true, 400: true, 403: true, 404: true, 405: true, 429: true, 503: true}
	f.Fuzz(func(t *testing.T, method, path, origin string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") {
			return // net/http rejects these before any handler runs
		}
		req, err := http.NewRequest(method, "http://draforge.local"+path, nil)
		if err != nil {
			return
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		// Streams end when the request does.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		if !allowed[rec.Code] {
			t.Fatalf("%s %s: unexpected status %d: %s", method, path, rec.Code, rec.Body)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s %s: security headers missing", method, path)
		}
		if method != "GET" && method != "HEAD" && method != "OPTIONS" && rec.Code < 300 {
			t.Fatalf("%s %s answered %d: writes must be refused", method, path, rec.Code)
		}
		if rec.Code >= 400 && strings.HasPrefix(req.URL.Path, "/api/") && !strings.Contains(rec.Body.String(), `"error"`) {
			t.Fatalf("%s %s: %d without the error envelope: %s", method, path, rec.Code, rec.Body)
		}
	})
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, r := range m {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return false
		}
	}
	return true
}
