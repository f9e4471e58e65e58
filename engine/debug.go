package engine

import (
	"encoding/json"
	"errors"
	"net/http"

	"k8s.io/client-go/tools/cache"
)

// MachineStatus is the read-only view of one object of a machine: its derived state and the
// transition history this process recorded (empty on a standby replica, whose machines do not
// run).
type MachineStatus struct {
	Machine   string   `json:"machine"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name"`
	State     string   `json:"state"`
	History   []Record `json:"history"`
}

// DebugHandler serves GET {prefix}/{machine}/{namespace}/{name} (mount it on a pattern with
// those three wildcards) as MachineStatus JSON. Errors are {"error":{"code","message"}} with
// stable codes (machine_not_found, not_found, state_unavailable) and no raw error text.
func (e *Engine) DebugHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ns, name := r.PathValue("machine"), r.PathValue("namespace"), r.PathValue("name")
		key := cache.ObjectName{Namespace: ns, Name: name}.String()
		state, err := e.State(r.Context(), m, key)
		switch {
		case errors.Is(err, ErrUnknownMachine):
			debugError(w, http.StatusNotFound, "machine_not_found", "no such machine")
			return
		case errors.Is(err, ErrObjectNotFound):
			debugError(w, http.StatusNotFound, "not_found", "no such object in the machine's cache")
			return
		case err != nil:
			debugError(w, http.StatusInternalServerError, "state_unavailable", "the state could not be derived")
			return
		}
		hist := e.History(m, key)
		if hist == nil {
			hist = []Record{}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_ = json.NewEncoder(w).Encode(MachineStatus{Machine: m, Namespace: ns, Name: name, State: state, History: hist})
	})
}

func debugError(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": reason, "message": msg}})
}
