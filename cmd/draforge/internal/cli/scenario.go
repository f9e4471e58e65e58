package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/drivers/scenario"
)

func newScenario(kf *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Vet, apply or reset scenario files (multi-document YAML)",
	}
	cmd.AddCommand(newScenarioVet(), newScenarioApply(kf), newScenarioReset(kf))
	return cmd
}

func newScenarioVet() *cobra.Command {
	return &cobra.Command{
		Use:   "vet FILE...",
		Short: "Check scenario files against the scenario schema (file:line:col errors, exit 1 if any is invalid)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, file := range args {
				src, err := os.ReadFile(file)
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					bad++
					continue
				}
				if err := scenario.Vet(file, src); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), scenario.Format(file, err))
					bad++
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", file)
			}
			if bad > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d files invalid\n", bad, len(args))
				return errSilent
			}
			return nil
		},
	}
}

// readScenarios vets and decodes every file; nothing is sent to the server if any is invalid.
func readScenarios(cmd *cobra.Command, kf *kubeFlags, files []string) ([]scenario.Object, error) {
	if len(files) == 0 {
		return nil, errors.New("no files given (-f FILE)")
	}
	ns, err := kf.resolveNamespace()
	if err != nil {
		return nil, err
	}
	var objs []scenario.Object
	bad := false
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		o, err := scenario.Decode(file, src, ns)
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), err)
			bad = true
			continue
		}
		objs = append(objs, o...)
	}
	if bad {
		return nil, errSilent
	}
	return objs, nil
}

func newScenarioApply(kf *kubeFlags) *cobra.Command {
	var files []string
	var force bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE...",
		Short: "Server-side apply scenario files (Namespaces and SimulatedNodes, DeviceClasses, SimulatedDevicePools, ResourceClaims and ResourceClaimTemplates, Pods, Jobs and Deployments, DeviceTaintRules, in that order)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := readScenarios(cmd, kf, files)
			if err != nil {
				return err
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			if err := scenario.Unserved(c.Kube.Discovery(), objs); err != nil {
				return err
			}
			return scenario.Apply(cmd.Context(), c.Dynamic, objs, force, func(o scenario.Object, err error) {
				if err == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "%s serverside-applied\n", scenario.Ref(o))
				}
			})
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "scenario file (repeatable)")
	cmd.Flags().BoolVar(&force, "force-conflicts", false, "take ownership of fields other managers own")
	return cmd
}

func newScenarioReset(kf *kubeFlags) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "reset -f FILE...",
		Short: "Delete what scenario files declare (in reverse apply order; missing objects are ignored)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := readScenarios(cmd, kf, files)
			if err != nil {
				return err
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			return scenario.Reset(cmd.Context(), c.Dynamic, objs, func(o scenario.Object, found bool, err error) {
				switch {
				case err != nil:
				case found:
					fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", scenario.Ref(o))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%s not found\n", scenario.Ref(o))
				}
			})
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "scenario file (repeatable)")
	return cmd
}
