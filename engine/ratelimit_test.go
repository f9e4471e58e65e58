package engine

import (
	"testing"
	"time"

	"github.com/draforge/draforge/engine/machine"
)

func TestBackoffDelay(t *testing.T) {
	const base, limit = 100 * time.Millisecond, 30 * time.Second
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 12800 * time.Millisecond, 25600 * time.Millisecond, limit, limit}
	for n, w := range want {
		if got := backoffDelay(base, limit, n); got != w {
			t.Errorf("backoffDelay(n=%d) = %s, want %s", n, got, w)
		}
	}
	for _, n := range []int{62, 63, 64, 100, 1000, 1100, 1 << 20} {
		if got := backoffDelay(base, limit, n); got != limit {
			t.Errorf("backoffDelay(n=%d) = %s, want the cap %s", n, got, limit)
		}
	}
	// A cap above what base·2^n can reach in int64 nanoseconds must not overflow either.
	if got := backoffDelay(time.Second, time.Duration(1<<63-1), 1000); got != time.Duration(1<<63-1) {
		t.Errorf("huge cap: got %d", got)
	}
}

func TestBackoffLimiter(t *testing.T) {
	l := newBackoffLimiter[string](machine.Backoff{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond, MaxRetries: 3})
	want := []time.Duration{10, 20, 40, 80, 100, 100}
	for i, w := range want {
		if n := l.NumRequeues("a"); n != i {
			t.Fatalf("NumRequeues before When #%d = %d, want %d", i, n, i)
		}
		if got := l.When("a"); got != w*time.Millisecond {
			t.Errorf("When #%d = %s, want %s", i, got, w*time.Millisecond)
		}
	}
	if n := l.NumRequeues("b"); n != 0 {
		t.Errorf("another key shares the count: %d", n)
	}
	if got := l.When("b"); got != 10*time.Millisecond {
		t.Errorf("first delay of b = %s", got)
	}
	l.Forget("a")
	if n := l.NumRequeues("a"); n != 0 {
		t.Errorf("NumRequeues after Forget = %d", n)
	}
	if got := l.When("a"); got != 10*time.Millisecond {
		t.Errorf("first delay after Forget = %s, want the base", got)
	}
	if n := l.NumRequeues("b"); n != 1 {
		t.Errorf("Forget(a) touched b: %d", n)
	}
	for range 1000 {
		l.When("c")
	}
	if got := l.When("c"); got != 100*time.Millisecond {
		t.Errorf("after 1000 failures: %s, want the cap", got)
	}
}

func TestBackoffDelayNearMaxDuration(t *testing.T) {
	const maxD = time.Duration(1<<63 - 1)
	// base·2^n lands exactly on 2^63 ns, which float64(maxD) rounds to: converting that back
	// to a Duration must not wrap around to a negative delay.
	for n := 55; n <= 64; n++ {
		if got := backoffDelay(2, maxD, n); got <= 0 || got > maxD {
			t.Errorf("backoffDelay(2ns, max, %d) = %d", n, got)
		}
	}
}
