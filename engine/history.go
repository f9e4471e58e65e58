package engine

import (
	"sync"
	"time"
)

// Record is one entry of an object's transition history.
type Record struct {
	Time    time.Time `json:"time"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Event   string    `json:"event"`
	Actions []string  `json:"actions,omitempty"` // shared by the records of one transition: read-only
	// Outcome is "ok", "pending", "retry" or "terminal".
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// ErrorClass is set for retry and terminal outcomes.
	ErrorClass string `json:"errorClass,omitempty"`
}

// history keeps the last limit records per object key; keys of deleted objects are dropped.
type history struct {
	mu    sync.Mutex
	limit int
	byKey map[string][]Record
}

func newHistory(limit int) *history { return &history{limit: limit, byKey: map[string][]Record{}} }

// add appends r to key's records. A key's records never hold more than limit in capacity: at
// 10,000 simulated nodes renewing a Lease every 10 s, append's doubling (and a fresh copy on
// each trim) kept up to twice the limit per node, a third of the controller's heap.
func (h *history) add(key string, r Record) {
	if h.limit <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.byKey[key]
	switch {
	case len(rs) == h.limit:
		copy(rs, rs[1:]) // the oldest goes
		rs[len(rs)-1] = r
	case len(rs) == cap(rs):
		grown := make([]Record, len(rs), min(max(2*cap(rs), 4), h.limit))
		copy(grown, rs)
		rs = append(grown, r)
	default:
		rs = append(rs, r)
	}
	h.byKey[key] = rs
}

func (h *history) get(key string) []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Record(nil), h.byKey[key]...)
}

func (h *history) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byKey, key)
}
