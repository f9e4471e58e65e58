package engine

import (
	"math"
	"sync"
	"time"

	"github.com/draforge/draforge/engine/machine"
)

// backoffLimiter is a workqueue.TypedRateLimiter built from a machine's backoff table:
// per-key exponential delay base·2^n capped at cap. The retry limit itself is applied by the
// engine with NumRequeues, so the table is the only source of the policy.
type backoffLimiter[T comparable] struct {
	base, cap time.Duration
	mu        sync.Mutex
	failures  map[T]int
}

func newBackoffLimiter[T comparable](b machine.Backoff) *backoffLimiter[T] {
	return &backoffLimiter[T]{base: b.Base, cap: b.Cap, failures: map[T]int{}}
}

func (l *backoffLimiter[T]) When(item T) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.failures[item]
	l.failures[item] = n + 1
	return backoffDelay(l.base, l.cap, n)
}

func (l *backoffLimiter[T]) Forget(item T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, item)
}

func (l *backoffLimiter[T]) NumRequeues(item T) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[item]
}

// backoffDelay is base·2^n, capped, without overflowing for large n.
func backoffDelay(base, limit time.Duration, n int) time.Duration {
	d := float64(base) * math.Pow(2, float64(n))
	// >=: float64(limit) may round up past the largest Duration, and converting a float64
	// that does not fit in an int64 back to a Duration wraps to a negative delay.
	if d >= float64(limit) || math.IsInf(d, 0) || math.IsNaN(d) {
		return limit
	}
	return time.Duration(d)
}
