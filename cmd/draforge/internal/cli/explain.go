package cli

import (
	"github.com/spf13/cobra"

	"github.com/draforge/draforge/cmd/draforge/internal/explain"
	"github.com/draforge/draforge/cmd/draforge/internal/inventory"
	"github.com/draforge/draforge/cmd/draforge/internal/output"
)

func newExplain(kf *kubeFlags) *cobra.Command {
	var out string
	var devices bool
	cmd := &cobra.Command{
		Use:   "explain CLAIM",
		Short: "Explain why a ResourceClaim is pending, per request, node and device (or where it is allocated)",
		Long: `Explain runs the same structured allocator as the controller over the cluster's
ResourceSlices, DeviceClasses, ResourceClaims (all namespaces, as they take devices) and Nodes,
and reports per request which devices match and why the others do not, per node whether the
whole claim fits, and remedies. The output is a summary: per request the devices excluded,
counted by reason, and the nodes grouped by what blocks them; --devices adds a line per device
and per node (and keeps the device lists in json and yaml output).`,
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
			res, err := explain.Explain(cmd.Context(), s, ns, args[0])
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
