// Command benchreport runs the test/bench measurements against a local control plane it starts
// itself and prints one `metric | value | baseline | ratio | target | ok` table, the unit
// benchmarks included. It exits 1 when a row misses its target or a measurement fails. With
// -json FILE it also writes the rows with the commit, date, arguments and verdict
// (test/bench/benchrun), from which benchtable renders docs/benchmarks.md's table.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/draforge/draforge/test/bench"
	"github.com/draforge/draforge/test/bench/benchrun"
)

func main() {
	cfg := bench.DefaultConfig()
	jsonOut := flag.String("json", "", "also write the run's rows, commit, date, arguments and verdict as JSON to this file (for `go tool task bench:table`)")
	keepDir := flag.String("keep", "", "also keep the -json record in this directory under its date and commit (docs/bench-runs: every full run is kept in the repository)")
	only := flag.String("only", "", "comma-separated phases to run: unit, memory, explain, alloc, churn, cost, publish, nodes, scale-publish, scale-nodes, workloads, gangs, replay (default all)")
	flag.IntVar(&cfg.PubNodes, "pub-nodes", cfg.PubNodes, "nodes for slice publication")
	flag.IntVar(&cfg.PubDevices, "pub-devices", cfg.PubDevices, "devices per node for slice publication")
	flag.IntVar(&cfg.AllocNodes, "alloc-nodes", cfg.AllocNodes, "nodes for claim allocation")
	flag.IntVar(&cfg.AllocDevices, "alloc-devices", cfg.AllocDevices, "devices per node for claim allocation")
	flag.IntVar(&cfg.AllocCount, "claims", cfg.AllocCount, "claims per allocation run")
	flag.Float64Var(&cfg.AllocLatencyRate, "alloc-rate", cfg.AllocLatencyRate, "claims/s at which the alloc phase's latency runs create claims (0: no latency runs)")
	flag.DurationVar(&cfg.SteadyWindow, "steady", cfg.SteadyWindow, "steady-state window")
	flag.Float64Var(&cfg.ChurnRate, "churn-rate", cfg.ChurnRate, "claims created per second under churn")
	flag.DurationVar(&cfg.ChurnDuration, "churn", cfg.ChurnDuration, "churn duration")
	flag.IntVar(&cfg.MemoryObjects, "memory-objects", cfg.MemoryObjects, "objects per kind for the memory measurement")
	flag.IntVar(&cfg.ExplainNodes, "explain-nodes", cfg.ExplainNodes, "nodes for the explain latency")
	flag.IntVar(&cfg.ExplainDevices, "explain-devices", cfg.ExplainDevices, "devices per node and driver for the explain latency")
	flag.IntVar(&cfg.SimNodes, "sim-nodes", cfg.SimNodes, "simulated nodes for the node heartbeat measurement")
	flag.DurationVar(&cfg.NodeWindow, "node-window", cfg.NodeWindow, "node heartbeat measurement window")
	scaleSizes := flag.String("scale-sizes", joinInts(cfg.Scale.PubSizes), "comma-separated node counts for scale-publish (publication at a high QPS, cold start; the largest also for process memory)")
	flag.IntVar(&cfg.Scale.Devices, "scale-devices", cfg.Scale.Devices, "devices per node in scale-publish")
	flag.IntVar(&cfg.Scale.QPS, "scale-qps", cfg.Scale.QPS, "client QPS of both sides in scale-publish")
	flag.IntVar(&cfg.Scale.Burst, "scale-burst", cfg.Scale.Burst, "client burst of both sides in scale-publish")
	flag.IntVar(&cfg.Scale.PubRounds, "scale-pub-rounds", cfg.Scale.PubRounds, "controller runs per size in scale-publish (raw runs bracket each; the rows compare medians)")
	flag.IntVar(&cfg.Scale.NodesPerPool, "scale-nodes-per-pool", cfg.Scale.NodesPerPool, "nodes per pool in the cold start")
	flag.IntVar(&cfg.Scale.Claims, "scale-claims", cfg.Scale.Claims, "claims allocated before the process memory is read")
	flag.IntVar(&cfg.Scale.SimNodes, "scale-sim-nodes", cfg.Scale.SimNodes, "simulated nodes in scale-nodes")
	flag.IntVar(&cfg.Scale.SimQPS, "scale-sim-qps", cfg.Scale.SimQPS, "controller QPS in scale-nodes")
	flag.IntVar(&cfg.Scale.SimBurst, "scale-sim-burst", cfg.Scale.SimBurst, "controller burst in scale-nodes")
	flag.DurationVar(&cfg.Scale.SimSettle, "scale-settle", cfg.Scale.SimSettle, "wait after every Lease is held before the scale-nodes window")
	flag.DurationVar(&cfg.Scale.Window, "scale-window", cfg.Scale.Window, "scale-nodes measurement window")
	flag.IntVar(&cfg.WorkloadNodes, "wl-nodes", cfg.WorkloadNodes, "nodes for the workloads phase (DRAForge vs KWOK)")
	flag.IntVar(&cfg.WorkloadDevices, "wl-devices", cfg.WorkloadDevices, "devices per node for the workloads phase")
	flag.IntVar(&cfg.WorkloadPods, "wl-pods", cfg.WorkloadPods, "pods for the workloads phase")
	flag.IntVar(&cfg.GangNodes, "gang-nodes", cfg.GangNodes, "nodes for the gangs phase (DRAForge vs KWOK, dra-all profile)")
	flag.IntVar(&cfg.GangDevices, "gang-devices", cfg.GangDevices, "devices per node, and per pod, for the gangs phase")
	flag.IntVar(&cfg.GangSize, "gang-size", cfg.GangSize, "pods per gang for the gangs phase")
	flag.IntVar(&cfg.Gangs, "gangs", cfg.Gangs, "gangs for the gangs phase")
	flag.IntVar(&cfg.WorkloadRounds, "wl-rounds", cfg.WorkloadRounds, "runs of each workloads side, interleaved (DRAForge, KWOK, KWOK, DRAForge, ...)")
	flag.IntVar(&cfg.Replay.Nodes, "replay-nodes", cfg.Replay.Nodes, "simulated nodes for the replay phase")
	flag.IntVar(&cfg.Replay.Jobs, "replay-jobs", cfg.Replay.Jobs, "jobs of the replay phase's generated trace")
	flag.Float64Var(&cfg.Replay.Speed, "replay-speed", cfg.Replay.Speed, "speed of the replay phase")
	flag.StringVar(&cfg.Replay.Model, "replay-model", cfg.Replay.Model, "trace model of the replay phase (draforge trace generate --model)")
	flag.DurationVar(&cfg.Replay.MaxDuration, "replay-max-duration", cfg.Replay.MaxDuration, "longest run of the replay phase's trace")
	flag.Parse()
	sizes, err := parseInts(*scaleSizes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport: -scale-sizes:", err)
		os.Exit(2)
	}
	cfg.Scale.PubSizes = sizes
	if *only != "" {
		cfg.Only = map[string]bool{}
		for _, p := range strings.Split(*only, ",") {
			cfg.Only[strings.TrimSpace(p)] = true
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var record *benchrun.Run
	if *jsonOut != "" {
		// The commit is read before the run, so the record names the code that was measured.
		commit, dirty, err := benchrun.Source(ctx, ".")
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport: -json:", err)
			os.Exit(2)
		}
		record = &benchrun.Run{Commit: commit, Dirty: dirty, Date: start.UTC().Truncate(time.Second), Args: os.Args[1:]}
	}
	rows, err := bench.Run(ctx, cfg, os.Stderr)
	fmt.Println()
	bench.Print(os.Stdout, rows)
	total := time.Since(start).Round(time.Second)
	fmt.Printf("\n(total %s)\n", total)
	verdict := bench.Verdict(rows, err)
	if record != nil {
		if err := writeRecord(*jsonOut, *keepDir, record, rows, total, verdict); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport: -json:", err)
			os.Exit(1)
		}
	}
	if verdict != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", verdict)
		os.Exit(1)
	}
}

// writeRecord completes r with the run's rows, duration and verdict and writes it to file,
// and to keepDir under benchrun.FileName when keepDir is set.
func writeRecord(file, keepDir string, r *benchrun.Run, rows []bench.Row, total time.Duration, verdict error) error {
	r.Duration = total.String()
	r.Verdict = "pass"
	if verdict != nil {
		r.Verdict = verdict.Error()
	}
	if r.Args == nil {
		r.Args = []string{}
	}
	for _, row := range rows {
		r.Rows = append(r.Rows, benchrun.Row{Metric: row.Metric, Value: row.Value, Baseline: row.Baseline, Ratio: row.Ratio,
			Target: row.Target, Result: row.Status(), Pass: row.Status() != "NO" && row.Status() != "FAILED"})
	}
	var buf bytes.Buffer
	if err := benchrun.Write(&buf, r); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		return err
	}
	if keepDir == "" {
		return nil
	}
	return benchrun.Keep(keepDir, r, buf.Bytes())
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
