package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/drivers/trace"
)

func newTrace() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Make workload traces for 'draforge replay'",
	}
	cmd.AddCommand(newTraceGenerate())
	return cmd
}

func newTraceGenerate() *cobra.Command {
	var (
		model string
		out   string
		o     trace.GenerateOptions
	)
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write a synthetic workload trace that follows a published GPU cluster's statistics",
		Long: `Write a WorkloadTrace (schemas/trace.cue) of --jobs jobs whose sizes (GPUs per job), run times
and arrivals follow a published GPU cluster trace:

  helios  SenseTime's Helios (Hu et al., SC '21): sizes and run times as the Acme trace's
          authors plot them for Helios (InternLM/AcmeTrace), arrivals per hour of the day
          from the Helios artifact (S-Lab-System-Group/HeliosArtifact); median run 206 s.
  philly  Microsoft's Philly (Jeon et al., USENIX ATC '19): sizes and run times as plotted in
          InternLM/AcmeTrace, its mean rate from msr-fiddle/philly-traces (no hour-of-day
          pattern is published, so arrivals are even); median run 874 s.

Arrivals are a Poisson process at the model's rate for each hour of the day, spread over --span
(default: as long as the model's cluster took to submit as many jobs). A job larger than
--devices-per-node is split into pods of that many devices (a gang with --gangs, which needs
the dra-all profile). Published traces have jobs that run for weeks: --max-duration cuts them.
The same flags and --seed write the same trace; its header says how it was made.`,
		Example: `  draforge trace generate --model helios --jobs 10000 --max-duration 6h -o helios-10k.yaml
  draforge replay helios-10k.yaml --speed 60`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, ok := trace.Models[model]
			if !ok {
				return fmt.Errorf("--model %q: one of %s", model, strings.Join(modelNames(), ", "))
			}
			doc, g, err := trace.Generate(m, o)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(doc)
			} else {
				err = os.WriteFile(out, doc, 0o644)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d jobs (%d pods, %d devices) arriving over %s; median run %s; %d run times cut to --max-duration; by GPUs: %s\n",
				g.Jobs, g.Pods, g.Devices, g.Span, g.MedianDuration, g.Cut, bySize(g.BySize))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "helios", "published trace to follow: "+strings.Join(modelNames(), ", "))
	f.IntVar(&o.Jobs, "jobs", 1000, "jobs in the trace (1 to 100,000)")
	f.DurationVar(&o.Span, "span", 0, "time the arrivals are spread over (0: the model's own rate)")
	f.IntVar(&o.StartHour, "start-hour", 0, "hour of the day the trace starts at, in the model's time")
	f.IntVar(&o.DevicesPerNode, "devices-per-node", 8, "most devices per pod: larger jobs are split into pods of this many")
	f.DurationVar(&o.MaxDuration, "max-duration", 0, "cut longer run times to this (0: none)")
	f.BoolVar(&o.Gangs, "gangs", false, "make every job of several pods a gang (a PodGroup; the dra-all profile)")
	f.StringVar(&o.Name, "name", "", "the trace's name (default MODEL-JOBS)")
	f.StringVar(&o.Namespace, "namespace", "draforge-replay", "namespace the jobs run in")
	f.StringVar(&o.DeviceClass, "device-class", "draforge-replay-gpu", "device class every job asks for")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed")
	f.StringVarP(&out, "out", "o", "", "file to write (default: standard output)")
	return cmd
}

func modelNames() []string {
	var names []string
	for n := range trace.Models {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func bySize(m map[int]int) string {
	var sizes []int
	for s := range m {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	parts := make([]string, len(sizes))
	for i, s := range sizes {
		parts[i] = fmt.Sprintf("%d×%d", m[s], s)
	}
	return strings.Join(parts, " ")
}
