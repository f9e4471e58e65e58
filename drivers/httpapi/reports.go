package httpapi

import (
	"net/http"
	"os"
	"path"
	"path/filepath"
)

// reports serves draforge replay's output directory (Options.Reports) under /reports/, and
// /reports/latest redirects to the newest run's report.html (or compare.html), the page the
// dashboard links.
func (s *Server) reports(mux *http.ServeMux) {
	dir := s.o.Reports
	if dir == "" {
		mux.HandleFunc("GET /reports/", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "no replay reports: draforge serve was started without --reports DIR", http.StatusNotFound)
		})
		return
	}
	mux.HandleFunc("GET /reports/latest", func(w http.ResponseWriter, r *http.Request) {
		page := latestReport(dir)
		if page == "" {
			http.Error(w, "no replay report in "+dir+" yet: run draforge replay TRACE --out "+dir+"/NAME", http.StatusNotFound)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		http.Redirect(w, r, path.Join("/reports", filepath.ToSlash(page)), http.StatusFound)
	})
	files := http.StripPrefix("/reports/", http.FileServer(http.Dir(dir)))
	mux.HandleFunc("GET /reports/", func(w http.ResponseWriter, r *http.Request) {
		// A report is one page with its style inline and no script (drivers/replay).
		w.Header().Set("Content-Security-Policy", reportCSP)
		files.ServeHTTP(w, r)
	})
}

// reportCSP lets a report's inline style apply; it still runs no script and loads nothing.
const reportCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// latestReport is the newest report.html or compare.html one level below dir, relative to it.
func latestReport(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var best string
	var newest int64
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		for _, name := range []string{"report.html", "compare.html"} {
			fi, err := os.Stat(filepath.Join(dir, e.Name(), name))
			if err == nil && fi.ModTime().UnixNano() > newest {
				best, newest = filepath.Join(e.Name(), name), fi.ModTime().UnixNano()
			}
		}
	}
	return best
}
