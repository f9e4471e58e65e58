package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/cmd/draforge/internal/output"
	"github.com/draforge/draforge/drivers/inventory"
)

// discoverResult is discover's JSON/YAML document.
type discoverResult struct {
	Pools    []inventory.PoolView `json:"pools"`
	Warnings []string             `json:"warnings,omitempty"`
}

func newDiscover(kf *kubeFlags) *cobra.Command {
	var out string
	var devices bool
	cmd := &cobra.Command{
		Use:   "discover",
		Short: "List DRA resource pools and their devices (per driver/pool/node)",
		Long: `List every DRA resource pool published in ResourceSlices: driver, pool, node, the
SimulatedDevicePool that published it, generation, slice count consistency, device counts and
health (from device taints). Pools are cluster-scoped: all are shown, unless -n is given, which
keeps the pools published by SimulatedDevicePools of that namespace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := output.Parse(out, output.Table, output.JSON, output.YAML)
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
			pools := inventory.Pools(s, devices || f != output.Table)
			if cmd.Flag("namespace").Changed {
				var kept []inventory.PoolView
				for _, p := range pools {
					if strings.HasPrefix(p.SDP, kf.namespace+"/") {
						kept = append(kept, p)
					}
				}
				pools = kept
			}
			res := discoverResult{Pools: pools, Warnings: s.Warnings}
			if res.Pools == nil {
				res.Pools = []inventory.PoolView{}
			}
			for _, w := range s.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			return output.Print(cmd.OutOrStdout(), f, res, func(t *output.TableWriter) {
				t.Row("DRIVER", "POOL", "NODE", "SDP", "GENERATION", "SLICES", "CONSISTENT", "DEVICES", "ALLOCATED", "TAINTED", "HEALTH")
				for _, p := range pools {
					slices := fmt.Sprintf("%d/%d", p.Slices, p.ResourceSliceCount)
					t.Row(p.Driver, p.Pool, p.Node, p.SDP, p.Generation, slices, p.Consistent, p.Devices, p.Allocated, p.Tainted, p.Health)
				}
				if devices {
					t.Row()
					t.Row("NODE", "DRIVER", "POOL", "DEVICE", "HEALTHY", "TAINTS", "ALLOCATED-TO")
					for _, p := range pools {
						for _, d := range p.DeviceList {
							t.Row(d.Node, d.Driver, d.Pool, d.Name, d.Healthy, strings.Join(d.Taints, ","), strings.Join(d.AllocatedTo, ","))
						}
					}
				}
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "table", "table, json or yaml")
	cmd.Flags().BoolVar(&devices, "devices", false, "also list every device (json and yaml always include them)")
	return cmd
}
