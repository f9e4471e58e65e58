package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/snapshot"
)

func newSnapshot(kf *kubeFlags) *cobra.Command {
	var out string
	var anonymize bool
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Write a scenario that reproduces a cluster's DRA state on the simulator (read-only)",
		Long: `Read any cluster's DRA state and write a scenario that reproduces it on the simulator:
one SimulatedNodes document per group of nodes alike (the nodes' whole names, labels, taints and
allocatable), every ResourceSlice as written (devices, attributes, capacities, counter sets,
consumesCounters, taints, per-device node selection, binding conditions, pool generation), the
DeviceClasses and the DeviceTaintRules. Apply it to a fresh simulator with
'draforge scenario apply FILE'.

Read-only: it only lists Nodes, ResourceSlices, DeviceClasses, DeviceTaintRules and Namespaces
(list and get; no watch, no write). It never reads Secrets, ConfigMaps or pods, so no env
value is ever written. Node annotations and the taints the cluster puts on a node's condition
(node.kubernetes.io/*) are left out.

--anonymize renames nodes (node-<i>), namespaces (ns-<i>) and slices (slice-<i>) the same
everywhere they appear: node names, pool names, node selectors, devices' nodeName, taint rules.`,
		Example: `  draforge snapshot -o cluster.yaml
  draforge snapshot --anonymize --context prod > prod.yaml
  draforge scenario apply cluster.yaml   # on the simulator`,
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
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default standard output)")
	cmd.Flags().BoolVar(&anonymize, "anonymize", false, "rename nodes, namespaces and slices consistently")
	return cmd
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
