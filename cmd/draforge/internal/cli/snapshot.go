package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/snapshot"
)

func newSnapshot(kf *kubeFlags) *cobra.Command {
	var out, traceOut string
	var anonymize bool
	var traceDuration time.Duration
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Write a scenario that reproduces a cluster's DRA state on the simulator (read-only)",
		Long: `Read any cluster's DRA state and write a scenario that reproduces it on the simulator:
one SimulatedNodes document per group of nodes alike (the nodes' whole names, labels, taints and
allocatable), every ResourceSlice as written (devices, attributes, capacities, counter sets,
consumesCounters, taints, per-device node selection, binding conditions, pool generation), the
DeviceClasses and the DeviceTaintRules. Apply it to a fresh simulator with
'draforge scenario apply FILE'.

--trace FILE also writes the workloads in flight as a workload trace (see 'draforge replay'):
every Job that has not finished and every other group of running or pending pods with
ResourceClaims, grouped by their controller, as pods x devices of one class, running ones
first, then pending ones, with what is left of their run (the pods' draforge.oaslananka/run-for,
else the Job's activeDeadlineSeconds, else --trace-duration). What a trace cannot express
(devices of several classes, a request for all devices, a claim the pods share) is left out
and listed.

Read-only: it only lists Nodes, ResourceSlices, DeviceClasses, DeviceTaintRules and Namespaces,
and with --trace Jobs, pods, ResourceClaimTemplates and ResourceClaims (list and get; no
watch, no write). It never reads Secrets or ConfigMaps, and of pods it writes only their
counts, devices, start and run-for: no env value, command or image is ever written. Node
annotations and the taints the cluster puts on a node's condition (node.kubernetes.io/*) are
left out.

--anonymize renames nodes (node-<i>), namespaces (ns-<i>) and slices (slice-<i>) the same
everywhere they appear: node names, pool names, node selectors, devices' nodeName, taint rules;
in the trace, jobs (job-<i>) and queues (queue-<i>) too.`,
		Example: `  draforge snapshot -o cluster.yaml
  draforge snapshot --anonymize --context prod > prod.yaml
  draforge scenario apply cluster.yaml   # on the simulator
  draforge snapshot -o cluster.yaml --trace in-flight.yaml
  draforge replay in-flight.yaml --speed 60   # on the simulator, after the scenario`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := kf.clients()
			if err != nil {
				return err
			}
			cl, warnings, err := readCluster(cmd.Context(), c)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			docs, sum, err := snapshot.Documents(cl, snapshot.Options{Anonymize: anonymize})
			if err != nil {
				return err
			}
			server := c.cfg.Host
			if anonymize {
				server = "an anonymized cluster"
			}
			header := fmt.Sprintf("draforge snapshot of %s at %s\n%s\nApply to a fresh simulator: draforge scenario apply FILE",
				server, time.Now().UTC().Format(time.RFC3339), sum)
			var w io.Writer = cmd.OutOrStdout()
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			if err := snapshot.Write(w, header, docs); err != nil {
				return err
			}
			if out != "" && out != "-" {
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %s\n", out, sum)
			}
			if traceOut == "" {
				return nil
			}
			return writeInFlight(cmd, c, cl, snapshot.Options{Anonymize: anonymize}, traceOut, traceDuration)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default standard output)")
	cmd.Flags().BoolVar(&anonymize, "anonymize", false, "rename nodes, namespaces and slices consistently (and the trace's jobs and queues)")
	cmd.Flags().StringVar(&traceOut, "trace", "", "also write the workloads in flight as a workload trace to this file")
	cmd.Flags().DurationVar(&traceDuration, "trace-duration", time.Hour, "how long a workload in flight still runs when neither its pods' run-for nor its Job's activeDeadlineSeconds says")
	return cmd
}

// writeInFlight lists the workloads in flight and writes them as a trace to path.
func writeInFlight(cmd *cobra.Command, c *clients, cl snapshot.Cluster, o snapshot.Options, path string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--trace-duration %s: must be positive", d)
	}
	ctx := cmd.Context()
	w, err := readWorkloads(ctx, c)
	if err != nil {
		return err
	}
	doc, sum, err := snapshot.Trace(cl, w, o, snapshot.TraceOptions{Name: "in-flight", Duration: d})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("draforge snapshot: the workloads in flight at %s\n%s\nReplay on the simulator after the scenario: draforge replay FILE --speed 60",
		w.Now.UTC().Format(time.RFC3339), sum)
	if err := snapshot.Write(f, header, []snapshot.Document{doc}); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %s\n", path, sum)
	for _, l := range sum.LeftOut {
		fmt.Fprintln(cmd.ErrOrStderr(), "  left out:", l)
	}
	return nil
}

