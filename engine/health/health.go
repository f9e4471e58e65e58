// Package health is the engine's probe plugin: /healthz is process liveness (plus optional
// watchdogs such as the leader lease renewal), /readyz is a bounded read-only call to the API
// server with a grace period. Responses carry stable reason codes, never raw errors.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Stable reason codes of /readyz.
const (
	ReasonOK             = "ok"
	ReasonAPIUnavailable = "kubernetes_api_unavailable"
	ReasonCanceled       = "readiness_check_canceled"
	ReasonCachesNotSync  = "caches_not_synced"
)

// Status values of /readyz.
const (
	StatusReady    = "ready"
	StatusDegraded = "degraded"
	StatusNotReady = "not_ready"
)

// Result is the /readyz body.
type Result struct {
	Status      string     `json:"status"`
	Ready       bool       `json:"ready"`
	Degraded    bool       `json:"degraded"`
	Reason      string     `json:"reason"`
	CheckedAt   time.Time  `json:"checkedAt"`
	LastSuccess *time.Time `json:"lastSuccess,omitempty"`
}

// Readiness checks the API server with a bounded namespace list.
type Readiness struct {
	Kube    kubernetes.Interface
	Timeout time.Duration
	// Grace is how long after the last success a failing check still answers 200 degraded.
	// Before any success there is no grace: a pod is never Ready without having reached the API.
	Grace time.Duration
	// Synced, when set, must be true for readiness (informer caches filled).
	Synced func() bool
	Now    func() time.Time

	mu          sync.Mutex
	lastSuccess time.Time
}

// Check runs one readiness check.
func (r *Readiness) Check(ctx context.Context) Result {
	now := r.now()
	res := Result{CheckedAt: now.UTC()}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	_, err := r.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	r.mu.Lock()
	defer r.mu.Unlock()
	// Concurrent checks may finish out of order: lastSuccess only moves forward.
	if err == nil && now.After(r.lastSuccess) {
		r.lastSuccess = now
	}
	if !r.lastSuccess.IsZero() {
		ls := r.lastSuccess.UTC()
		res.LastSuccess = &ls
	}
	switch {
	case err == nil && r.Synced != nil && !r.Synced():
		res.Status, res.Reason = StatusNotReady, ReasonCachesNotSync
	case err == nil:
		res.Status, res.Ready, res.Reason = StatusReady, true, ReasonOK
	default:
		res.Reason = ReasonAPIUnavailable
		if errors.Is(err, context.Canceled) {
			res.Reason = ReasonCanceled
		}
		// Grace 0 means no grace at all, even when the clock has not moved since the last
		// success (coarse or injected clocks).
		if r.Grace > 0 && !r.lastSuccess.IsZero() && now.Sub(r.lastSuccess) <= r.Grace {
			res.Status, res.Ready, res.Degraded = StatusDegraded, true, true
		} else {
			res.Status = StatusNotReady
		}
	}
	return res
}

func (r *Readiness) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// ServeHTTP answers 200 when ready or degraded, 503 otherwise.
func (r *Readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	res := r.Check(req.Context())
	code := http.StatusOK
	if !res.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, res)
}

// Liveness answers /healthz: 200 unless a watchdog reports a problem (reason only, no error text).
type Liveness struct {
	// Watchdogs are named checks such as the leader election renewal adaptor.
	Watchdogs map[string]func(*http.Request) error
}

func (l Liveness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	for name, check := range l.Watchdogs {
		if check(req) != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"status": "unhealthy", "reason": name + "_failed"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is the runtime HTTP server plugin (probes and metrics) with graceful shutdown.
type Server struct {
	Addr            string
	Handler         http.Handler
	ShutdownTimeout time.Duration
}

// Start serves until ctx ends, then shuts down within ShutdownTimeout and force-closes the rest.
func (s *Server) Start(ctx context.Context) error {
	srv := &http.Server{Addr: s.Addr, Handler: s.Handler, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return srv.Close()
	}
	return nil
}
