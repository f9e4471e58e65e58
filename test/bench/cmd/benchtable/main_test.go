package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/draforge/draforge/test/bench/benchrun"
)

// TestSampleRun renders the checked-in sample record and compares it with its golden table,
// then rewrites a document's table between the markers and nothing else.
func TestSampleRun(t *testing.T) {
	want, err := os.ReadFile("testdata/sample-table.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(t.TempDir(), "doc.md")
	before := "# Benchmarks\n\nMethod.\n\n" + benchrun.Begin + "\nold table\n" + benchrun.End + "\n\nAfter.\n"
	if err := os.WriteFile(doc, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("testdata/sample-run.json", doc, ""); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	wantDoc := "# Benchmarks\n\nMethod.\n\n" + benchrun.Begin + "\n" + string(want) + benchrun.End + "\n\nAfter.\n"
	if string(got) != wantDoc {
		t.Fatalf("document:\n%s\nwant:\n%s", got, wantDoc)
	}
	// Running it again changes nothing.
	if err := run("testdata/sample-run.json", doc, ""); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(doc); string(again) != wantDoc {
		t.Fatalf("second run changed the document:\n%s", again)
	}
}

func TestBadInputNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "run.json")
	if err := os.WriteFile(bad, []byte("{\n  \"commit\": 7\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(bad, "", ""); err == nil || !strings.Contains(err.Error(), bad+":2:") {
		t.Fatalf("want an error at %s:2:..., got %v", bad, err)
	}
	noMarkers := filepath.Join(dir, "doc.md")
	if err := os.WriteFile(noMarkers, []byte("# no table here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("testdata/sample-run.json", noMarkers, ""); err == nil || !strings.Contains(err.Error(), noMarkers) {
		t.Fatalf("want an error naming %s, got %v", noMarkers, err)
	}
}

// TestDocsTableMatchesRecordedRun: once a run is recorded in docs/benchmarks-run.json, the
// table in docs/benchmarks.md must be the one benchtable renders from it, followed by every
// run kept in docs/bench-runs, that run among them (go tool task bench:table writes them all).
func TestDocsTableMatchesRecordedRun(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..")
	data, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks-run.json"))
	if os.IsNotExist(err) {
		t.Skip("no run recorded in docs/benchmarks-run.json yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := benchrun.Read("docs/benchmarks-run.json", data)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	table, ok := benchrun.Table(string(doc))
	if !ok {
		t.Fatal("docs/benchmarks.md has no benchtable markers")
	}
	kept, err := benchrun.ReadDir(filepath.Join(root, "docs", "bench-runs"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(kept, func(k *benchrun.Run) bool { return k.Commit == r.Commit && k.Date.Equal(r.Date) }) {
		t.Fatalf("the table's run (%s) is not kept in docs/bench-runs: run go tool task bench:table RUN=docs/benchmarks-run.json", benchrun.FileName(r))
	}
	if want := strings.TrimSuffix(benchrun.Markdown(r)+"\n"+benchrun.History(kept, r), "\n"); table != want {
		t.Fatalf("docs/benchmarks.md's table differs from docs/benchmarks-run.json: run go tool task bench:table RUN=docs/benchmarks-run.json\ngot:\n%s\nwant:\n%s", table, want)
	}
}
