package engine

import (
	"context"
	"errors"
	"testing"
)

func TestPassValue(t *testing.T) {
	calls := 0
	compute := func() (int, error) {
		calls++
		return calls, nil
	}
	type k1 struct{}
	type k2 struct{}
	ctx := withPass(context.Background(), nil)
	for range 3 {
		if v, err := PassValue(ctx, k1{}, compute); v != 1 || err != nil {
			t.Fatalf("within a pass: %d, %v; want the first value", v, err)
		}
	}
	if v, _ := PassValue(ctx, k2{}, compute); v != 2 {
		t.Fatalf("another key: %d, want a value of its own", v)
	}
	if v, _ := PassValue(withPass(context.Background(), nil), k1{}, compute); v != 3 {
		t.Fatalf("a new pass: %d, want a new value", v)
	}
	if v, _ := PassValue(context.Background(), k1{}, compute); v != 4 {
		t.Fatalf("outside a pass: %d, want a new value", v)
	}
	// compute may use other pass values.
	ctx = withPass(context.Background(), nil)
	outer, _ := PassValue(ctx, k2{}, func() (int, error) {
		inner, err := PassValue(ctx, k1{}, compute)
		return inner * 10, err
	})
	if again, _ := PassValue(ctx, k1{}, compute); outer != 50 || again != 5 {
		t.Fatalf("nested: outer %d, inner again %d; want 50 and 5", outer, again)
	}
	boom := errors.New("boom")
	failing := func() (int, error) { calls++; return 0, boom }
	ctx = withPass(context.Background(), nil)
	_, err1 := PassValue(ctx, k1{}, failing)
	_, err2 := PassValue(ctx, k1{}, failing)
	if !errors.Is(err1, boom) || !errors.Is(err2, boom) || calls != 6 {
		t.Fatalf("errors are kept for the pass too: %v, %v after %d calls", err1, err2, calls)
	}
}
