package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one line of the report. Ratio is Value/Baseline when a baseline exists; OK compares
// the ratio (or the value when there is no baseline) with the target.
type Row struct {
	Metric   string
	Value    string
	Baseline string
	Ratio    string
	Target   string
	OK       bool
	// Skip marks a row that could not be measured (OK is then meaningless).
	Skip bool
	// Failed marks a measurement that errored: its target was not shown to be met.
	Failed bool
}

// Status is the row's ok column: FAILED (the measurement failed), n/a (not measured), NO (the
// target was missed) or yes.
func (r Row) Status() string {
	switch {
	case r.Failed:
		return "FAILED"
	case r.Skip:
		return "n/a"
	case !r.OK:
		return "NO"
	}
	return "yes"
}

// Missed returns the rows whose target was not met: a measured row that is not OK, and a
// measurement that failed. `go tool task bench` exits non-zero when any row is returned.
func Missed(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Failed || (!r.Skip && !r.OK) {
			out = append(out, r)
		}
	}
	return out
}

// Verdict is the run's outcome for its exit status: the run's own error, else an error naming
// every row that missed its target, else nil.
func Verdict(rows []Row, runErr error) error {
	if runErr != nil {
		return runErr
	}
	missed := Missed(rows)
	if len(missed) == 0 {
		return nil
	}
	names := make([]string, len(missed))
	for i, r := range missed {
		names[i] = r.Metric
	}
	return fmt.Errorf("%d row(s) missed their target: %s", len(missed), strings.Join(names, "; "))
}

// Print writes rows as a `metric | value | baseline | ratio | target | ok` table.
func Print(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "metric\t| value\t| baseline\t| ratio\t| target\t| ok")
	fmt.Fprintln(tw, "---\t| ---\t| ---\t| ---\t| ---\t| ---")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t| %s\t| %s\t| %s\t| %s\t| %s\n", r.Metric, dash(r.Value), dash(r.Baseline), dash(r.Ratio), dash(r.Target), r.Status())
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Config sizes a run.
type Config struct {
	PubNodes, PubDevices                 int
	AllocNodes, AllocDevices, AllocCount int
	CostPools, CostNodesPer, CostClaims  int
	SteadyWindow                         time.Duration
	ChurnRate                            float64
	ChurnDuration                        time.Duration
	MemoryObjects                        int
	ExplainNodes, ExplainDevices         int
	SimNodes                             int
	NodeWindow                           time.Duration
	// AllocLatencyRate is the claims/s at which the alloc phase's latency runs create claims
	// (0: no latency runs).
	AllocLatencyRate float64
	// Scale sizes the scale-publish and scale-nodes phases (see scale.go).
	Scale ScaleConfig
	// Workload* size the DRAForge-vs-KWOK workloads phase (scheduler_perf's shape).
	WorkloadNodes, WorkloadDevices, WorkloadPods int
	// WorkloadRounds is how many times each workloads side runs, interleaved D K K D …
	WorkloadRounds int
	// Gang* size the gangs phase: Gangs PodGroups of GangSize pods, each pod a whole node's
	// GangDevices devices, on GangNodes nodes, on the dra-all profile (issue 31).
	GangNodes, GangDevices, GangSize, Gangs int
	// Replay sizes the replay phase (replay.go).
	Replay ReplayConfig
	// Only, when non-empty, selects phases: unit, publish, alloc, churn, cost, memory, explain,
	// nodes, scale-publish, scale-nodes, workloads, gangs, replay.
	Only map[string]bool
}

