package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/machines"
	"github.com/draforge/draforge/test/bench"
)

// viewIdle replaces the server's ViewIdle [30s] in the measurement, so it need not wait that long.
const viewIdle = 100 * time.Millisecond

// serveMemory builds serve's caches as `draforge serve` does (informers with the drivers' typed
// forms, the machines' reader and their informers, the watcher and the server) over n decoded
// objects of kind, and returns the live heap bytes per object that serve retains in steady state:
// after its snapshot has been published and served (requests that need every typed object and
// derived view) and then left unused for the server's ViewIdle, which drops the typed view until
// the next request builds it again.
func serveMemory(kind string, n int) (float64, error) {
	client, kube, err := bench.MemoryClients(kind, n)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := bench.LiveHeap()
	informers := engine.NewInformers(client)
	clusterview.ListTyped(informers, kube)
	clusterview.Forms(informers)
	names, err := drivers.Names()
	if err != nil {
		return 0, err
	}
	ms, err := machines.Load(names)
	if err != nil {
		return 0, err
	}
	states, err := engine.NewReader(informers, ms)
	if err != nil {
		return 0, err
	}
	srv, err := New(Options{Addr: "127.0.0.1:0", Log: zerolog.Nop(), Registry: prometheus.NewRegistry(),
		Machines: &EngineMachines{Engine: states}, ViewIdle: viewIdle})
	if err != nil {
		return 0, err
	}
	watcher := &Watcher{Informers: informers, Server: srv}
	if err := watcher.Register(); err != nil {
		return 0, err
	}
	if err := informers.Start(ctx); err != nil {
		return 0, err
	}
	go func() { _ = watcher.Start(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !srv.Ready() {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no snapshot within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, path := range []string{"/api/summary", "/api/devices", "/api/claims", "/api/pods", "/api/graph", "/api/doctor"} {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	for held(srv.store.current()) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the snapshot view is still held %v after its last use", viewIdle)
		}
		time.Sleep(viewIdle / 2)
	}
	time.Sleep(500 * time.Millisecond)
	after := bench.LiveHeap()
	runtime.KeepAlive(srv)
	runtime.KeepAlive(informers)
	runtime.KeepAlive(client)
	runtime.KeepAlive(kube)
	return float64(after-before) / float64(n), nil
}

// BenchmarkServeMemory reports serve's cache bytes per object of each kind (benchreport's
// memory phase turns the KiB/obj metric into rows with the 6 KiB target).
func BenchmarkServeMemory(b *testing.B) {
	for _, kind := range bench.MemoryKinds {
		b.Run(kind, func(b *testing.B) {
			var per float64
			for range b.N {
				var err error
				if per, err = serveMemory(kind, 2000); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(per/1024, "KiB/obj")
		})
	}
}

// TestServeMemoryTargets checks serve's cache bytes per object of each kind against the
// bench's target at the bench's size (2,000 objects), in process, so CI checks what the bench
// reports.
func TestServeMemoryTargets(t *testing.T) {
	for _, kind := range bench.MemoryKinds {
		per, err := serveMemory(kind, 2000)
		if err != nil {
			t.Fatal(kind, err)
		}
		t.Logf("%s: %.2f KiB per object", kind, per/1024)
		if per <= 0 || per > bench.MemoryTarget {
			t.Errorf("%s: serve caches %.2f KiB per object, want at most %d KiB", kind, per/1024, bench.MemoryTarget/1024)
		}
	}
}
