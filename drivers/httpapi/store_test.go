package httpapi

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/inventory/inventorytest"
)

// TestViewDroppedWhenIdle: a published snapshot is built for its counts and not kept; a request
// builds it and it is kept while it is used; after ViewIdle unused it is dropped and built again
// for the next request, with the same answer. A newer snapshot drops the previous one's view at once.
func TestViewDroppedWhenIdle(t *testing.T) {
	const idle = 100 * time.Millisecond
	s, ts := newTestServer(t, Options{ViewIdle: idle})
	var builds atomic.Int32
	s.Publish(func() *inventory.Snapshot { builds.Add(1); return inventorytest.Healthy() }, nil)
	g := s.store.current()
	if n := builds.Load(); n != 1 || held(g) {
		t.Fatalf("%d builds after publishing, view held %v; want 1, not held", n, held(g))
	}
	_, first := do(t, "GET", ts.URL+"/api/claims", nil)
	if n := builds.Load(); n != 2 || !held(g) {
		t.Fatalf("%d builds after one request, view held %v; want 2, held", n, held(g))
	}
	deadline := time.Now().Add(5 * time.Second)
	for held(g) {
		if time.Now().After(deadline) {
			t.Fatalf("the view is still held %v after its last use", 5*time.Second)
		}
		time.Sleep(idle / 4)
	}
	if _, again := do(t, "GET", ts.URL+"/api/claims", nil); !bytes.Equal(again, first) {
		t.Errorf("rebuilt view answered\n%s\nwant\n%s", again, first)
	}
	if n := builds.Load(); n != 3 {
		t.Errorf("%d builds, want 3 (the view built again after it was dropped)", n)
	}
	if !held(g) {
		t.Fatal("the rebuilt view is not held")
	}
	s.Publish(inventorytest.Healthy, nil)
	if held(g) {
		t.Error("a replaced snapshot's view is still held")
	}
}

func held(g *generation) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.v != nil
}
