// Package httpapi is what `draforge serve` (assembled by drivers/serve) serves: a read-only HTTP
// API, a Server-Sent Events stream and the embedded dashboard over inventory Snapshots. The
// server never talks to the API server per request: snapshots are published to it (by Watcher,
// from informer caches) and everything a route returns is derived from the current snapshot.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/draforge/draforge/drivers/doctor"
	"github.com/draforge/draforge/drivers/inventory"
)

// Options configure a Server. Zero durations and sizes take the defaults in brackets.
type Options struct {
	// Addr is the listen address of Start.
	Addr    string
	Log     zerolog.Logger
	Version string
	// AllowedOrigins are the exact origins (scheme://host[:port]) allowed by CORS; empty allows
	// none. See ParseOrigins.
	AllowedOrigins []string
	// Readiness serves /readyz (engine/health.Readiness); Liveness serves /healthz.
	Readiness http.Handler
	Liveness  http.Handler
	// Reports is draforge replay's output directory, served under /reports/ ("": none).
	Reports string
	// Machines answers /api/machines; nil answers 503.
	Machines MachineSource
	// Registry receives the server's metrics and serves /metrics (nil: a new private registry).
	Registry *prometheus.Registry

	Heartbeat          time.Duration // SSE comment interval [15s]
	RetryHint          time.Duration // SSE retry: field [2s]
	RingSize           int           // change events kept for Last-Event-ID resume [256]
	ClientBuffer       int           // events queued per stream before it is coalesced [16]
	MaxStreams         int           // concurrent streams [512]
	StreamWriteTimeout time.Duration // per write of a stream [10s]
	ShutdownTimeout    time.Duration // graceful shutdown limit of Start [5s]
	// ReadTimeout and WriteTimeout bound ordinary requests [10s, 30s]; streams clear both.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// MaxChanges is the number of changes a change event lists before it only says truncated [100].
	MaxChanges int
	// ViewIdle is how long the current snapshot's typed objects and derived views are kept
	// after their last use before they are dropped, to be built again on demand [30s].
	ViewIdle time.Duration
	Now      func() time.Time
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Heartbeat, 15*time.Second)
	def(&o.RetryHint, 2*time.Second)
	def(&o.StreamWriteTimeout, 10*time.Second)
	def(&o.ShutdownTimeout, 5*time.Second)
	def(&o.ReadTimeout, 10*time.Second)
	def(&o.WriteTimeout, 30*time.Second)
	def(&o.ViewIdle, 30*time.Second)
	defInt(&o.RingSize, 256)
	defInt(&o.ClientBuffer, 16)
	defInt(&o.MaxStreams, 512)
	defInt(&o.MaxChanges, 100)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
}

// ParseOrigins validates a --cors-allowed-origins list: each entry must be an exact
// http(s)://host[:port] origin without path, query or wildcard.
func ParseOrigins(list []string) ([]string, error) {
	var out []string
	for _, o := range list {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(o, "*") {
			return nil, fmt.Errorf("invalid CORS origin %q: want scheme://host[:port] (no wildcard, path or query)", o)
		}
		out = append(out, u.Scheme+"://"+strings.ToLower(u.Host))
	}
	return out, nil
}

// Server is the HTTP server. Publish snapshots to it; serve Handler or run Start.
type Server struct {
	o       Options
	store   store
	hub     *hub
	metrics *serverMetrics
	origins map[string]bool
	handler http.Handler

	pubMu   sync.Mutex
	version uint64
}

// New builds a server.
func New(o Options) (*Server, error) {
	o.defaults()
	origins, err := ParseOrigins(o.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	m, err := newServerMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	s := &Server{o: o, metrics: m, origins: map[string]bool{}}
	for _, x := range origins {
		s.origins[x] = true
	}
	s.hub = newHub(o.RingSize, o.ClientBuffer, o.MaxStreams, func(n int) { m.sseClients.Set(float64(n)) })
	s.handler = s.routes()
	return s, nil
}

// Handler is the whole HTTP handler (middleware included).
func (s *Server) Handler() http.Handler { return s.handler }

// Publish makes the snapshot of source the current one and sends one change event listing
// changes (all of them, or truncated when there are more than MaxChanges or the caller could not
// say: nil). source is called now and again whenever the snapshot is needed after it was dropped
// (see ViewIdle); each call must return a sorted (inventory.Snapshot.Sort) snapshot of the same
// objects, not modified afterwards.
func (s *Server) Publish(source func() *inventory.Snapshot, changes []Change) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.version++
	g := newGeneration(s.version, s.o.Now(), source, s.o.ViewIdle)
	s.store.set(g)
	s.metrics.snapshots.Inc()
	truncated := changes == nil || len(changes) > s.o.MaxChanges
	if truncated {
		changes = nil
	}
	s.hub.publish(EventChange, func(id uint64) []byte {
		b, _ := marshal(changeData{Version: g.version, Changes: changes, Truncated: truncated, Counts: g.counts})
		return b
	})
}

type changeData struct {
	Version   uint64   `json:"version"`
	Changes   []Change `json:"changes"`
	Truncated bool     `json:"truncated,omitempty"`
	Counts    Counts   `json:"counts"`
}

// SetFacts replaces the doctor facts (gathered by the caller at most every so often).
func (s *Server) SetFacts(f doctor.Facts) { s.store.setFacts(f, s.o.Now()) }

// Ready reports whether a snapshot has been published (for readiness).
func (s *Server) Ready() bool { return s.store.current() != nil }

// Close ends every event stream (also done by Start on shutdown).
func (s *Server) Close() { s.hub.close() }

// Start serves on Addr until ctx ends (see Serve).
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.o.Addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then stops accepting connections, cancels every request
// context and event stream, waits up to ShutdownTimeout and force-closes what is left.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       s.o.ReadTimeout,
		WriteTimeout:      s.o.WriteTimeout, // both cleared by the stream handler
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	srv.RegisterOnShutdown(func() { s.hub.close(); cancelBase() })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.hub.close()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.o.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.o.Log.Warn().Msg("graceful shutdown timed out; closing remaining connections")
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
