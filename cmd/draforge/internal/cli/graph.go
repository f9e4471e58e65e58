package cli

import (
	"github.com/spf13/cobra"

	"github.com/draforge/draforge/cmd/draforge/internal/output"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/resourcegraph"
)

func newGraph(kf *kubeFlags) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "Print the graph of SimulatedDevicePools, pools, nodes, devices, classes, claims and pods",
		Long: `Graph covers all namespaces unless -n is given; with -n, cluster-scoped objects (pools,
nodes, devices, classes) appear only when an object of that namespace leads to them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := output.Parse(out, output.DOT, output.Mermaid, output.JSON)
			if err != nil {
				return err
			}
			ns := ""
			if cmd.Flag("namespace").Changed {
				ns = kf.namespace
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			s, err := inventory.List(cmd.Context(), c.Clients, ns)
			if err != nil {
				return err
			}
			g := resourcegraph.Build(s)
			switch f {
			case output.DOT:
				return g.DOT(cmd.OutOrStdout())
			case output.Mermaid:
				return g.Mermaid(cmd.OutOrStdout())
			}
			return output.WriteJSON(cmd.OutOrStdout(), g)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "dot", "dot, mermaid or json")
	return cmd
}
