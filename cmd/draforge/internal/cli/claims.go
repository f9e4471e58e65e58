package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/cmd/draforge/internal/output"
	"github.com/draforge/draforge/drivers/inventory"
)

func newClaims(kf *kubeFlags) *cobra.Command {
	var out string
	var all bool
	cmd := &cobra.Command{
		Use:   "claims",
		Short: "List ResourceClaims with their requests, allocations and consumer pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := output.Parse(out, output.Table, output.JSON, output.YAML)
			if err != nil {
				return err
			}
			ns := ""
			if !all {
				if ns, err = kf.resolveNamespace(); err != nil {
					return err
				}
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			s, err := inventory.List(cmd.Context(), c.Clients, ns)
			if err != nil {
				return err
			}
			views := inventory.Claims(s)
			return output.Print(cmd.OutOrStdout(), f, views, func(t *output.TableWriter) {
				head := []any{"NAME", "STATE", "REQUESTS", "ALLOCATIONS", "NODE", "PODS", "RESERVED-FOR"}
				if all {
					head = append([]any{"NAMESPACE"}, head...)
				}
				t.Row(head...)
				for _, v := range views {
					var reqs, allocs []string
					for _, r := range v.Requests {
						for _, a := range r.Alternatives {
							n := a.AllocationMode
							if a.Count > 0 {
								n = fmt.Sprint(a.Count)
							}
							reqs = append(reqs, fmt.Sprintf("%s=%s×%s", a.Name, a.DeviceClassName, n))
						}
					}
					for _, a := range v.Allocations {
						allocs = append(allocs, a.String())
					}
					row := []any{v.Name, v.State, strings.Join(reqs, ","), strings.Join(allocs, ","), v.Node, strings.Join(v.Pods, ","), strings.Join(v.ReservedFor, ",")}
					if all {
						row = append([]any{v.Namespace}, row...)
					}
					t.Row(row...)
				}
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "table", "table, json or yaml")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list claims of every namespace")
	return cmd
}
