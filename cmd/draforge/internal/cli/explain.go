package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/cmd/draforge/internal/output"
	"github.com/draforge/draforge/drivers/explain"
	"github.com/draforge/draforge/drivers/inventory"
)

func newExplain(kf *kubeFlags) *cobra.Command {
	var out string
	var devices bool
	cmd := &cobra.Command{
		Use:   "explain [claim/]CLAIM | pod/POD",
		Short: "Explain why a ResourceClaim or Pod is pending, per request, node and device (or which devices it holds)",
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
holds with their pool and node.`,
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
// bare claim NAME into a kind ("pod" or "claim") and a name.
func explainTarget(arg string) (kind, name string, err error) {
	res, name, found := strings.Cut(arg, "/")
	if !found {
		return "claim", arg, nil
	}
	if name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("explain %q: want [claim/]NAME or pod/NAME", arg)
	}
	switch strings.ToLower(res) {
	case "pod", "pods", "po":
		return "pod", name, nil
	case "claim", "claims", "resourceclaim", "resourceclaims", "resourceclaim.resource.k8s.io":
		return "claim", name, nil
	}
	return "", "", fmt.Errorf("explain %q: unknown kind %q (want claim or pod)", arg, res)
}
