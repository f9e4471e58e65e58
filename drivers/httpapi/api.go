package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/draforge/draforge/drivers/doctor"
	"github.com/draforge/draforge/drivers/explain"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/engine"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	snap := func(fn func(http.ResponseWriter, *http.Request, *view)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			g := s.store.current()
			if g == nil {
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusServiceUnavailable, codeNotReady, "the informer caches have not produced a snapshot yet")
				return
			}
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("X-Snapshot-Version", itoa(g.version))
			fn(w, r, g.view())
		}
	}
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"version": s.o.Version, "reports": s.o.Reports != ""})
	})
	mux.HandleFunc("GET /api/summary", snap(func(w http.ResponseWriter, _ *http.Request, v *view) {
		writeJSON(w, http.StatusOK, s.summary(v))
	}))
	mux.HandleFunc("GET /api/pools", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		if !etag(w, r, v.version) {
			writeJSON(w, http.StatusOK, v.pools)
		}
	}))
	mux.HandleFunc("GET /api/devices", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		if !etag(w, r, v.version) {
			writeJSON(w, http.StatusOK, v.devices)
		}
	}))
	mux.HandleFunc("GET /api/claims", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		if !etag(w, r, v.version) {
			writeJSON(w, http.StatusOK, v.claims)
		}
	}))
	mux.HandleFunc("GET /api/claims/{namespace}/{name}", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		writeNamed(w, r, v, v.claims, func(c inventory.ClaimView) (string, string) { return c.Namespace, c.Name }, "no such ResourceClaim")
	}))
	mux.HandleFunc("GET /api/graph", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		if !etag(w, r, v.version) {
			writeJSON(w, http.StatusOK, v.graphOf())
		}
	}))
	// ?devices=false leaves out the per-device lists (the dashboard's summary: at 1,000 nodes the
	// full answer is a megabyte).
	mux.HandleFunc("GET /api/explain/{namespace}/{name}", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		devices, err := explainDevices(r.URL.RawQuery)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeBadRequest, err.Error())
			return
		}
		res, err := v.explain(r.Context(), r.PathValue("namespace"), r.PathValue("name"))
		switch {
		case explain.IsNotFound(err):
			writeError(w, http.StatusNotFound, codeNotFound, "no such ResourceClaim")
		case err != nil:
			s.o.Log.Error().Err(err).Str("route", "explain").Msg("explain failed")
			writeError(w, http.StatusInternalServerError, codeInternal, "the claim could not be explained")
		default:
			if !devices {
				res = res.WithoutDevices()
			}
			if !etag(w, r, v.version) {
				writeJSON(w, http.StatusOK, res)
			}
		}
	}))
	s.podRoutes(mux, snap)
	mux.HandleFunc("GET /api/doctor", snap(func(w http.ResponseWriter, _ *http.Request, v *view) {
		writeJSON(w, http.StatusOK, s.store.doctor(v))
	}))
	mux.HandleFunc("GET /api/machines/{machine}/{namespace}/{name}", s.machine)
	// Cluster-scoped machines (node) have no namespace segment.
	mux.HandleFunc("GET /api/machines/{machine}/{name}", s.machine)
	mux.HandleFunc("GET /api/stream", s.stream)
	mux.HandleFunc("GET /api/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, codeNotFound, "no such API route")
	})
	if s.o.Liveness != nil {
		mux.Handle("GET /healthz", s.o.Liveness)
	}
	if s.o.Readiness != nil {
		mux.Handle("GET /readyz", s.o.Readiness)
	}
	mux.Handle("GET /metrics", promHandler(s.o.Registry))
	s.reports(mux)
	mux.Handle("GET /", staticHandler())
	return s.middleware(mux)
}

// Summary is /api/summary.
type Summary struct {
	Version  uint64    `json:"version"`
	BuiltAt  time.Time `json:"builtAt"`
	Counts   Counts    `json:"counts"`
	Doctor   DoctorSum `json:"doctor"`
	Warnings []string  `json:"warnings,omitempty"`
	Streams  int       `json:"streams"`
	Server   string    `json:"serverVersion"`
}

// DoctorSum is the doctor part of the summary.
type DoctorSum struct {
	Summary map[doctor.Status]int `json:"summary"`
	// Failing and Warning list the IDs of checks with that status.
	Failing         []string   `json:"failing,omitempty"`
	Warning         []string   `json:"warning,omitempty"`
	FactsGatheredAt *time.Time `json:"factsGatheredAt,omitempty"`
}

func (s *Server) summary(v *view) Summary {
	if v == nil {
		return Summary{Server: s.o.Version, Streams: s.hub.clientCount()}
	}
	rep := s.store.doctor(v)
	d := DoctorSum{Summary: rep.Summary, FactsGatheredAt: rep.FactsGatheredAt}
	for _, r := range rep.Results {
		switch r.Status {
		case doctor.Fail:
			d.Failing = append(d.Failing, r.ID)
		case doctor.Warn:
			d.Warning = append(d.Warning, r.ID)
		}
	}
	return Summary{Version: v.version, BuiltAt: v.builtAt, Counts: v.counts, Doctor: d, Warnings: v.snap.Warnings,
		Streams: s.hub.clientCount(), Server: s.o.Version}
}

// MachineView is /api/machines/{machine}/{namespace}/{name} (/api/machines/{machine}/{name} for a
// cluster-scoped machine; Namespace is then empty).
type MachineView struct {
	Machine   string `json:"machine"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	State     string `json:"state"`
	// History is the controller's transition history; omitted when it is not available.
	History []engine.Record `json:"history,omitempty"`
	// HistorySource is "controller" when History came from the controller, "none" when serve
	// was started without --controller-url, "unavailable" when the controller did not answer.
	HistorySource string `json:"historySource"`
	HistoryNote   string `json:"historyNote,omitempty"`
}

// MachineSource derives a machine's state for an object (and its history when it can).
// Errors wrapping engine.ErrUnknownMachine or engine.ErrObjectNotFound become 404s.
type MachineSource interface {
	Machine(ctx context.Context, machine, namespace, name string) (*MachineView, error)
}

func (s *Server) machine(w http.ResponseWriter, r *http.Request) {
	if s.o.Machines == nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "machine states are not available in this server")
		return
	}
	mv, err := s.o.Machines.Machine(r.Context(), r.PathValue("machine"), r.PathValue("namespace"), r.PathValue("name"))
	switch {
	case errors.Is(err, engine.ErrUnknownMachine):
		writeError(w, http.StatusNotFound, codeMachineNotFound, "no such machine")
	case errors.Is(err, engine.ErrObjectNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, "no such object for this machine")
	case err != nil:
		s.o.Log.Error().Err(err).Str("route", "machines").Msg("machine state failed")
		writeError(w, http.StatusInternalServerError, codeInternal, "the machine state could not be derived")
	default:
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, mv)
	}
}

// writeNamed answers the item of list named by the request's namespace and name path values,
// or 404 with notFound.
func writeNamed[T any](w http.ResponseWriter, r *http.Request, v *view, list []T, key func(T) (string, string), notFound string) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	for _, item := range list {
		if n, m := key(item); n == ns && m == name {
			if !etag(w, r, v.version) {
				writeJSON(w, http.StatusOK, item)
			}
			return
		}
	}
	writeError(w, http.StatusNotFound, codeNotFound, notFound)
}
