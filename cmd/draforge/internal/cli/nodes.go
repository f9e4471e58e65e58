package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/draforge/draforge/drivers/scenario"
	"github.com/draforge/draforge/drivers/simnode"
)

func newNodes(kf *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "Create or delete simulated Nodes (a SimulatedNodes document given as flags)",
	}
	cmd.AddCommand(newNodesApply(kf), newNodesDelete(kf))
	return cmd
}

// nodeFlags are a SimulatedNodes spec as flags.
type nodeFlags struct {
	prefix, lease, status string
	count, start          int
	names, labels, taints []string
	alloc                 map[string]string
}

func (f *nodeFlags) add(cmd *cobra.Command, full bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.prefix, "prefix", "", "node name prefix: nodes are PREFIX-0, PREFIX-1, ... (or PREFIX-NAME with --names)")
	fl.IntVar(&f.count, "count", 0, fmt.Sprintf("number of nodes, at most %d per command (use --start for more)", simnode.MaxNodes))
	fl.IntVar(&f.start, "start", 0, "index of the first node with --count")
	fl.StringSliceVar(&f.names, "names", nil, "node name suffixes instead of --count, e.g. a,b,c")
	if !full {
		return
	}
	fl.StringSliceVarP(&f.labels, "label", "l", nil, "label KEY=VALUE on every node (repeatable); pools select nodes by their labels")
	fl.StringSliceVar(&f.taints, "taint", nil, "taint KEY[=VALUE]:EFFECT on every node (repeatable)")
	fl.StringToStringVar(&f.alloc, "allocatable", nil, "allocatable resources, e.g. cpu=64,memory=256Gi,pods=110 (defaults for the ones not given)")
	fl.StringVar(&f.lease, "lease-renew-interval", "", "node Lease renew interval (default 10s, as a kubelet)")
	fl.StringVar(&f.status, "status-report-interval", "", "Ready heartbeat interval (default 5m, as a kubelet's nodeStatusReportFrequency)")
}

// check refuses what the schema would refuse at a position of the generated document the user
// never sees, naming the flag instead.
func (f *nodeFlags) check() error {
	switch {
	case f.count < 0:
		return fmt.Errorf("--count %d: must be positive", f.count)
	case f.count > simnode.MaxNodes:
		return fmt.Errorf("--count %d: at most %d nodes per command; create more with several commands, each with its own --start "+
			"(e.g. --count %d --start %d)", f.count, simnode.MaxNodes, simnode.MaxNodes, simnode.MaxNodes)
	case len(f.names) > simnode.MaxNodes:
		return fmt.Errorf("--names: %d names, at most %d per command", len(f.names), simnode.MaxNodes)
	}
	return nil
}

// document renders the flags as a SimulatedNodes document, so they pass the same schema check
// as a file.
func (f *nodeFlags) document() ([]byte, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	spec := map[string]any{"prefix": f.prefix}
	if f.count != 0 {
		spec["count"] = f.count
	}
	if f.start != 0 {
		spec["start"] = f.start
	}
	if len(f.names) > 0 {
		spec["names"] = f.names
	}
	if len(f.labels) > 0 {
		l := map[string]string{}
		for _, kv := range f.labels {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("--label %q: want KEY=VALUE", kv)
			}
			l[k] = v
		}
		spec["labels"] = l
	}
	for _, t := range f.taints {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("--taint %q: want KEY[=VALUE]:EFFECT", t)
		}
		k, v, _ := strings.Cut(kv, "=")
		taint := map[string]any{"key": k, "effect": effect}
		if v != "" {
			taint["value"] = v
		}
		list, _ := spec["taints"].([]any)
		spec["taints"] = append(list, taint)
	}
	if len(f.alloc) > 0 {
		spec["allocatable"] = f.alloc
	}
	if f.lease != "" {
		spec["leaseRenewInterval"] = f.lease
	}
	if f.status != "" {
		spec["statusReportInterval"] = f.status
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": simnode.APIVersion, "kind": simnode.Kind,
		"metadata": map[string]any{"name": "flags"}, "spec": spec,
	})
}

// specs returns the SimulatedNodes specs of the files, or of the flags when no file is given.
func (f *nodeFlags) specs(cmd *cobra.Command, files []string) ([]simnode.Spec, error) {
	var objs []scenario.Object
	if len(files) == 0 {
		src, err := f.document()
		if err != nil {
			return nil, err
		}
		objs, err = scenario.Decode("flags", src, "")
		if err != nil {
			return nil, err
		}
	} else {
		var err error
		if objs, err = readScenarios(cmd, &kubeFlags{namespace: "default"}, files); err != nil {
			return nil, err
		}
	}
	var out []simnode.Spec
	for _, o := range objs {
		if o.Kind.Kind != simnode.Kind {
			return nil, fmt.Errorf("%s document %d: %s, want only %s documents", o.File, o.Index, o.Kind.Kind, simnode.Kind)
		}
		s, err := simnode.Decode(o.Obj)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func newNodesApply(kf *kubeFlags) *cobra.Command {
	var f nodeFlags
	var files []string
	cmd := &cobra.Command{
		Use:   "apply (--prefix P --count N | -f FILE...)",
		Short: "Create or update simulated Nodes: labelled draforge.oaslananka/simulated, with capacity, allocatable and Ready status",
		Example: "  draforge nodes apply --prefix gpu-node --count 100 -l gpu=h100 --allocatable cpu=96,memory=1Ti\n" +
			"  draforge nodes apply -f examples/simulated-nodes.yaml",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			specs, err := f.specs(cmd, files)
			if err != nil {
				return err
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			n := 0
			for _, s := range specs {
				if err := simnode.Apply(cmd.Context(), c.Dynamic, s, func(string, error) { n++ }); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d simulated nodes applied\n", n)
			return nil
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "file of SimulatedNodes documents instead of the flags (repeatable)")
	return cmd
}

func newNodesDelete(kf *kubeFlags) *cobra.Command {
	var f nodeFlags
	var files []string
	cmd := &cobra.Command{
		Use:   "delete (--prefix P --count N | -f FILE...)",
		Short: "Delete simulated Nodes (missing ones are ignored; their Leases go with them)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			specs, err := f.specs(cmd, files)
			if err != nil {
				return err
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			n := 0
			for _, s := range specs {
				if err := simnode.Delete(cmd.Context(), c.Dynamic, s, func(_ string, found bool, _ error) {
					if found {
						n++
					}
				}); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d simulated nodes deleted\n", n)
			return nil
		},
	}
	f.add(cmd, false)
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "file of SimulatedNodes documents instead of the flags (repeatable)")
	return cmd
}
