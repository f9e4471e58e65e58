package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/draforge/draforge/test/bench"
	"github.com/draforge/draforge/test/bench/benchrun"
)

// TestWriteRecord: every row is recorded with its printed verdict, missed and failed rows do
// not pass, and the file is one benchtable reads back.
func TestWriteRecord(t *testing.T) {
	rows := []bench.Row{
		{Metric: "met", Value: "1.0 s", Baseline: "raw 1.1 s", Ratio: "0.91", Target: "<= 1.2", OK: true},
		{Metric: "reported", Value: "5", Target: "report", OK: true},
		{Metric: "missed", Value: "2.0 s", Target: "<= 1.2"},
		{Metric: "unmeasured", Skip: true},
		{Metric: "broken", Value: "failed: x", Skip: true, Failed: true},
	}
	dir := t.TempDir()
	file, keep := filepath.Join(dir, "bench", "run.json"), filepath.Join(dir, "runs")
	start := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	r := &benchrun.Run{Commit: "abc", Date: start}
	if err := writeRecord(file, keep, r, rows, 34*time.Minute, errors.New("2 row(s) missed their target: missed; broken")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The same record is kept under its date and commit.
	if kept, err := os.ReadFile(filepath.Join(keep, "2026-12-05T0600Z-abc.json")); err != nil || string(kept) != string(data) {
		t.Errorf("kept record: %v (same as -json: %v)", err, string(kept) == string(data))
	}
	got, err := benchrun.Read(file, data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Duration != "34m0s" || got.Verdict != "2 row(s) missed their target: missed; broken" || got.Args == nil || len(got.Rows) != len(rows) {
		t.Fatalf("record %+v", got)
	}
	want := []struct {
		result string
		pass   bool
	}{{"yes", true}, {"yes", true}, {"NO", false}, {"n/a", true}, {"FAILED", false}}
	for i, w := range want {
		if row := got.Rows[i]; row.Metric != rows[i].Metric || row.Result != w.result || row.Pass != w.pass {
			t.Errorf("row %d: %+v, want result %s pass %v", i, row, w.result, w.pass)
		}
	}
	if got.Rows[0].Baseline != "raw 1.1 s" || got.Rows[0].Ratio != "0.91" || got.Rows[0].Target != "<= 1.2" {
		t.Errorf("row 0 fields: %+v", got.Rows[0])
	}
}
