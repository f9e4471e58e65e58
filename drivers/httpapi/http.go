package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stable error codes of the {"error":{"code","message"}} envelope.
const (
	codeNotFound         = "not_found"
	codeMachineNotFound  = "machine_not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeOriginDenied     = "cors_origin_denied"
	codeNotReady         = "snapshot_not_ready"
	codeUnavailable      = "machines_unavailable"
	codeTooManyStreams   = "too_many_streams"
	codeShuttingDown     = "shutting_down"
	codeInternal         = "internal_error"
)

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e errorBody
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

func marshal(v any) ([]byte, error) { return json.Marshal(v) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal_error","message":"the response could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// securityHeaders are set on every response. The dashboard has no inline script or style, so
// the CSP needs no 'unsafe-inline'.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options":       "nosniff",
	"X-Frame-Options":              "DENY",
	"Referrer-Policy":              "no-referrer",
	"Permissions-Policy":           "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
	"Cross-Origin-Opener-Policy":   "same-origin",
	"Cross-Origin-Resource-Policy": "same-origin",
}

const allowedMethods = "GET, HEAD"

// statusWriter records the status and size of a response; it unwraps for ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// middleware: security headers, CORS, method check, metrics and the request log.
func (s *Server) middleware(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h := sw.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		h.Add("Vary", "Origin")
		route := ""
		origin := r.Header.Get("Origin")
		allowed := origin != "" && s.origins[origin]
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		switch {
		case r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "":
			route = "preflight"
			s.preflight(sw, r, allowed)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			route = "method_not_allowed"
			h.Set("Allow", allowedMethods)
			writeError(sw, http.StatusMethodNotAllowed, codeMethodNotAllowed, "this API is read-only: only GET and HEAD are allowed")
		default:
			mux.ServeHTTP(sw, r)
			route = r.Pattern
			if route == "" {
				route = "unmatched"
			}
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		took := time.Since(start)
		code := strconv.Itoa(sw.status)
		s.metrics.requests.WithLabelValues(route, methodLabel(r.Method), code).Inc()
		s.metrics.latency.WithLabelValues(route).Observe(took.Seconds())
		// The path only: query strings are never logged.
		s.o.Log.Info().Str("method", r.Method).Str("path", r.URL.Path).Str("route", route).
			Int("status", sw.status).Int("bytes", sw.bytes).Dur("duration", took).Msg("request")
	})
}

func (s *Server) preflight(w http.ResponseWriter, r *http.Request, allowed bool) {
	m := r.Header.Get("Access-Control-Request-Method")
	if !allowed {
		writeError(w, http.StatusForbidden, codeOriginDenied, "this origin is not allowed")
		return
	}
	if m != http.MethodGet && m != http.MethodHead {
		w.Header().Set("Allow", allowedMethods)
		writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, "this API is read-only: only GET and HEAD are allowed")
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", allowedMethods)
	h.Set("Access-Control-Allow-Headers", "Last-Event-ID, Accept")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// knownMethods are RFC 9110's methods and PATCH (RFC 5789), as net/http names them.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodConnect: true, http.MethodOptions: true, http.MethodTrace: true,
}

// methodLabel is the request metric's method label: a client may send any token as the method,
// and each distinct one would be a new series kept for the life of the process.
func methodLabel(m string) string {
	if knownMethods[m] {
		return m
	}
	return "other"
}

type serverMetrics struct {
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	sseClients   prometheus.Gauge
	sseCoalesced prometheus.Counter
	snapshots    prometheus.Counter
}

func newServerMetrics(r prometheus.Registerer) (*serverMetrics, error) {
	m := &serverMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "draforge_server_http_requests_total",
			Help: "HTTP requests by route pattern, method (other for a method HTTP does not define) and status code."}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "draforge_server_http_request_duration_seconds",
			Help: "HTTP request latency by route pattern (streams count until they end).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"route"}),
		sseClients: prometheus.NewGauge(prometheus.GaugeOpts{Name: "draforge_server_sse_clients",
			Help: "Open /api/stream connections."}),
		sseCoalesced: prometheus.NewCounter(prometheus.CounterOpts{Name: "draforge_server_sse_coalesced_total",
			Help: "Times a slow stream client's queued events were replaced by one snapshot event."}),
		snapshots: prometheus.NewCounter(prometheus.CounterOpts{Name: "draforge_server_snapshots_total",
			Help: "Snapshots published (rebuilt from the informer caches)."}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.sseClients, m.sseCoalesced, m.snapshots} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// etag answers 304 when the client already has this snapshot version; it sets ETag otherwise.
// Only for routes derived from the snapshot alone.
func etag(w http.ResponseWriter, r *http.Request, version uint64) bool {
	tag := `W/"` + strconv.FormatUint(version, 10) + `"`
	w.Header().Set("ETag", tag)
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}
