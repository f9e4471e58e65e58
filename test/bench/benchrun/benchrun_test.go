package benchrun

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample() *Run {
	return &Run{Commit: "abc", Date: time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC), Args: []string{}, Duration: "34m2s", Verdict: "pass",
		Rows: []Row{{Metric: "m", Value: "1.0 s", Target: "report", Result: "yes", Pass: true}}}
}

func TestWriteThenRead(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, sample()); err != nil {
		t.Fatal(err)
	}
	r, err := Read("run.json", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if r.Commit != "abc" || !r.Date.Equal(sample().Date) || len(r.Rows) != 1 || r.Rows[0].Value != "1.0 s" || !r.Rows[0].Pass {
		t.Fatalf("read back %+v", r)
	}
}

func TestReadErrorsNameTheirPlace(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"syntax", "{\n  \"commit\": \"abc\",\n  oops\n}", "run.json:3:3: "},
		{"type", "{\n  \"commit\": 7\n}", "run.json:2:13: commit: "},
		{"unknown field", `{"commit": "abc", "comit": "x"}`, `run.json: json: unknown field "comit"`},
		{"two values", `{"commit":"a"} {}`, "run.json:1:16: more than one JSON value"},
		{"no commit", `{"date": "2026-12-05T06:00:00Z"}`, "run.json: commit: missing"},
		{"no date", `{"commit": "abc"}`, "run.json: date: missing"},
		{"no verdict", `{"commit": "abc", "date": "2026-12-05T06:00:00Z"}`, "run.json: verdict: missing"},
		{"no rows", `{"commit": "abc", "date": "2026-12-05T06:00:00Z", "verdict": "pass"}`, "run.json: rows: none"},
		{"row without metric", `{"commit": "abc", "date": "2026-12-05T06:00:00Z", "verdict": "pass", "rows": [{"metric": "a", "result": "yes"}, {"result": "yes"}]}`,
			"run.json: rows[1].metric: missing"},
		{"unknown result", `{"commit": "abc", "date": "2026-12-05T06:00:00Z", "verdict": "pass", "rows": [{"metric": "a", "result": "ok"}]}`,
			`run.json: rows[0].result: "ok" is not one of yes, NO, n/a, FAILED`},
	} {
		_, err := Read("run.json", []byte(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want prefix %q", tc.name, err, tc.want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	r := sample()
	r.Rows = append(r.Rows, Row{Metric: "a|b", Value: "two\nlines", Result: "NO"})
	got := Markdown(r)
	for _, want := range []string{
		"at commit `abc`, started 2026-12-05 06:00 UTC, a full run (no arguments), 34m2s; every target met.\n",
		"| m | 1.0 s | - | - | report | yes |\n",
		"| a\\|b | two lines | - | - | - | NO |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	r.Dirty, r.Args, r.Verdict = true, []string{"-only", "unit"}, "1 row(s) missed their target: m"
	got = Markdown(r)
	if !strings.Contains(got, "`abc` with uncommitted changes to tracked files") || !strings.Contains(got, "`benchreport -only unit`") ||
		!strings.Contains(got, "; failed: 1 row(s) missed their target: m.") {
		t.Errorf("dirty run with arguments and a failed verdict:\n%s", got)
	}
}

func TestReplace(t *testing.T) {
	doc := "a\n" + Begin + "\nold\nlines\n" + End + "\nb\n"
	got, err := Replace(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\n" + Begin + "\nnew\n" + End + "\nb\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if table, ok := Table(got); !ok || table != "new" {
		t.Fatalf("Table = %q, %v", table, ok)
	}
	empty := Begin + "\n" + End + "\n"
	if table, ok := Table(empty); !ok || table != "" {
		t.Fatalf("Table of an empty block = %q, %v", table, ok)
	}
	if got, err := Replace(empty, "t"); err != nil || got != Begin+"\nt\n"+End+"\n" {
		t.Fatalf("Replace of an empty block = %q, %v", got, err)
	}
	for name, bad := range map[string]string{
		"no markers":   "a\n",
		"no end":       Begin + "\nx\n",
		"end first":    End + "\n" + Begin + "\n",
		"two begins":   Begin + "\n" + Begin + "\nx\n" + End + "\n",
		"inline begin": "text " + Begin + " x\n" + End + "\n",
	} {
		if _, err := Replace(bad, "t"); err == nil {
			t.Errorf("%s: Replace accepted %q", name, bad)
		}
	}
}

// TestHistory keeps runs under names that sort by date and lists them newest first with their
// misses, marking the table's run.
func TestHistory(t *testing.T) {
	dir := t.TempDir()
	passed := sample()
	missed := sample()
	missed.Commit, missed.Date, missed.Args = "0123456789abcdef", passed.Date.Add(-time.Hour), []string{"-only", "replay", "-json", "x"}
	missed.Verdict = "1 row(s) missed their target: speed"
	missed.Rows = append(missed.Rows, Row{Metric: "speed", Value: "56.3", Target: ">= 59", Result: "NO"})
	if got := FileName(missed); got != "2026-12-05T0500Z-0123456789ab.json" {
		t.Errorf("FileName %q", got)
	}
	for _, r := range []*Run{passed, missed} {
		var b bytes.Buffer
		if err := Write(&b, r); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, FileName(r)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "Every run kept in `docs/bench-runs/`, newest first (2):\n\n" +
		"- 2026-12-05 06:00 UTC, `abc`, full run, 34m2s **(this table)**: every target met\n" +
		"- 2026-12-05 05:00 UTC, `0123456789ab`, phases replay, 34m2s: 1 missed: speed (56.3; target >= 59)\n"
	if got := History(runs, passed); got != want {
		t.Errorf("History:\n%s\nwant:\n%s", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(dir); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("a bad kept run: %v, want an error naming it", err)
	}
}
