package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// serveMemoryLine matches `BenchmarkServeMemory/<kind>-2   1   123 ns/op   5.20 KiB/obj`.
var serveMemoryLine = regexp.MustCompile(`^BenchmarkServeMemory/(\S+?)(?:-\d+)?\s+\d+\s+.*?([\d.]+) KiB/obj`)

// ServeMemory runs drivers/httpapi's BenchmarkServeMemory (serve's informers,
// machine reader, watcher and snapshot over the same decoded objects as MeasureMemory) and
// returns KiB per object by kind.
func ServeMemory(ctx context.Context, log io.Writer) (map[string]float64, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkServeMemory$", "-benchtime", "1x", "-count=1", "./drivers/httpapi/")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, io.MultiWriter(&out, log), log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go test -bench BenchmarkServeMemory: %w", err)
	}
	return ParseServeMemory(out.String())
}

// ParseServeMemory reads BenchmarkServeMemory's KiB/obj per kind.
func ParseServeMemory(out string) (map[string]float64, error) {
	got := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		m := serveMemoryLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		got[m[1]] = v
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("no BenchmarkServeMemory results in the output")
	}
	return got, nil
}

// serveMemoryRows are the serve memory rows, one per kind of MemoryKinds, target MemoryTarget.
func serveMemoryRows(ctx context.Context, log io.Writer) []Row {
	got, err := ServeMemory(ctx, log)
	if err != nil {
		return []Row{failedRow("serve cache memory", err, log)}
	}
	var rows []Row
	for _, kind := range MemoryKinds {
		metric := fmt.Sprintf("serve cache memory per object (%s, n=2000)", kind)
		v, ok := got[kind]
		if !ok {
			rows = append(rows, failedRow(metric, fmt.Errorf("no result for %s", kind), log))
			continue
		}
		rows = append(rows, Row{Metric: metric, Value: fmt.Sprintf("%.2f KiB", v), Target: memoryTargetText, OK: v*1024 <= MemoryTarget})
	}
	return rows
}
