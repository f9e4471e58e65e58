package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/draforge/draforge/drivers/gvr"
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

// TestCacheMemoryTargets checks the controller's cache bytes per object of each kind against
// the bench's 6 KiB target, at the bench's size (MemoryObjects: fixed costs spread as they are
// in the bench's rows), in process, so CI checks what the bench reports.
func TestCacheMemoryTargets(t *testing.T) {
	for _, kind := range ControllerMemoryKinds {
		b, err := MeasureMemory(context.Background(), kind, DefaultConfig().MemoryObjects)
		if err != nil {
			t.Fatal(kind, err)
		}
		t.Logf("%s: %.0f B/object (%.2f KiB)", kind, b, b/1024)
		if b <= 0 || b > MemoryTarget {
			t.Errorf("%s: %.2f KiB per cached object, want at most %d KiB", kind, b/1024, MemoryTarget/1024)
		}
	}
}

// BenchmarkCacheMemory reports the cache bytes per object of each kind (see MeasureMemory).
func BenchmarkCacheMemory(b *testing.B) {
	for _, kind := range ControllerMemoryKinds {
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

func TestVerdictGatesMissedAndFailedRows(t *testing.T) {
	met := Row{Metric: "met", Target: ">= 1.0", OK: true}
	reported := Row{Metric: "reported", Target: "report", OK: true}
	unmeasured := Row{Metric: "unmeasured", Skip: true}
	if err := Verdict([]Row{met, reported, unmeasured}, nil); err != nil {
		t.Fatalf("all targets met: %v", err)
	}
	missed := Row{Metric: "slow", Target: "<= 1.2", OK: false}
	failed := Row{Metric: "broken", Value: "failed: x", Skip: true, Failed: true}
	err := Verdict([]Row{met, missed, failed}, nil)
	if err == nil || !strings.Contains(err.Error(), "2 row(s)") || !strings.Contains(err.Error(), "slow") || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("missed and failed rows must fail the run, got %v", err)
	}
	runErr := errors.New("control plane did not start")
	if err := Verdict([]Row{met}, runErr); !errors.Is(err, runErr) {
		t.Fatalf("run error must fail the run, got %v", err)
	}
	var b bytes.Buffer
	Print(&b, []Row{failed})
	if !strings.Contains(b.String(), "| FAILED") {
		t.Fatalf("failed row printed as\n%s", b.String())
	}
}

func TestParseBenchmarks(t *testing.T) {
	out := `goos: linux
pkg: github.com/draforge/draforge/engine
BenchmarkTransition/engine-2         	   40000	     28123 ns/op	    9000 B/op	     120 allocs/op
BenchmarkTransition/hand-written-2   	  200000	      5300 ns/op	       5.31 engine/hand-ratio
BenchmarkAllocate/first-node         	    2000	   1630000 ns/op
PASS
ok  	github.com/draforge/draforge/engine	3.1s
`
	rows := ParseBenchmarks(strings.NewReader(out))
	want := []string{
		"unit: BenchmarkTransition/engine|28.1 µs/op (9000 B/op, 120 allocs/op)",
		"unit: BenchmarkTransition/hand-written|5.3 µs/op (5.31 engine/hand-ratio)",
		"unit: BenchmarkAllocate/first-node|1.63 ms/op",
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v", rows)
	}
	for i, r := range rows {
		if got := r.Metric + "|" + r.Value; got != want[i] || !r.OK || r.Target != "report" {
			t.Errorf("row %d = %q (%+v), want %q", i, got, r, want[i])
		}
	}
}

// TestMemoryListsAreDecoded: the measured caches must own their strings, as after a real
// client's JSON decoding, not share them with the fake client's copies in the baseline.
func TestMemoryListsAreDecoded(t *testing.T) {
	objs, err := MemoryObjects("resourceclaims", 1)
	if err != nil {
		t.Fatal(err)
	}
	orig := objs[0].(*unstructured.Unstructured).GetName()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(), memoryGVRs, objs...)
	decodeListsFromJSON(client)
	l, err := client.Resource(gvr.ResourceClaims).Namespace("bench").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("listed %d claims, want 1", len(l.Items))
	}
	got := l.Items[0].GetName()
	if got != orig || unsafe.StringData(got) == unsafe.StringData(orig) {
		t.Fatalf("listed name %q shares its bytes with the fixture's %q: not decoded", got, orig)
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tdraforge\nVmPeak:\t  900000 kB\nVmRSS:\t   51234 kB\nRssAnon:\t   40000 kB\n"
	got, err := ParseVmRSS(status)
	if err != nil || got != 51234*1024 {
		t.Fatalf("ParseVmRSS = %d, %v; want %d", got, err, 51234*1024)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tabc kB\n"} {
		if _, err := ParseVmRSS(bad); err == nil {
			t.Errorf("ParseVmRSS(%q): no error", bad)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command name with a space and a parenthesis; utime 250, stime 50 ticks.
	stat := "4242 (draf (orge) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 800000000 12000 18446744073709551615"
	got, err := ParseStatCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Fatalf("ParseStatCPU = %s, %v; want 3s", got, err)
	}
	if _, err := ParseStatCPU("4242 (x) S 1 2"); err == nil {
		t.Error("short stat: no error")
	}
	if _, err := ParseStatCPU("garbage"); err == nil {
		t.Error("no command name: no error")
	}
	if d := procCPU(0); d != 0 {
		t.Errorf("procCPU(0) = %s, want 0", d)
	}
	// Its own process: CPU time is readable and not negative.
	if d, err := ProcessCPU(os.Getpid()); err != nil || d < 0 {
		t.Errorf("ProcessCPU(self) = %s, %v", d, err)
	}
}

func TestParseServeMemory(t *testing.T) {
	out := "goos: linux\nBenchmarkServeMemory/resourceclaims-2         \t       1\t1234 ns/op\t         4.50 KiB/obj\n" +
		"BenchmarkServeMemory/resourceslices/nvidia-gpu-2 \t 1\t 99 ns/op\t 5.25 KiB/obj\nPASS\n"
	got, err := ParseServeMemory(out)
	if err != nil {
		t.Fatal(err)
	}
	if got["resourceclaims"] != 4.5 || got["resourceslices/nvidia-gpu"] != 5.25 || len(got) != 2 {
		t.Errorf("ParseServeMemory = %v", got)
	}
	if _, err := ParseServeMemory("PASS\n"); err == nil {
		t.Error("no results: no error")
	}
}

// TestOverridden: a copied component's own argument of a flag the copy sets is dropped (a list
// flag such as --controllers would add up), the rest kept in order.
func TestOverridden(t *testing.T) {
	args := []string{"--kubeconfig=/admin", "--leader-elect=false", "--controllers=a,b", "--v", "--secure-port=0"}
	got := overridden(args, []string{"--kubeconfig=/proxy", "--secure-port=0", "--controllers=resourceclaim-controller"})
	if want := []string{"--leader-elect=false", "--v"}; !slices.Equal(got, want) {
		t.Fatalf("overridden = %q, want %q", got, want)
	}
}

// TestAllocRows: the default mode's writes are summed over its agents and still count as
// writes; its per-claim row is gated, the per-write and latency rows reported.
func TestAllocRows(t *testing.T) {
	r := &AllocResult{Nodes: 5, Devices: 2, Claims: 10, Controller: 100, Scheduler: 40, Raw: 200, Default: 30,
		ControllerReqs: Counts{"update resourceclaims/status": 10, "create events": 10, "list resourceclaims": 1},
		SchedulerReqs:  Counts{"create pods/binding": 10, "patch resourceclaims/status": 10, "get nodes": 3},
		DefaultReqs: map[string]Counts{
			"controller":              {"create pods": 10, "delete pods": 10, "watch pods": 1},
			"kube-scheduler":          {"create pods/binding": 10},
			"kube-controller-manager": {"update resourceclaims/status": 10},
		},
		LatencyRate:   20,
		ControllerLat: Latency{Samples: 10, P50: 10 * time.Millisecond, P99: 20 * time.Millisecond},
		SchedulerLat:  Latency{Samples: 10, P50: 30 * time.Millisecond, P99: 80 * time.Millisecond},
		DefaultLat:    Latency{Samples: 10, P50: 60 * time.Millisecond, P99: 160 * time.Millisecond},
	}
	if got := r.WritesPerClaim(r.DefaultWrites()); got != 4 {
		t.Fatalf("default writes per claim = %v, want 4 (%v)", got, r.DefaultWrites())
	}
	if got := r.DefaultWritesPerSecond(); got != 120 {
		t.Fatalf("default writes/s = %v, want 120", got)
	}
	rows := AllocRows(r)
	if len(rows) != 7 {
		t.Fatalf("%d rows, want 7", len(rows))
	}
	byPrefix := func(p string) Row {
		for _, row := range rows {
			if strings.HasPrefix(row.Metric, p) {
				return row
			}
		}
		t.Fatalf("no row %q", p)
		return Row{}
	}
	perClaim := byPrefix("allocation per claim, the rate a user feels: default mode")
	if perClaim.Ratio != "0.75" || perClaim.Target == "report" || perClaim.OK != (0.75 >= DefaultPerClaimTarget) {
		t.Errorf("default per-claim row %+v", perClaim)
	}
	lat := byPrefix("allocation latency, claim created to allocated, p50 / p99 (ratio of p99): default mode")
	if lat.Value != "p50 60.0 ms / p99 160.0 ms" || lat.Ratio != "2.00" {
		t.Errorf("default latency row %+v", lat)
	}
	r.Default = r.Scheduler * DefaultPerClaimTarget * 0.9
	rows = AllocRows(r)
	if byPrefix("allocation per claim, the rate a user feels: default mode").OK {
		t.Error("a default mode below its per-claim target passed")
	}
	// Not measured: no default or latency rows.
	r.Default, r.LatencyRate = 0, 0
	if n := len(AllocRows(r)); n != 3 {
		t.Errorf("%d rows without default mode and latency, want 3", n)
	}
}
