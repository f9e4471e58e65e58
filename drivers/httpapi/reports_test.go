package httpapi

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReportsLatest(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string, age time.Duration) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write("small-1/report.html", "old run", time.Hour)
	write("small-2/report.html", "new run", time.Minute)
	write("compare-x/compare.html", "older comparison", 2*time.Hour)
	_, ts := newTestServer(t, Options{Reports: dir})
	get := func(path string) (int, string) {
		t.Helper()
		r, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, body := get("/reports/latest"); code != 200 || body != "new run" {
		t.Errorf("/reports/latest: %d %q, want the newest run's report", code, body)
	}
	if code, body := get("/reports/compare-x/compare.html"); code != 200 || body != "older comparison" {
		t.Errorf("a report by path: %d %q", code, body)
	}
	r, err := http.Get(ts.URL + "/reports/small-2/report.html")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "style-src 'unsafe-inline'") || strings.Contains(csp, "script-src") {
		t.Errorf("a report's CSP %q: its inline style applies, no script runs", csp)
	}
	if code, body := get("/api/version"); code != 200 || !strings.Contains(strings.Join(strings.Fields(body), ""), `"reports":true`) {
		t.Errorf("/api/version: %d %s", code, body)
	}
	_, none := newTestServer(t, Options{})
	r, err = http.Get(none.URL + "/reports/latest")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 404 || !strings.Contains(string(b), "--reports") {
		t.Errorf("without --reports: %d %q", r.StatusCode, b)
	}
}
