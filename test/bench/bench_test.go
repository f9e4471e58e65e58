package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The heavy runs need a control plane and minutes: they are in cmd/benchreport
// (`go tool task bench`). These are the quick checks `go test ./test/bench/` runs.

func TestSampleRequests(t *testing.T) {
	s := Sample(`# HELP rest_client_requests_total x
rest_client_requests_total{code="200",host="h",method="GET"} 7
rest_client_requests_total{code="201",host="h",method="POST"} 3
rest_client_requests_total{code="409",host="h",method="PUT"} 1
rest_client_requests_total{code="200",host="h",method="PATCH"} 2
draforge_controller_sync_attempts_total{pipeline="claim"} 4
draforge_controller_sync_attempts_total{pipeline="pool"} 5
`)
	r := s.Requests()
	if r.Total() != 13 || r.Writes() != 6 || r["GET"] != 7 {
		t.Fatalf("requests = %v", r)
	}
	if got := s.SyncAttempts(); got != 9 {
		t.Fatalf("sync attempts = %v", got)
	}
	if d := r.Sub(Requests{"GET": 7, "POST": 3}); d.Writes() != 3 || d["GET"] != 0 {
		t.Fatalf("sub = %v", d)
	}
}

func TestPrint(t *testing.T) {
	var b bytes.Buffer
	Print(&b, []Row{{Metric: "m", Value: "1", Baseline: "2", Ratio: "0.50", Target: ">= 1.0"}, {Metric: "n", Skip: true}})
	out := b.String()
	for _, want := range []string{"metric", "| ratio", "| NO", "| n/a"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in\n%s", want, out)
		}
	}
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if quantile(d, 0.5) != 50 || quantile(d, 0.99) != 99 || quantile(nil, 0.5) != 0 {
		t.Fatal(quantile(d, 0.5), quantile(d, 0.99))
	}
}

// TestMeasureMemory runs the memory measurement small, so the harness stays correct.
func TestMeasureMemory(t *testing.T) {
	for _, kind := range MemoryKinds {
		b, err := MeasureMemory(context.Background(), kind, 50)
		if err != nil {
			t.Fatal(kind, err)
		}
		if b <= 0 {
			t.Fatalf("%s: %v bytes per object", kind, b)
		}
		t.Logf("%s: %.0f B/object (%.2f KiB)", kind, b, b/1024)
	}
}

// BenchmarkCacheMemory reports the cache bytes per object of each kind (see MeasureMemory).
func BenchmarkCacheMemory(b *testing.B) {
	for _, kind := range MemoryKinds {
		b.Run(kind, func(b *testing.B) {
			var per float64
			for b.Loop() {
				var err error
				if per, err = MeasureMemory(context.Background(), kind, 1000); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(per, "B/object")
		})
	}
}

func TestExplainPhase(t *testing.T) {
	r, err := Explain(t.Context(), 20, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Nodes != 20 || r.Devices != 4 || r.Latency <= 0 {
		t.Errorf("result %+v", r)
	}
}
