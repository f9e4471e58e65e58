package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// unitPackages hold the in-process benchmarks (engine transition against a hand-written switch,
// allocator, compact slices, profile expansion) that the report folds into its table.
var unitPackages = []string{"./engine/...", "./drivers/..."}

// UnitBenchmarks runs the packages' Go benchmarks once from the module root, streams their
// raw output to log and returns one report row per benchmark.
func UnitBenchmarks(ctx context.Context, log io.Writer) ([]Row, error) {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("locate module root: %w", err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count=1"}, unitPackages...)...)
	cmd.Dir = strings.TrimSpace(string(root))
	cmd.Stdout = io.MultiWriter(&out, log)
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return ParseBenchmarks(&out), fmt.Errorf("go test -bench: %w", err)
	}
	rows := ParseBenchmarks(&out)
	if len(rows) == 0 {
		return nil, fmt.Errorf("go test -bench printed no benchmark results")
	}
	return rows, nil
}

// benchLine matches `BenchmarkName/sub-8   1234   5678 ns/op   [more value unit pairs]`.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// ParseBenchmarks turns `go test -bench` output into report rows: the value is ns/op (as µs or
// ms when large) with any custom metrics (b.ReportMetric) after it. Unit benchmarks have no
// target, so every row is reported only.
func ParseBenchmarks(r io.Reader) []Row {
	var rows []Row
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		var perOp string
		var extra []string
		for i := 0; i+1 < len(f); i += 2 {
			v, unit := f[i], f[i+1]
			switch unit {
			case "ns/op":
				if n, err := strconv.ParseFloat(v, 64); err == nil {
					perOp = duration(n) + "/op"
				}
			default:
				extra = append(extra, v+" "+unit)
			}
		}
		if perOp == "" {
			continue
		}
		value := perOp
		if len(extra) > 0 {
			value += " (" + strings.Join(extra, ", ") + ")"
		}
		rows = append(rows, Row{Metric: "unit: " + m[1], Value: value, Target: "report", OK: true})
	}
	return rows
}

func duration(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.0f ns", ns)
	}
}
