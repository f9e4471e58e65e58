package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/replay"
	"github.com/draforge/draforge/drivers/scenario"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/drivers/trace"
	"github.com/draforge/draforge/test/cluster"
)

// ReplayConfig sizes the replay phase (issue 32): a synthetic trace of Jobs jobs following
// Model, replayed at Speed through kube-scheduler on Nodes simulated nodes of Devices devices.
type ReplayConfig struct {
	Nodes, Devices, Jobs int
	Model                string
	Speed                float64
	// MaxDuration cuts the model's longest runs (Helios has jobs of weeks), so the replay
	// ends soon after the last arrival.
	MaxDuration time.Duration
}

// DefaultReplayConfig is the scale: 10,000 jobs on 1,000 nodes × 8 GPUs at 60×. Helios
// submits 10,000 GPU jobs in about 27.5 hours: 27.5 minutes at 60×.
func DefaultReplayConfig() ReplayConfig {
	return ReplayConfig{Nodes: 1000, Devices: 8, Jobs: 10000, Model: "helios", Speed: 60, MaxDuration: 4 * time.Hour}
}

// ReplayResult is one replay of the generated trace.
type ReplayResult struct {
	Config  ReplayConfig
	Trace   *trace.Trace
	Record  *replay.Record
	Summary replay.Summary
	// LastArrival is the trace's last arrival; LastSubmitted when the replay submitted it
	// (simulated: wall time × speed).
	LastArrival, LastSubmitted time.Duration
	// SubmitLag are the percentiles of how late jobs were submitted (simulated).
	SubmitLagP50, SubmitLagP99 time.Duration
	// ControllerCPU is the DRAForge controller's CPU time during the replay; ControlPlane each
	// control-plane process's.
	ControllerCPU time.Duration
	ControlPlane  map[cluster.Component]time.Duration
}

// AchievedSpeed is simulated seconds per wall second up to the last submission: the speed
// asked for unless submitting fell behind the trace's clock.
func (r *ReplayResult) AchievedSpeed() float64 {
	if r.LastSubmitted <= 0 {
		return 0
	}
	return r.Config.Speed * float64(r.LastArrival) / float64(r.LastSubmitted)
}

