// Package benchrun is the machine-readable record of one benchmark run: what
// `benchreport -json FILE` writes and what benchtable renders as the table of
// docs/benchmarks.md, so the committed table always names the commit and date it comes from.
// It does not import the bench itself, so reading a record compiles none of the harness.
package benchrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Run is one run of benchreport.
type Run struct {
	// Commit is `git rev-parse HEAD` when the run started; Dirty says whether tracked files
	// differed from it (the code measured is then not exactly that commit's).
	Commit string `json:"commit"`
	Dirty  bool   `json:"dirty"`
	// Date is when the run started, in UTC.
	Date time.Time `json:"date"`
	// Args are benchreport's arguments: empty for a full run.
	Args []string `json:"args"`
	// Duration is the run's wall time, e.g. "34m2s".
	Duration string `json:"duration"`
	// Verdict is "pass" when every target was met, else why the run failed (the rows that
	// missed, or the run's own error).
	Verdict string `json:"verdict"`
	Rows    []Row  `json:"rows"`
}

// Row is one row of the report, as benchreport prints it. Values keep their units in the text
// (e.g. "27.7 pods/s (bound 27.7/s)"), as the bench formats them.
type Row struct {
	Metric   string `json:"metric"`
	Value    string `json:"value"`
	Baseline string `json:"baseline"`
	Ratio    string `json:"ratio"`
	Target   string `json:"target"`
	// Result is the printed ok column: yes, NO, n/a (not measured) or FAILED.
	Result string `json:"result"`
	// Pass is false for a row that missed its target or whose measurement failed.
	Pass bool `json:"pass"`
}

// Results are the values Row.Result may take.
var Results = []string{"yes", "NO", "n/a", "FAILED"}

// Source returns the commit checked out in dir and whether tracked files differ from it.
func Source(ctx context.Context, dir string) (commit string, dirty bool, err error) {
	out, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", false, err
	}
	cmd := exec.CommandContext(ctx, "git", "diff", "--quiet", "HEAD")
	cmd.Dir = dir
	switch err := cmd.Run(); {
	case err == nil:
		return out, false, nil
	case isExit(err, 1):
		return out, true, nil
	default:
		return "", false, fmt.Errorf("git diff --quiet HEAD: %w", err)
	}
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

func isExit(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

// Write encodes r as indented JSON.
func Write(w io.Writer, r *Run) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// Read decodes and checks a record; name is the file's name for messages, which carry the
// line and column of a syntax or type error and the path of a missing or invalid field.
func Read(name string, data []byte) (*Run, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Run
	if err := dec.Decode(&r); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		// Both offsets count the bytes read up to and including the offending one.
		case errors.As(err, &syn):
			return nil, fmt.Errorf("%s:%s: %v", name, position(data, syn.Offset-1), err)
		case errors.As(err, &typ):
			return nil, fmt.Errorf("%s:%s: %s: %v", name, position(data, typ.Offset-1), typ.Field, err)
		default:
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	if dec.More() {
		next := dec.InputOffset() + int64(len(data[dec.InputOffset():])-len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")))
		return nil, fmt.Errorf("%s:%s: more than one JSON value", name, position(data, next))
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &r, nil
}

func (r *Run) check() error {
	switch {
	case r.Commit == "":
		return errors.New("commit: missing")
	case r.Date.IsZero():
		return errors.New("date: missing")
	case r.Verdict == "":
		return errors.New("verdict: missing")
	case len(r.Rows) == 0:
		return errors.New("rows: none")
	}
	for i, row := range r.Rows {
		if row.Metric == "" {
			return fmt.Errorf("rows[%d].metric: missing", i)
		}
		known := false
		for _, s := range Results {
			known = known || row.Result == s
		}
		if !known {
			return fmt.Errorf("rows[%d].result: %q is not one of %s", i, row.Result, strings.Join(Results, ", "))
		}
	}
	return nil
}

// position turns a byte offset of data into "line:col" (1-based).
func position(data []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Sprintf("%d:%d", line, col)
}
