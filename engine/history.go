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
	Actions []string  `json:"actions,omitempty"`
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

func (h *history) add(key string, r Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := append(h.byKey[key], r)
	if len(rs) > h.limit {
		rs = append([]Record(nil), rs[len(rs)-h.limit:]...)
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
