package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/drivers/replay"
	"github.com/draforge/draforge/drivers/trace"
)

func newReplay(kf *kubeFlags) *cobra.Command {
	var (
		speed    float64
		deadline time.Duration
		out      string
		groupBy  string
		keep     bool
		compare  bool
	)
	cmd := &cobra.Command{
		Use:   "replay TRACE | replay --compare RUN_A RUN_B",
		Short: "Replay a workload trace faster than real time and report waits, utilization and what never fit",
		Long: `Submit the jobs of a workload trace (a WorkloadTrace document: schemas/trace.cue, docs/replay.md)
at their arrival times divided by --speed, each a batch/v1 Job of N pods holding M devices of a
class through a ResourceClaimTemplate, running for its duration divided by --speed. The real
kube-scheduler places them (and Kueue admits them when a job names a queue; a gang is a PodGroup,
which needs the dra-all profile). Every pod bind and Job end is recorded in simulated time.

When every job has ended (or at --deadline) it writes into --out: record.json (the record and its
summary), jobs.csv, samples.csv and report.html, one self-contained page: device utilization by
node group, pending and running pods, devices held by class, queue wait p50/p90/p99 by queue and
by job size, gang waits, free devices while pods pend, and the jobs that never started with
kube-scheduler's reason. It deletes the Jobs it created unless --keep.

A trace's faults and faultCampaigns (docs/your-cluster.md) are set on their SimulatedDevicePools'
spec.faults at their simulated times divided by --speed, next to the pools' own faults, and
cleared at theirs; whatever is still set when the replay ends is removed (unless --keep), and a
pool's own fault a replay fault replaced is put back. Every fault is checked against its pool
before anything is submitted. The report then has a faults section and faults.csv: when each was
applied and cleared, the taint its devices got, the jobs holding them and what became of them,
the jobs that waited while devices were unavailable, and devices unavailable over time.

--compare RUN_A RUN_B puts two runs (their --out directories) side by side in one page, with how
their jobs' start order and waits differ: the same trace at 1x and 60x measures the error of
compressing time.`,
		Example: `  draforge scenario apply -f examples/simulated-nodes.yaml -f examples/traces/small-cluster.yaml
  draforge replay examples/traces/small.yaml --speed 60 --out .draforge/replay/small-60x
  draforge replay --compare .draforge/replay/small-1x .draforge/replay/small-60x`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if compare {
				if len(args) != 2 {
					return fmt.Errorf("--compare takes two run directories")
				}
				return compareRuns(cmd, args[0], args[1], out)
			}
			if len(args) != 1 {
				return fmt.Errorf("replay takes one trace file")
			}
			src, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			t, err := trace.Decode(args[0], src)
			if err != nil {
				return err
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			w := cmd.ErrOrStderr()
			faults := ""
			if t.HasFaults() {
				faults = fmt.Sprintf(", %d faults and %d fault campaigns", len(t.Faults), len(t.Campaigns))
			}
			fmt.Fprintf(w, "replaying %s: %d jobs over %s simulated%s, at %gx (about %s)\n", args[0], len(t.Jobs), t.Span(), faults, speed, trace.Compress(t.Span(), speed).Round(time.Second))
			rec, err := replay.Run(cmd.Context(), c.Kube, t, replay.Options{Speed: speed, Deadline: deadline, GroupBy: groupBy, Keep: keep,
				Log: func(f string, a ...any) { fmt.Fprintf(w, f+"\n", a...) }, Dynamic: c.Dynamic})
			if rec == nil {
				return err
			}
			if out == "" {
				out = filepath.Join(".draforge", "replay", rec.Run)
			}
			if werr := replay.WriteFiles(out, rec); werr != nil {
				return werr
			}
			s := replay.Summarize(rec)
			fmt.Fprintf(cmd.OutOrStdout(), "%d jobs: %d started, %d finished, %d never started; wait p50 %s p90 %s p99 %s (simulated); %s simulated in %s (%s)\n",
				s.Jobs, s.Started, s.Finished, len(s.NeverStarted), s.Wait.P50.Round(time.Second), s.Wait.P90.Round(time.Second), s.Wait.P99.Round(time.Second),
				rec.Simulated.Round(time.Second), rec.Wall.Round(time.Millisecond), rec.Ended)
			if f := s.Faults; f != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "faults: %d of %d applied, %d cleared, %d failed; %d jobs held a faulted device, %d waited while up to %d devices were unavailable\n",
					f.Applied, f.Faults, f.Cleared, f.Failed, len(f.Hit), len(f.Delayed), f.PeakUnavailable)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(out, "report.html"))
			return err
		},
	}
	f := cmd.Flags()
	f.Float64Var(&speed, "speed", 60, "simulated seconds per wall second")
	f.DurationVar(&deadline, "deadline", 0, "stop after this wall time even if jobs are left (0: none)")
	f.StringVarP(&out, "out", "o", "", "directory for the record and report (default .draforge/replay/RUN)")
	f.StringVar(&groupBy, "group-by", "", "node label to group devices by (default: one group)")
	f.BoolVar(&keep, "keep", false, "leave the replay's Jobs and claim templates in the cluster")
	f.BoolVar(&compare, "compare", false, "compare two runs' directories in one report instead of replaying")
	return cmd
}

func compareRuns(cmd *cobra.Command, a, b, out string) error {
	var recs []*replay.Record
	for _, dir := range []string{a, b} {
		r, err := replay.ReadRecord(filepath.Join(dir, "record.json"))
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	if out == "" {
		out = filepath.Join(".draforge", "replay", "compare-"+recs[0].Run+"-"+recs[1].Run)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(out, "compare.html")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := replay.WriteHTML(f, recs...); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	c := replay.Compare(recs[0], recs[1])
	fmt.Fprintf(cmd.OutOrStdout(), "%d jobs started in both; same start order: %v; wait difference max %s (%s), mean %s (simulated)\n",
		c.Jobs, c.SameOrder, c.MaxWaitDiff.Round(time.Second), c.Worst, c.MeanWaitDiff.Round(time.Second))
	if f := c.Faults; f != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "faults applied %d / %d, cleared %d / %d; jobs holding a faulted device %d / %d; jobs waiting while devices were unavailable %d / %d\n",
			f[0].Applied, f[1].Applied, f[0].Cleared, f[1].Cleared, f[0].JobsHit, f[1].JobsHit, f[0].Delayed, f[1].Delayed)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", path)
	return nil
}
