package engine

import (
	"fmt"
	"testing"
)

// TestHistoryKeepsTheLastLimitRecordsInLimitCapacity: the oldest records go first, order is
// kept, a key never holds more than limit records of capacity, and adding to a full history
// allocates nothing.
func TestHistoryKeepsTheLastLimitRecordsInLimitCapacity(t *testing.T) {
	for _, limit := range []int{1, 3, 20} {
		h := newHistory(limit)
		for i := range 1000 {
			h.add("k", Record{Event: fmt.Sprint(i)})
			rs := h.byKey["k"]
			if want := min(i+1, limit); len(rs) != want || cap(rs) > limit {
				t.Fatalf("limit %d after %d adds: len %d cap %d, want len %d cap <= %d", limit, i+1, len(rs), cap(rs), want, limit)
			}
		}
		got := h.get("k")
		for j, r := range got {
			if want := fmt.Sprint(1000 - limit + j); r.Event != want {
				t.Fatalf("limit %d: record %d is %q, want %q (the last %d in order)", limit, j, r.Event, want, limit)
			}
		}
		r := Record{Event: "steady"}
		if n := testing.AllocsPerRun(100, func() { h.add("k", r) }); n != 0 {
			t.Errorf("limit %d: a full history allocates %v times per add", limit, n)
		}
	}
	h := newHistory(0)
	h.add("k", Record{Event: "x"})
	if got := h.get("k"); len(got) != 0 {
		t.Errorf("limit 0 kept %v", got)
	}
}