// readWorkloads lists what the trace of the workloads in flight is made of.
func readWorkloads(ctx context.Context, c *clients) (snapshot.Workloads, error) {
	w := snapshot.Workloads{Now: time.Now()}
	var err error
	batch, core, res := c.Kube.BatchV1(), c.Kube.CoreV1(), c.Kube.ResourceV1()
	if w.Jobs, err = listAll(ctx, "Jobs", func(o metav1.ListOptions) ([]batchv1.Job, string, error) {
		l, err := batch.Jobs(metav1.NamespaceAll).List(ctx, o)
		return page(err, func() ([]batchv1.Job, string) { return l.Items, l.Continue })
	}); err != nil {
		return w, err
	}
	if w.Pods, err = listAll(ctx, "Pods", func(o metav1.ListOptions) ([]corev1.Pod, string, error) {
		l, err := core.Pods(metav1.NamespaceAll).List(ctx, o)
		return page(err, func() ([]corev1.Pod, string) { return l.Items, l.Continue })
	}); err != nil {
		return w, err
	}
	if w.Templates, err = listAll(ctx, "ResourceClaimTemplates", func(o metav1.ListOptions) ([]resourcev1.ResourceClaimTemplate, string, error) {
		l, err := res.ResourceClaimTemplates(metav1.NamespaceAll).List(ctx, o)
		return page(err, func() ([]resourcev1.ResourceClaimTemplate, string) { return l.Items, l.Continue })
	}); err != nil {
		return w, err
	}
	w.Claims, err = listAll(ctx, "ResourceClaims", func(o metav1.ListOptions) ([]resourcev1.ResourceClaim, string, error) {
		l, err := res.ResourceClaims(metav1.NamespaceAll).List(ctx, o)
		return page(err, func() ([]resourcev1.ResourceClaim, string) { return l.Items, l.Continue })
	})
	return w, err
}

// readCluster lists what a snapshot reads, a page of 500 at a time. DeviceTaintRules are
// optional: a cluster that does not serve them has none.
func readCluster(ctx context.Context, c *clients) (snapshot.Cluster, []string, error) {
	var cl snapshot.Cluster
	var warnings []string
	var err error
	core, res := c.Kube.CoreV1(), c.Kube.ResourceV1()
	if cl.Nodes, err = listAll(ctx, "Nodes", func(o metav1.ListOptions) ([]corev1.Node, string, error) {
		l, err := core.Nodes().List(ctx, o)
		return page(err, func() ([]corev1.Node, string) { return l.Items, l.Continue })
	}); err != nil {
		return cl, nil, err
	}
	if cl.Slices, err = listAll(ctx, "ResourceSlices", func(o metav1.ListOptions) ([]resourcev1.ResourceSlice, string, error) {
		l, err := res.ResourceSlices().List(ctx, o)
		return page(err, func() ([]resourcev1.ResourceSlice, string) { return l.Items, l.Continue })
	}); err != nil {
		return cl, nil, err
	}
	if cl.Classes, err = listAll(ctx, "DeviceClasses", func(o metav1.ListOptions) ([]resourcev1.DeviceClass, string, error) {
		l, err := res.DeviceClasses().List(ctx, o)
		return page(err, func() ([]resourcev1.DeviceClass, string) { return l.Items, l.Continue })
	}); err != nil {
		return cl, nil, err
	}
	cl.TaintRules, err = listAll(ctx, "DeviceTaintRules", func(o metav1.ListOptions) ([]resourcev1.DeviceTaintRule, string, error) {
		l, err := res.DeviceTaintRules().List(ctx, o)
		return page(err, func() ([]resourcev1.DeviceTaintRule, string) { return l.Items, l.Continue })
	})
	if apierrors.IsNotFound(err) {
		warnings = append(warnings, "the cluster serves no DeviceTaintRules: none written")
	} else if err != nil {
		return cl, nil, err
	}
	namespaces, err := listAll(ctx, "Namespaces", func(o metav1.ListOptions) ([]corev1.Namespace, string, error) {
		l, err := core.Namespaces().List(ctx, o)
		return page(err, func() ([]corev1.Namespace, string) { return l.Items, l.Continue })
	})
	if err != nil {
		return cl, nil, err
	}
	for _, ns := range namespaces {
		cl.Namespaces = append(cl.Namespaces, ns.Name)
	}
	return cl, warnings, nil
}

// listAll lists every page of one kind.
func listAll[T any](ctx context.Context, what string, list func(metav1.ListOptions) ([]T, string, error)) ([]T, error) {
	var out []T
	opts := metav1.ListOptions{Limit: 500}
	for {
		page, next, err := list(opts)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		out = append(out, page...)
		if opts.Continue = next; next == "" || ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
}

// page reads a page's items and continue token once its List call succeeded.
func page[T any](err error, read func() ([]T, string)) ([]T, string, error) {
	if err != nil {
		return nil, "", err
	}
	t, next := read()
	return t, next, nil
}