// DefaultConfig is the size of the proof issue's benchmarks.
func DefaultConfig() Config {
	return Config{
		PubNodes: 1000, PubDevices: 8,
		AllocNodes: 500, AllocDevices: 10, AllocCount: 500, AllocLatencyRate: 20,
		CostPools: 10, CostNodesPer: 10, CostClaims: 100,
		SteadyWindow: 60 * time.Second,
		ChurnRate:    20, ChurnDuration: 20 * time.Second,
		MemoryObjects: 2000,
		ExplainNodes:  1000, ExplainDevices: 8,
		SimNodes: 100, NodeWindow: 60 * time.Second,
		Scale:         DefaultScaleConfig(),
		WorkloadNodes: 500, WorkloadDevices: 10, WorkloadPods: 5000, WorkloadRounds: 2,
		GangNodes: 500, GangDevices: 8, GangSize: 8, Gangs: 60,
		Replay: DefaultReplayConfig(),
	}
}

func (c Config) run(phase string) bool { return len(c.Only) == 0 || c.Only[phase] }

// Run executes every phase and returns the report rows. A phase that fails adds a row saying
// so and the run goes on with the next.
func Run(ctx context.Context, cfg Config, log io.Writer) ([]Row, error) {
	var rows []Row
	fail := func(metric string, err error) {
		fmt.Fprintf(log, "bench: %s FAILED: %v\n", metric, err)
		rows = append(rows, Row{Metric: metric, Value: "failed: " + firstLine(err.Error()), Skip: true, Failed: true})
	}
	if cfg.run("unit") {
		r, err := UnitBenchmarks(ctx, log)
		if err != nil {
			fail("unit benchmarks", err)
		}
		rows = append(rows, r...)
	}
	if cfg.run("memory") {
		for _, kind := range ControllerMemoryKinds {
			b, err := MeasureMemory(ctx, kind, cfg.MemoryObjects)
			if err != nil {
				fail("cache memory per "+kind, err)
				continue
			}
			rows = append(rows, Row{Metric: fmt.Sprintf("cache memory per object (%s, n=%d)", kind, cfg.MemoryObjects),
				Value: fmt.Sprintf("%.2f KiB", b/1024), Target: memoryTargetText, OK: b <= MemoryTarget})
		}
		rows = append(rows, serveMemoryRows(ctx, log)...)
	}
	if cfg.run("explain") {
		if r, err := Explain(ctx, cfg.ExplainNodes, cfg.ExplainDevices, 3); err != nil {
			fail("explain latency", err)
		} else {
			rows = append(rows, Row{Metric: fmt.Sprintf("explain latency, pending claim (%d nodes x %d devices, 2 drivers, median of %d)", r.Nodes, r.Devices, r.Runs),
				Value: ms(r.Latency), Target: "<= " + ExplainTarget.String(), OK: r.Latency <= ExplainTarget})
		}
	}
	// The scale phases run on control planes of their own (see scale.go).
	if scaleRows, err := RunScale(ctx, cfg, log); err != nil {
		fail("scale phases", err)
	} else {
		rows = append(rows, scaleRows...)
	}
	if cfg.run("workloads") {
		r, err := runWorkloads(ctx, SchedulerPerfShape, cfg.WorkloadNodes, cfg.WorkloadDevices, cfg.WorkloadPods, cfg.WorkloadRounds, log)
		if err != nil {
			fail("workloads: DRAForge vs KWOK", err)
		} else {
			rows = append(rows, WorkloadRows(r)...)
		}
	}
	if cfg.run("gangs") {
		r, err := runWorkloads(ctx, GangShape(cfg), cfg.GangNodes, cfg.GangDevices, cfg.Gangs*cfg.GangSize, cfg.WorkloadRounds, log)
		if err != nil {
			fail("gangs: DRAForge vs KWOK", err)
		} else {
			rows = append(rows, GangRows(r)...)
		}
	}
	if cfg.run("replay") {
		r, err := runReplay(ctx, cfg.Replay, log)
		if err != nil {
			fail("replay", err)
		} else {
			rows = append(rows, r...)
		}
	}
	if !cfg.run("publish") && !cfg.run("alloc") && !cfg.run("churn") && !cfg.run("cost") && !cfg.run("nodes") {
		return rows, nil
	}

	dir, err := os.MkdirTemp("", "draforge-bench-")
	if err != nil {
		return rows, err
	}
	defer os.RemoveAll(dir)
	e, err := Start(ctx, dir, log)
	if err != nil {
		return rows, err
	}
	defer e.Stop()

	// Nodes: the allocation phases see exactly AllocNodes nodes; the rest are added before
	// publication, which sees PubNodes.
	allocSel := map[string]string{"bench.draforge/alloc": "true"}
	pubSel := map[string]string{"bench.draforge/pub": "true"}
	if cfg.run("publish") || cfg.run("alloc") || cfg.run("churn") || cfg.run("cost") {
		fmt.Fprintf(log, "bench: creating %d nodes\n", cfg.AllocNodes)
		if err := e.CreateNodes(ctx, 0, cfg.AllocNodes, map[string]string{"bench.draforge/alloc": "true", "bench.draforge/pub": "true"}); err != nil {
			return rows, err
		}
	}
	allocReady := false
	if cfg.run("alloc") || cfg.run("churn") || cfg.run("cost") {
		if err := e.AllocSetup(ctx, "bench-alloc", cfg.AllocNodes, cfg.AllocDevices, allocSel); err != nil {
			fail("allocation pool setup", err)
		} else {
			allocReady = true
		}
	}
	if cfg.run("alloc") && allocReady {
		if r, err := e.Allocation(ctx, cfg.AllocNodes, cfg.AllocDevices, cfg.AllocCount, cfg.AllocLatencyRate); err != nil {
			fail("claim allocation", err)
		} else {
			rows = append(rows, AllocRows(r)...)
		}
	}
	if cfg.run("churn") && allocReady {
		if r, err := e.Churn(ctx, cfg.ChurnRate, cfg.ChurnDuration); err != nil {
			fail("allocation latency under churn", err)
		} else {
			label := fmt.Sprintf("(%.0f claims/s for %s, n=%d)", r.Rate, r.Duration, r.Samples)
			rows = append(rows,
				Row{Metric: "allocation latency p50 under churn " + label, Value: ms(r.P50), Target: "report", OK: true},
				Row{Metric: "allocation latency p99 under churn " + label, Value: ms(r.P99), Target: "report", OK: true},
			)
		}
	}
	if cfg.run("cost") && allocReady {
		first := cfg.AllocNodes - cfg.CostPools*cfg.CostNodesPer
		if r, err := e.Cost(ctx, cfg.CostPools, cfg.CostNodesPer, 4, max(first, 0), cfg.CostClaims, cfg.SteadyWindow); err != nil {
			fail("API cost", err)
		} else {
			objs := float64(r.Pools + r.Claims)
			label := fmt.Sprintf("(%d pools/%d slices + %d claims)", r.Pools, r.Slices, r.Claims)
			rows = append(rows,
				Row{Metric: "API cost, cold start: requests per object " + label, Value: fmt.Sprintf("%.2f (%s)", r.Cold.Total()/objs, r.Cold),
					Target: "report", OK: true},
				Row{Metric: "API cost, cold start: writes per object " + label, Value: fmt.Sprintf("%.2f", r.Cold.Writes()/objs),
					Target: "report", OK: true},
				Row{Metric: "API cost, restart with nothing changed: writes", Value: fmt.Sprintf("%.0f (all requests: %s)", r.Restart.Writes(), r.Restart),
					Target: "0", OK: r.Restart.Writes() == 0},
				Row{Metric: fmt.Sprintf("API cost, steady state %s: writes", r.Window), Value: fmt.Sprintf("%.0f (all requests: %s)", r.Steady.Writes(), r.Steady),
					Target: "0", OK: r.Steady.Writes() == 0},
				Row{Metric: fmt.Sprintf("API cost, steady state %s: reconciles", r.Window), Value: fmt.Sprintf("%.0f", r.SteadySyncs),
					Target: "0", OK: r.SteadySyncs == 0},
			)
		}
	}
	if cfg.run("publish") {
		fmt.Fprintf(log, "bench: creating %d more nodes\n", cfg.PubNodes-cfg.AllocNodes)
		if err := e.CreateNodes(ctx, cfg.AllocNodes, cfg.PubNodes, map[string]string{"bench.draforge/pub": "true"}); err != nil {
			return rows, err
		}
		if r, err := e.Publish(ctx, cfg.PubNodes, cfg.PubDevices, pubSel); err != nil {
			fail("slice publication", err)
		} else {
			rows = append(rows, Row{Metric: fmt.Sprintf("slice publication: controller vs raw client-go loop (%d nodes x %d devices, %d slices)", r.Nodes, r.Devices, r.Slices),
				Value: sec(r.Controller), Baseline: fmt.Sprintf("%s (%s)", sec(r.Raw), r.runsText()), Ratio: ratio(r.Controller.Seconds(), r.Raw.Seconds()), Target: "<= 1.2",
				OK: r.Controller.Seconds()/r.Raw.Seconds() <= 1.2})
		}
	}
	if cfg.run("nodes") {
		if r, err := e.NodeHeartbeats(ctx, cfg.SimNodes, cfg.NodeWindow); err != nil {
			fail("simulated node heartbeats", err)
		} else {
			label := fmt.Sprintf("(%d simulated nodes, %s, kube-controller-manager running)", r.Nodes, r.Window.Round(time.Second))
			w := r.PerNodeMinute(r.Requests.Writes())
			rows = append(rows,
				Row{Metric: "node heartbeats: writes per node per minute " + label, Value: fmt.Sprintf("%.2f", w),
					Baseline: fmt.Sprintf("kubelet %.1f", KubeletWritesPerMinute), Ratio: ratio(w, KubeletWritesPerMinute), Target: "<= 1.1, all Ready",
					OK: w/KubeletWritesPerMinute <= 1.1 && w > 0 && r.NotReady == 0},
				Row{Metric: "node heartbeats: requests per node per minute " + label, Value: fmt.Sprintf("%.2f (%s)", r.PerNodeMinute(r.Requests.Total()), r.Requests),
					Baseline: fmt.Sprintf("kubelet %.1f", KubeletRequestsPerMinute), Ratio: ratio(r.PerNodeMinute(r.Requests.Total()), KubeletRequestsPerMinute), Target: "report", OK: true},
			)
		}
	}
	return rows, nil
}