// Replay generates the trace, starts a control plane with kube-scheduler and
// kube-controller-manager at WorkloadQPS, the nodes and their devices (a pool as in the
// workloads phase) and replays the trace in this process, as `draforge replay` does.
func Replay(ctx context.Context, dir, bin string, c ReplayConfig, log io.Writer) (*ReplayResult, error) {
	m, ok := trace.Models[c.Model]
	if !ok {
		return nil, fmt.Errorf("no trace model %q", c.Model)
	}
	doc, g, err := trace.Generate(m, trace.GenerateOptions{Jobs: c.Jobs, DevicesPerNode: c.Devices, MaxDuration: c.MaxDuration,
		Namespace: "bench-replay", DeviceClass: "bench-wl", Seed: 1})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	t, err := trace.Decode("generated.yaml", doc)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "bench: replay: %d jobs (%d pods, %d devices) over %s, %d runs cut to %s; read in %s\n",
		g.Jobs, g.Pods, g.Devices, g.Span, g.Cut, c.MaxDuration, time.Since(start).Round(time.Millisecond))
	qps := []string{"--kube-api-qps=" + strconv.Itoa(WorkloadQPS), "--kube-api-burst=" + strconv.Itoa(WorkloadQPS)}
	e, err := StartClusterProfile(ctx, filepath.Join(dir, "cluster"), bin, log,
		map[cluster.Component][]string{cluster.Scheduler: qps, cluster.ControllerManager: qps}, "")
	if err != nil {
		return nil, err
	}
	defer e.Stop()
	if err := e.workloadObjects(ctx, SchedulerPerfShape); err != nil {
		return nil, err
	}
	if err := simnode.Apply(ctx, e.SetupDyn, simnode.Spec{Prefix: "rp", Count: c.Nodes, Labels: workloadLabels}, nil); err != nil {
		return nil, err
	}
	q := strconv.Itoa(WorkloadQPS)
	ctl, err := e.StartControllerWith(ctx, e.Cluster.Kubeconfig, "--kube-api-qps", q, "--kube-api-burst", q)
	if err != nil {
		return nil, err
	}
	defer ctl.Stop()
	if err := e.waitNodesReady(ctx, c.Nodes); err != nil {
		return nil, err
	}
	if err := e.publishWorkloadDevices(ctx, ctl, c.Nodes, c.Devices); err != nil {
		return nil, err
	}
	cpuBefore, err := ProcessCPU(ctl.Pid)
	if err != nil {
		return nil, err
	}
	cpBefore := e.componentCPU(workloadControlPlane...)
	fmt.Fprintf(log, "bench: replay: %d jobs at %gx (about %s)\n", len(t.Jobs), c.Speed, trace.Compress(t.Span(), c.Speed).Round(time.Second))
	rec, err := replay.Run(ctx, e.Setup, t, replay.Options{Speed: c.Speed, Keep: true,
		// The longest run ends at most MaxDuration after the last arrival; a minute of slack.
		Deadline: trace.Compress(t.Span(), c.Speed) + time.Minute})
	if err != nil {
		return nil, err
	}
	cpuAfter, err := ProcessCPU(ctl.Pid)
	if err != nil {
		return nil, err
	}
	res := &ReplayResult{Config: c, Trace: t, Record: rec, Summary: replay.Summarize(rec),
		ControllerCPU: cpuAfter - cpuBefore, ControlPlane: map[cluster.Component]time.Duration{}}
	for comp, d := range e.componentCPU(workloadControlPlane...) {
		res.ControlPlane[comp] = d - cpBefore[comp]
	}
	var lags []time.Duration
	for _, j := range rec.Jobs {
		if j.Submitted == nil {
			continue
		}
		lags = append(lags, *j.Submitted-j.Arrival)
		if j.Arrival >= res.LastArrival {
			res.LastArrival, res.LastSubmitted = j.Arrival, *j.Submitted
		}
	}
	slices.Sort(lags)
	res.SubmitLagP50, res.SubmitLagP99 = quantile(lags, 0.50), quantile(lags, 0.99)
	fmt.Fprintf(log, "bench: replay: %s simulated in %s (%s): %d of %d jobs submitted (last at %s for %s), %d started, %d finished, %d never started; wait p50 %s p99 %s; submit lag p50 %s p99 %s; controller CPU %s, control plane %v\n",
		rec.Simulated.Round(time.Second), rec.Wall.Round(time.Second), rec.Ended, len(lags), len(t.Jobs), res.LastSubmitted.Round(time.Second), res.LastArrival.Round(time.Second),
		res.Summary.Started, res.Summary.Finished, len(res.Summary.NeverStarted), res.Summary.Wait.P50, res.Summary.Wait.P99,
		res.SubmitLagP50, res.SubmitLagP99, res.ControllerCPU.Round(10*time.Millisecond), res.ControlPlane)
	return res, nil
}

