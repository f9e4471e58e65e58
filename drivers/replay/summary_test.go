package replay

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/draforge/draforge/drivers/trace"
)

func at(d time.Duration) *time.Duration { return &d }

// record: four jobs on 8 devices in two groups; d never starts.
func record() *Record {
	s := time.Second
	job := func(name string, arrival, started time.Duration, pods, devices int, queue string, gang bool) JobRecord {
		j := JobRecord{Job: trace.Job{Name: name, Namespace: "ns", Arrival: arrival, Duration: 60 * s, Pods: pods, Devices: devices, DeviceClass: "gpu", Queue: queue, Gang: gang},
			Submitted: at(arrival)}
		if started >= 0 {
			j.Started, j.Finished = at(started), at(started+60*s)
		}
		return j
	}
	return &Record{
		Trace: "t", Run: "t-1", Speed: 60, Devices: map[string]int{"r1": 4, "r2": 4}, Ended: "complete",
		Jobs: []JobRecord{
			job("a", 0, 0, 1, 4, "q1", false),
			job("b", 10*s, 70*s, 2, 2, "q1", true), // waits 60s
			job("c", 20*s, 50*s, 1, 1, "", false),  // waits 30s
			{Job: trace.Job{Name: "d", Namespace: "ns", Arrival: 30 * s, Pods: 1, Devices: 16}, Submitted: at(30 * s), Reason: "0/3 nodes are available: 3 cannot allocate all claims."},
		},
		Samples: []Sample{
			{T: 0, AllocatedByGroup: map[string]int{"r1": 4}, AllocatedByClass: map[string]int{"gpu": 4}, Running: 1, Pending: 1},
			{T: 60 * s, AllocatedByGroup: map[string]int{"r1": 4, "r2": 4}, AllocatedByClass: map[string]int{"gpu": 8}, Running: 3, Pending: 0},
		},
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize(record())
	if s.Jobs != 4 || s.Started != 3 || s.Finished != 3 || len(s.NeverStarted) != 1 || s.NeverStarted[0].Job != "ns/d" || s.NeverStarted[0].Size != 16 ||
		!strings.Contains(s.NeverStarted[0].Reason, "cannot allocate") {
		t.Fatalf("summary %+v", s)
	}
	// Waits 0, 60s, 30s: nearest rank p50 = 30s, p90 = p99 = 60s.
	if s.Wait.P50 != 30*time.Second || s.Wait.P90 != 60*time.Second || s.Wait.P99 != 60*time.Second || s.Wait.N != 3 {
		t.Errorf("wait %+v", s.Wait)
	}
	if q := s.ByQueue["q1"]; q.N != 2 || q.Max != 60*time.Second {
		t.Errorf("queue q1 %+v", q)
	}
	if q := s.ByQueue["-"]; q.N != 1 || q.P50 != 30*time.Second {
		t.Errorf("no queue %+v", q)
	}
	if b := s.BySize["2-4"]; b.N != 2 { // a: 4 devices, b: 2×2
		t.Errorf("size 2-4 %+v", s.BySize)
	}
	if s.Gang.N != 1 || s.Gang.P50 != 60*time.Second {
		t.Errorf("gang %+v", s.Gang)
	}
	// r1 held 4/4 in both samples, r2 0/4 then 4/4; pods pended only in the first sample,
	// when r2 had 4 devices free.
	if s.Utilization["r1"] != 1 || s.Utilization["r2"] != 0.5 || s.IdleWhilePending["r2"] != 4 || s.IdleWhilePending["r1"] != 0 || s.PeakPending != 1 {
		t.Errorf("utilization %v idle %v peak %d", s.Utilization, s.IdleWhilePending, s.PeakPending)
	}
}

func TestCompare(t *testing.T) {
	a, b := record(), record()
	if c := Compare(a, b); !c.SameOrder || c.Jobs != 3 || c.MaxWaitDiff != 0 {
		t.Errorf("a record against itself: %+v", c)
	}
	// c starts 20s later in b: its wait differs by 20s, and it now starts after b (70s).
	b.Jobs[2].Started = at(75 * time.Second)
	c := Compare(a, b)
	if c.SameOrder || c.MaxWaitDiff != 25*time.Second || c.Worst != "ns/c" {
		t.Errorf("compare %+v", c)
	}
}

func TestReportFiles(t *testing.T) {
	r := record()
	var html bytes.Buffer
	if err := WriteHTML(&html, r, record()); err != nil {
		t.Fatal(err)
	}
	page := html.String()
	for _, want := range []string{`id="comparison"`, `<polyline class="series" data-series="group r1"`, "0/3 nodes are available", "same start order: <b>true</b>", "p50 30s"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("the report must be self-contained: no script, no network")
	}
	var jobs bytes.Buffer
	if err := WriteJobsCSV(&jobs, r); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&jobs).ReadAll()
	if err != nil || len(rows) != 5 || rows[2][1] != "b" || rows[2][13] != "60.0" || rows[4][13] != "" {
		t.Errorf("jobs.csv %v %v", rows, err)
	}
	var samples bytes.Buffer
	if err := WriteSamplesCSV(&samples, r); err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(samples.String(), "\n")[0]; got != "t_s,pending,running,free,largest_free_on_a_node,fragmented,blocked_job,unavailable,faults,allocated_group_r1,allocated_group_r2,allocated_class_gpu" {
		t.Errorf("samples.csv header %q", got)
	}
	dir := t.TempDir()
	if err := WriteFiles(dir, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadRecord(dir + "/record.json")
	if err != nil || len(back.Jobs) != 4 || *back.Jobs[1].Started != 70*time.Second {
		t.Errorf("record.json read back %+v %v", back, err)
	}
}

// TestFragmentation: free devices are fragmented when a pending pod that one node could hold
// finds too few free on every node though enough are free in all; a pod no node could ever
// hold, or one that fits somewhere, is not fragmentation.
func TestFragmentation(t *testing.T) {
	nodes := map[string]int{"a": 4, "b": 4, "c": 4}
	held := map[string]int{"a": 2, "b": 3, "c": 1} // free: 2, 1, 3
	cases := []struct {
		name    string
		pending []pendingPod
		frag    int
		blocked string
	}{
		{"nothing pending", nil, 0, ""},
		{"fits on c", []pendingPod{{"ns/small", 3, ""}}, 0, ""},
		{"4 per pod: 6 free, at most 3 on a node", []pendingPod{{"ns/big", 8, "never"}, {"ns/four", 4, "0/3 nodes are available: 3 cannot allocate all claims."}}, 6, "ns/four"},
		{"more than is free", []pendingPod{{"ns/seven", 7, ""}}, 0, ""},
		{"no node holds 5", []pendingPod{{"ns/five", 5, ""}}, 0, ""},
	}
	for _, c := range cases {
		var s Sample
		s.fragmentation(nodes, held, c.pending)
		if s.Free != 6 || s.LargestFree != 3 || s.Fragmented != c.frag || s.Blocked != c.blocked {
			t.Errorf("%s: free %d largest %d fragmented %d blocked %q; want 6, 3, %d, %q", c.name, s.Free, s.LargestFree, s.Fragmented, s.Blocked, c.frag, c.blocked)
		}
		if c.blocked == "ns/four" && !strings.Contains(s.Reason, "cannot allocate") {
			t.Errorf("%s: reason %q, want kube-scheduler's", c.name, s.Reason)
		}
	}
	r := record()
	r.Samples[0].Free, r.Samples[0].LargestFree, r.Samples[0].Fragmented, r.Samples[0].Blocked, r.Samples[0].Reason = 4, 2, 4, "ns/d", "0/3 nodes are available: 3 cannot allocate all claims."
	f := Summarize(r).Fragmentation
	if f.Samples != 1 || f.PendingSamples != 1 || f.MeanFree != 4 || f.Worst == nil || f.Worst.Blocked != "ns/d" {
		t.Fatalf("fragmentation %+v", f)
	}
	var html bytes.Buffer
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	if page := html.String(); !strings.Contains(page, "In 1 of 1 samples with pods pending") || !strings.Contains(page, "<b>ns/d</b> waited") ||
		!strings.Contains(page, "kube-scheduler: <i>0/3 nodes are available") {
		t.Errorf("the report's fragmentation:\n%s", page)
	}
	if err := WriteHTML(&html, record()); err != nil || !strings.Contains(html.String(), "None: no pending pod ever found") {
		t.Errorf("a run without fragmentation: %v", err)
	}
}