// AllocRows are the alloc phase's rows. Each mode of the controller is compared with
// kube-scheduler allocating the claims of plain pods in two ways: per claim (claims/s: the rate
// a user feels, whatever each claim costs) and per API write (claims/s x measured writes per
// claim: equal work). Latency is from rows of its own, at a steady rate below every side's
// throughput.
func AllocRows(r *AllocResult) []Row {
	label := fmt.Sprintf("(%d claims, %d nodes x %d devices)", r.Claims, r.Nodes, r.Devices)
	plainWrites := fmt.Sprintf("kube-scheduler with plain pods %.1f writes/s (%.2f writes/claim: %s)", r.SchedulerWrites(), r.WritesPerClaim(r.SchedulerReqs), writesOnly(r.SchedulerReqs))
	rows := []Row{
		{Metric: "allocation per claim, the rate a user feels: simulator mode (--allocator simulator) vs kube-scheduler with plain pods, claims/s (unequal work: writes per claim in the next row) " + label,
			Value: fmt.Sprintf("%.1f claims/s", r.Controller), Baseline: fmt.Sprintf("kube-scheduler with plain pods %.1f claims/s", r.Scheduler),
			Ratio: ratio(r.Controller, r.Scheduler), Target: "report", OK: true},
		{Metric: "allocation per API write (equal work): simulator mode vs kube-scheduler with plain pods, claims/s x measured writes per claim " + label,
			Value:    fmt.Sprintf("%.1f writes/s (%.2f writes/claim: %s)", r.ControllerWrites(), r.WritesPerClaim(r.ControllerReqs), writesOnly(r.ControllerReqs)),
			Baseline: plainWrites,
			Ratio:    ratio(r.ControllerWrites(), r.SchedulerWrites()), Target: ">= 1.0",
			OK: r.SchedulerWrites() > 0 && r.ControllerWrites()/r.SchedulerWrites() >= 1.0},
		{Metric: "allocation: simulator mode vs raw UpdateStatus " + label, Value: fmt.Sprintf("%.1f claims/s", r.Controller),
			Baseline: fmt.Sprintf("%.1f claims/s", r.Raw), Ratio: ratio(r.Controller, r.Raw), Target: "report", OK: true},
	}
	if r.Default > 0 {
		dl := fmt.Sprintf("(%d claims created at once while controller, kube-scheduler and kube-controller-manager run, %d nodes x %d devices)", r.Claims, r.Nodes, r.Devices)
		rows = append(rows,
			Row{Metric: "allocation per claim, the rate a user feels: default mode (--allocator kube-scheduler: an allocation pod per claim) vs kube-scheduler with plain pods, claims/s " + dl,
				Value: fmt.Sprintf("%.1f claims/s", r.Default), Baseline: fmt.Sprintf("kube-scheduler with plain pods %.1f claims/s", r.Scheduler),
				Ratio: ratio(r.Default, r.Scheduler), Target: fmt.Sprintf(">= %.1f", DefaultPerClaimTarget),
				OK: r.Scheduler > 0 && r.Default/r.Scheduler >= DefaultPerClaimTarget},
			Row{Metric: "allocation per API write (equal work): default mode vs kube-scheduler with plain pods, claims/s x measured writes per claim of the controller, kube-scheduler and kube-controller-manager " + dl,
				Value:    fmt.Sprintf("%.1f writes/s (%.2f writes/claim: %s)", r.DefaultWritesPerSecond(), r.WritesPerClaim(r.DefaultWrites()), writesOnly(r.DefaultWrites())),
				Baseline: plainWrites,
				Ratio:    ratio(r.DefaultWritesPerSecond(), r.SchedulerWrites()), Target: "report", OK: true},
		)
	}
	if r.LatencyRate > 0 {
		ll := fmt.Sprintf("(%d claims created one by one at %.0f claims/s while the agents run, %d nodes x %d devices)", r.Claims, r.LatencyRate, r.Nodes, r.Devices)
		plain := "kube-scheduler with plain pods (claim, then its pod) " + r.SchedulerLat.String()
		rows = append(rows, Row{Metric: "allocation latency, claim created to allocated, p50 / p99 (ratio of p99): simulator mode vs kube-scheduler with plain pods " + ll,
			Value: r.ControllerLat.String(), Baseline: plain, Ratio: ratio(r.ControllerLat.P99.Seconds(), r.SchedulerLat.P99.Seconds()),
			Target: "report", OK: true})
		if r.Default > 0 {
			rows = append(rows, Row{Metric: "allocation latency, claim created to allocated, p50 / p99 (ratio of p99): default mode vs kube-scheduler with plain pods " + ll,
				Value: r.DefaultLat.String(), Baseline: plain, Ratio: ratio(r.DefaultLat.P99.Seconds(), r.SchedulerLat.P99.Seconds()),
				Target: "report", OK: true})
		}
	}
	return rows
}