// CompressionError replays examples/traces/compression.yaml on its cluster at 1× and at
// speed (about three minutes) and compares the two: the time-compression error.
func CompressionError(ctx context.Context, dir, bin string, speed float64, log io.Writer) (replay.Comparison, error) {
	root, err := ModuleRoot()
	if err != nil {
		return replay.Comparison{}, err
	}
	src, err := os.ReadFile(filepath.Join(root, "examples", "traces", "compression.yaml"))
	if err != nil {
		return replay.Comparison{}, err
	}
	t, err := trace.Decode("compression.yaml", src)
	if err != nil {
		return replay.Comparison{}, err
	}
	e, err := StartClusterProfile(ctx, filepath.Join(dir, "compression-cluster"), bin, log, nil, "")
	if err != nil {
		return replay.Comparison{}, err
	}
	defer e.Stop()
	ctl, err := e.StartController(ctx)
	if err != nil {
		return replay.Comparison{}, err
	}
	defer ctl.Stop()
	if err := e.applyScenario(ctx, filepath.Join(root, "examples", "simulated-nodes.yaml"), filepath.Join(root, "examples", "traces", "small-cluster.yaml")); err != nil {
		return replay.Comparison{}, err
	}
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		u, err := e.SetupDyn.Resource(gvr.SimulatedDevicePools).Namespace("draforge-replay").Get(ctx, "replay-gpus", metav1.GetOptions{})
		return err == nil && PoolReady(u), nil
	}); err != nil {
		return replay.Comparison{}, fmt.Errorf("pool replay-gpus not Ready: %w", err)
	}
	var recs []*replay.Record
	for _, s := range []float64{1, speed} {
		rec, err := replay.Run(ctx, e.Setup, t, replay.Options{Speed: s})
		if err != nil {
			return replay.Comparison{}, fmt.Errorf("%gx: %w", s, err)
		}
		if rec.Ended != "complete" {
			return replay.Comparison{}, fmt.Errorf("%gx: ended %q", s, rec.Ended)
		}
		recs = append(recs, rec)
	}
	c := replay.Compare(recs[0], recs[1])
	fmt.Fprintf(log, "bench: compression.yaml %gx against 1x: %d jobs, same order %v, wait difference max %s (%s), mean %s\n",
		speed, c.Jobs, c.SameOrder, c.MaxWaitDiff, c.Worst, c.MeanWaitDiff)
	return c, nil
}

// ReplayRows are the replay phase's rows.
func ReplayRows(r *ReplayResult, c replay.Comparison, tolerance time.Duration) []Row {
	cfg := r.Config
	label := fmt.Sprintf("(%d %s jobs, %d nodes x %d devices, at %gx)", cfg.Jobs, cfg.Model, cfg.Nodes, cfg.Devices, cfg.Speed)
	simHours := r.Record.Simulated.Hours()
	var cp time.Duration
	for _, d := range r.ControlPlane {
		cp += d
	}
	speed := r.AchievedSpeed()
	return []Row{
		{Metric: "replay: simulated seconds per wall second up to the last arrival " + label,
			Value: fmt.Sprintf("%.1f (submit lag p50 %s, p99 %s simulated; %d of %d jobs started, wait p50 %s, p99 %s)",
				speed, r.SubmitLagP50.Round(time.Second), r.SubmitLagP99.Round(time.Second), r.Summary.Started, r.Summary.Jobs,
				r.Summary.Wait.P50.Round(time.Second), r.Summary.Wait.P99.Round(time.Second)),
			Target: fmt.Sprintf(">= %.0f", cfg.Speed*0.99), OK: speed >= cfg.Speed*0.99},
		{Metric: "replay: controller CPU " + label,
			Value: fmt.Sprintf("%.1f s per simulated hour (%.0f%% of a core; control plane %.0f%%)",
				r.ControllerCPU.Seconds()/simHours, 100*r.ControllerCPU.Seconds()/r.Record.Wall.Seconds(), 100*cp.Seconds()/r.Record.Wall.Seconds()),
			Target: "report", OK: true},
		{Metric: fmt.Sprintf("replay: time-compression error, examples/traces/compression.yaml at %gx against 1x", cfg.Speed),
			Value:  fmt.Sprintf("max %s, mean %s per job (%d jobs, same order %v)", c.MaxWaitDiff.Round(time.Millisecond), c.MeanWaitDiff.Round(time.Millisecond), c.Jobs, c.SameOrder),
			Target: "same order, <= " + tolerance.String(), OK: c.SameOrder && c.Jobs > 0 && c.MaxWaitDiff <= tolerance},
	}
}

// applyScenario applies scenario files as `draforge scenario apply -f` does.
func (e *Env) applyScenario(ctx context.Context, files ...string) error {
	var objs []scenario.Object
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		o, err := scenario.Decode(f, src, "default")
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	return scenario.Apply(ctx, e.SetupDyn, objs, true, func(scenario.Object, error) {})
}
