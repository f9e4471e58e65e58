package cli

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/cmd/draforge/internal/output"
	"github.com/draforge/draforge/drivers/explain"
	"github.com/draforge/draforge/drivers/inventory"
)

func newExplain(kf *kubeFlags) *cobra.Command {
	var out string
	var devices bool
	cmd := &cobra.Command{
		Use:   "explain [claim/]CLAIM | pod/POD | job/JOB",
		Short: "Explain why a ResourceClaim, Pod or Job is pending, per request, node and device (or which devices it holds)",
		Long: `Explain runs the same structured allocator as the controller over the cluster's
ResourceSlices, DeviceClasses, ResourceClaims (all namespaces, as they take devices) and Nodes,
and reports per request which devices match and why the others do not, per node whether the
whole claim fits, and remedies. The output is a summary: per request the devices excluded,
counted by reason, and the nodes grouped by what blocks them; --devices adds a line per device
and per node (and keeps the device lists in json and yaml output).

For pod/NAME it explains each of the pod's claims (spec.resourceClaims; claims generated from a
ResourceClaimTemplate are found through status.resourceClaimStatuses) the same way, adds the
reasons kube-scheduler wrote on the pod (its PodScheduled=False condition, for example
"0/3 nodes are available: 1 Insufficient cpu"), and for a scheduled pod lists the devices it
holds with their pool and node.

For job/NAME it shows Kueue's verdict on the Job (its LocalQueue, whether its Workload was
admitted and the Workload's conditions, such as "insufficient quota for ... in flavor ...")
beside kube-scheduler's on each of the Job's pods, explained as pod/NAME is.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := output.Parse(out, output.Table, output.JSON, output.YAML)
			if err != nil {
				return err
			}
			ns, err := kf.resolveNamespace()
			if err != nil {
				return err
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			s, err := inventory.List(cmd.Context(), c.Clients, "")
			if err != nil {
				return err
			}
			kind, name, err := explainTarget(args[0])
			if err != nil {
				return err
			}
			if kind == "job" {
				res, err := explainJob(cmd.Context(), c.Clients, s, ns, name)
				if err != nil {
					return err
				}
				if f == output.Table {
					return explain.RenderJob(cmd.OutOrStdout(), res, explain.RenderOptions{Devices: devices})
				}
				return output.Print(cmd.OutOrStdout(), f, res, nil)
			}
			if kind == "pod" {
				res, err := explain.ExplainPod(cmd.Context(), s, ns, name)
				if err != nil {
					return err
				}
				if f == output.Table {
					return explain.RenderPod(cmd.OutOrStdout(), res, explain.RenderOptions{Devices: devices})
				}
				return output.Print(cmd.OutOrStdout(), f, res, nil)
			}
			res, err := explain.Explain(cmd.Context(), s, ns, name)
			if err != nil {
				return err
			}
			if f == output.Table {
				return explain.Render(cmd.OutOrStdout(), res, explain.RenderOptions{Devices: devices})
			}
			if !devices {
				res = res.WithoutDevices()
			}
			return output.Print(cmd.OutOrStdout(), f, res, nil)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "table", "table (text), json or yaml")
	cmd.Flags().BoolVar(&devices, "devices", false, "show every device per request and every node (large on big clusters)")
	return cmd
}

// explainTarget splits "pod/NAME", "claim/NAME" (kubectl's resource spellings accepted) or a
// bare claim NAME into a kind ("pod", "claim" or "job") and a name.
func explainTarget(arg string) (kind, name string, err error) {
	res, name, found := strings.Cut(arg, "/")
	if !found {
		return "claim", arg, nil
	}
	if name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("explain %q: want [claim/]NAME, pod/NAME or job/NAME", arg)
	}
	switch strings.ToLower(res) {
	case "pod", "pods", "po":
		return "pod", name, nil
	case "claim", "claims", "resourceclaim", "resourceclaims", "resourceclaim.resource.k8s.io":
		return "claim", name, nil
	case "job", "jobs", "job.batch", "jobs.batch":
		return "job", name, nil
	}
	return "", "", fmt.Errorf("explain %q: unknown kind %q (want claim, pod or job)", arg, res)
}

// explainJob reads the Job and, where Kueue is installed, the Workloads of its namespace.
func explainJob(ctx context.Context, c inventory.Clients, s *inventory.Snapshot, ns, name string) (*explain.JobResult, error) {
	job, err := c.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	served := true
	list, err := c.Dynamic.Resource(kueueWorkloads).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		served, list = false, &unstructured.UnstructuredList{}
	case err != nil:
		return nil, fmt.Errorf("list Kueue workloads: %w", err)
	}
	return explain.ExplainJob(ctx, s, job, list.Items, served)
}

var kueueWorkloads = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
