package benchrun

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// FileName is the name a run is kept under in the runs directory (docs/bench-runs): its start
// in UTC and its commit, so names sort by date and never collide.
func FileName(r *Run) string {
	return r.Date.UTC().Format("2006-01-02T1504Z") + "-" + shortCommit(r.Commit) + ".json"
}

// shortCommit is a commit's first 12 hex digits, as runs are named and listed.
func shortCommit(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// Keep writes a run's record (data, as Write encoded it) into dir under FileName.
func Keep(dir string, r *Run, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, FileName(r)), data, 0o644)
}

// ReadDir reads every run kept in dir (its *.json files), oldest first.
func ReadDir(dir string) ([]*Run, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var runs []*Run
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r, err := Read(f, data)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	slices.SortStableFunc(runs, func(a, b *Run) int { return a.Date.Compare(b.Date) })
	return runs, nil
}

// History renders every kept run, newest first, each with its misses, marking the one the
// table above it comes from: a table alone would hide the runs that missed.
func History(runs []*Run, table *Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Every run kept in `docs/bench-runs/`, newest first (%d):\n\n", len(runs))
	for _, r := range slices.Backward(runs) {
		commit := shortCommit(r.Commit)
		if r.Dirty {
			commit += " (uncommitted changes)"
		}
		what := "full run"
		if only := onlyPhases(r.Args); only != "" {
			what = "phases " + only
		}
		mark := ""
		if r.Commit == table.Commit && r.Date.Equal(table.Date) {
			mark = " **(this table)**"
		}
		fmt.Fprintf(&b, "- %s, `%s`, %s, %s%s: %s\n", r.Date.UTC().Format("2006-01-02 15:04 MST"), commit, what, r.Duration, mark, cell(outcome(r)))
	}
	return b.String()
}

// outcome is "every target met" or the rows that missed or failed.
func outcome(r *Run) string {
	var missed []string
	for _, row := range r.Rows {
		if !row.Pass {
			got := row.Value
			if row.Ratio != "" {
				got += ", ratio " + row.Ratio
			}
			missed = append(missed, fmt.Sprintf("%s (%s; target %s)", row.Metric, got, row.Target))
		}
	}
	switch {
	case len(missed) > 0:
		return fmt.Sprintf("%d missed: %s", len(missed), strings.Join(missed, "; "))
	case r.Verdict != "pass":
		return "failed: " + r.Verdict
	}
	return "every target met"
}

// onlyPhases returns the -only value among a run's arguments ("" for every phase).
func onlyPhases(args []string) string {
	for i, a := range args {
		switch {
		case (a == "-only" || a == "--only") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "-only="), strings.HasPrefix(a, "--only="):
			return a[strings.Index(a, "=")+1:]
		}
	}
	return ""
}