// DefaultPerClaimTarget is the least claims/s of the default mode against kube-scheduler with
// plain pods. Per claim the default mode asks kube-scheduler for a plain pod's work and adds the
// handoff: the controller's pod create, finalizer removal and pod delete, kube-controller-manager's
// reservedFor write and two Events, 11 writes against 5. Were API writes what limits both, it
// would reach 5/11 = 0.45 of plain pods; at 0.5 the handoff must overlap with scheduling rather
// than add to it. (The first two -only alloc runs measured 0.69 and 0.64.)
const DefaultPerClaimTarget = 0.5

// runWorkloads runs the workloads machinery with shape on control planes of its own, with a
// controller built for it, and returns the result.
func runWorkloads(ctx context.Context, shape WorkloadShape, nodes, devices, pods, rounds int, log io.Writer) (r *WorkloadsResult, err error) {
	err = withController(ctx, shape.Name, log, func(dir, bin string) error {
		r, err = Workloads(ctx, dir, bin, shape, nodes, devices, pods, rounds, log)
		return err
	})
	return r, err
}

// withController runs phase in a temporary directory holding a freshly built controller.
func withController(ctx context.Context, name string, log io.Writer, phase func(dir, bin string) error) error {
	dir, err := os.MkdirTemp("", "draforge-bench-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "draforge")
	if err := BuildController(ctx, bin, log); err != nil {
		return err
	}
	return phase(dir, bin)
}

// runReplay replays a generated trace at scale and measures the time-compression error.
func runReplay(ctx context.Context, c ReplayConfig, log io.Writer) (rows []Row, err error) {
	err = withController(ctx, "replay", log, func(dir, bin string) error {
		r, err := Replay(ctx, dir, bin, c, log)
		if err != nil {
			return err
		}
		cmp, err := CompressionError(ctx, dir, bin, c.Speed, log)
		if err != nil {
			return fmt.Errorf("time-compression error: %w", err)
		}
		rows = ReplayRows(r, cmp, ReplayTolerance)
		return nil
	})
	return rows, err
}

// ReplayTolerance is the time-compression error docs/your-cluster.md states: a job's wait at
// 60x within 30 simulated seconds of its wait at 1x (test/e2e's replayTolerance).
const ReplayTolerance = 30 * time.Second

// GangShape is the gangs phase's workload: every pod a whole node's devices, in gangs, on the
// dra-all profile (PodGroups are GenericWorkload, off by default in 1.37).
func GangShape(cfg Config) WorkloadShape {
	return WorkloadShape{Name: "gangs", Profile: "dra-all", DevicesPerPod: cfg.GangDevices, GangSize: cfg.GangSize}
}

// GangRows are the gangs phase's rows: gangs/s to all pods Running and what each node agent
// pays per pod, against KWOK on the same control plane, profile and devices.
func GangRows(r *WorkloadsResult) []Row {
	d, k := r.DRAForge, r.Kwok
	size := max(r.Shape.GangSize, 1)
	gangs := func(s *WorkloadSide) float64 { return s.Rate / float64(size) }
	label := fmt.Sprintf("(%d nodes x %d devices, %d gangs of %d pods x %d devices, profile %s, %d runs per side interleaved, totals)",
		r.Nodes, r.Devices, d.Pods/max(len(d.Runs), 1)/size, size, r.Shape.DevicesPerPod, r.Shape.Profile, max(len(d.Runs), 1))
	return []Row{
		// kube-scheduler's gang placement dominates both sides; the row says what it costs
		// with each agent, the target rows below what the agents themselves pay.
		{Metric: "gangs: gangs/s creation to all pods Running, DRAForge simulated nodes vs KWOK " + label,
			Value:    fmt.Sprintf("%.2f gangs/s (%.1f pods/s, bound %.1f/s)", gangs(d), d.Rate, d.Scheduled),
			Baseline: fmt.Sprintf("KWOK %.2f gangs/s (%.1f pods/s, bound %.1f/s)", gangs(k), k.Rate, k.Scheduled),
			Ratio:    ratio(d.Rate, k.Rate), Target: "report", OK: true},
		{Metric: "gangs: node agent API requests per pod on the work both agents do (all but Lease renewals) " + label,
			Value: fmt.Sprintf("%.2f", d.PodWorkPerPod()), Baseline: fmt.Sprintf("KWOK %.2f", k.PodWorkPerPod()),
			Ratio: ratio(d.PodWorkPerPod(), k.PodWorkPerPod()), Target: "<= 1.0", OK: k.PodWorkPerPod() > 0 && d.PodWorkPerPod()/k.PodWorkPerPod() <= 1.0},
		{Metric: "gangs: node agent API requests per pod, all, DRAForge vs KWOK " + label,
			Value:    fmt.Sprintf("%.2f (writes %.2f; %s)", d.PerPod(), float64(d.Requests.Writes())/float64(d.Pods), d.Requests),
			Baseline: fmt.Sprintf("KWOK %.2f (writes %.2f; %s)", k.PerPod(), float64(k.Requests.Writes())/float64(k.Pods), k.Requests),
			Ratio:    ratio(d.PerPod(), k.PerPod()), Target: "report", OK: true},
		{Metric: "gangs: node agent CPU per pod during the window, DRAForge vs KWOK " + label,
			Value: cpuPerPod(d), Baseline: "KWOK " + cpuPerPod(k), Ratio: ratio(perPod(d), perPod(k)), Target: "report", OK: true},
	}
}

// WorkloadRows are the workloads phase's rows: pods/s and requests per pod against KWOK (on the
// work both do, with Lease renewals apart), and pods/s against scheduler_perf's floor.
func WorkloadRows(r *WorkloadsResult) []Row {
	d, k := r.DRAForge, r.Kwok
	runs := ""
	if n := len(d.Runs); n > 1 {
		runs = fmt.Sprintf(", %d runs per side interleaved, totals", n)
	}
	label := fmt.Sprintf("(%d nodes x %d devices, %d pods from a ResourceClaimTemplate, scheduler_perf shape%s)", r.Nodes, r.Devices, d.Pods/max(len(d.Runs), 1), runs)
	return []Row{
		{Metric: "workloads: pods/s creation to Running, DRAForge simulated nodes vs KWOK " + label,
			Value: fmt.Sprintf("%.1f pods/s (bound %.1f/s%s)", d.Rate, d.Scheduled, runRates(d)), Baseline: fmt.Sprintf("KWOK %.1f pods/s (bound %.1f/s%s)", k.Rate, k.Scheduled, runRates(k)),
			Ratio: ratio(d.Rate, k.Rate), Target: ">= 1.0", OK: k.Rate > 0 && d.Rate/k.Rate >= 1.0},
		// Requests per pod on equal work: what both agents do for a pod. The Lease renewals get
		// a row of their own: they follow the clock (an agent that keeps its 10 s cadence under
		// load pays more of them per pod than one that falls behind). A claim status.devices
		// write counts here: the pool's driver, as the upstream DRA test driver scheduler_perf
		// runs, writes none (simdevice.PoolSpec.ReportsDeviceStatus).
		{Metric: "workloads: node agent API requests per pod on the work both agents do (pod status writes, reads, watches, claim status writes: all but the Lease renewals of the next row) " + label,
			Value:    fmt.Sprintf("%.2f", d.PodWorkPerPod()),
			Baseline: fmt.Sprintf("KWOK %.2f", k.PodWorkPerPod()),
			Ratio:    ratio(d.PodWorkPerPod(), k.PodWorkPerPod()), Target: "<= 1.0", OK: k.PodWorkPerPod() > 0 && d.PodWorkPerPod()/k.PodWorkPerPod() <= 1.0},
		{Metric: "workloads: Lease requests per node per minute during the window, DRAForge vs KWOK " + label,
			Value:    fmt.Sprintf("%.2f", d.LeasesPerNodeMinute(r.Nodes)),
			Baseline: fmt.Sprintf("KWOK %.2f; kubelet %.1f", k.LeasesPerNodeMinute(r.Nodes), KubeletLeasesPerMinute),
			Ratio:    ratio(d.LeasesPerNodeMinute(r.Nodes), k.LeasesPerNodeMinute(r.Nodes)), Target: "≥ 0.95× KWOK, ≤ 1.1× kubelet",
			OK: k.LeasesPerNodeMinute(r.Nodes) > 0 && d.LeasesPerNodeMinute(r.Nodes) >= 0.95*k.LeasesPerNodeMinute(r.Nodes) &&
				d.LeasesPerNodeMinute(r.Nodes) <= 1.1*KubeletLeasesPerMinute},
		// The rows above together, as issue 13 first put the target. DRAForge cannot reach
		// KWOK's total while it renews Leases at the kubelet's cadence and KWOK falls behind, so
		// it is reported.
		{Metric: "workloads: node agent API requests per pod, all, DRAForge (pod+node machines) vs KWOK (default stages, no DRA) " + label,
			Value:    fmt.Sprintf("%.2f (writes %.2f; %s)", d.PerPod(), float64(d.Requests.Writes())/float64(d.Pods), d.Requests),
			Baseline: fmt.Sprintf("KWOK %.2f (writes %.2f; %s)", k.PerPod(), float64(k.Requests.Writes())/float64(k.Pods), k.Requests),
			Ratio:    ratio(d.PerPod(), k.PerPod()), Target: "report", OK: true},
		{Metric: "workloads: DRAForge pods/s creation to Running vs scheduler_perf's floor for 5000pods_500nodes (its pods/s to bound) " + label,
			Value: fmt.Sprintf("%.1f pods/s", d.Rate), Baseline: fmt.Sprintf("%.0f pods/s (%s)", SchedulerPerfFloor, SchedulerPerfSources),
			// Shown against it, as issue 13 asks; not a target: scheduler_perf measures pods bound
			// by an in-process scheduler on a dedicated machine, this row pods Running with the
			// whole control plane and the agent on the same 2 cores.
			Ratio: ratio(d.Rate, SchedulerPerfFloor), Target: "report", OK: true},
		// On 2 cores the agent's CPU is taken from kube-scheduler: the agent may use no more per
		// pod than KWOK, which does no DRA work at all.
		{Metric: "workloads: node agent CPU per pod during the window, DRAForge vs KWOK " + label,
			Value: cpuPerPod(d), Baseline: "KWOK " + cpuPerPod(k), Ratio: ratio(perPod(d), perPod(k)), Target: "<= 1.0",
			OK: perPod(k) > 0 && perPod(d) <= perPod(k)},
		// On 2 cores kube-scheduler gets what the rest leaves: this row says what each side's
		// writes cost the control plane.
		{Metric: "workloads: control plane CPU during the window (etcd, kube-apiserver, kube-scheduler, kube-controller-manager), DRAForge vs KWOK " + label,
			Value: d.controlPlaneText(), Baseline: "KWOK " + k.controlPlaneText(),
			Ratio: ratio(d.ControlPlaneTotal().Seconds(), k.ControlPlaneTotal().Seconds()), Target: "report", OK: true},
	}
}

// runRates lists each run's pods/s when a side combines several.
func runRates(s *WorkloadSide) string {
	if len(s.Runs) < 2 {
		return ""
	}
	var parts []string
	for _, r := range s.Runs {
		parts = append(parts, fmt.Sprintf("%.1f", r))
	}
	return "; runs " + strings.Join(parts, ", ")
}

// writesOnly lists the mutating requests of c.
func writesOnly(c Counts) string {
	w := Counts{}
	for k, v := range c {
		if (Counts{k: v}).Writes() > 0 {
			w[k] = v
		}
	}
	return w.String()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func sec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// perPod is a side's agent CPU seconds per pod (0 without pods).
func perPod(s *WorkloadSide) float64 {
	if s.Pods == 0 {
		return 0
	}
	return s.CPU.Seconds() / float64(s.Pods)
}

// cpuPerPod shows a side's agent CPU per pod and in total.
func cpuPerPod(s *WorkloadSide) string {
	return fmt.Sprintf("%.2f ms/pod (%s for %d pods)", 1000*perPod(s), sec(s.CPU), s.Pods)
}
