package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/drivers/machinegraph"
	"github.com/draforge/draforge/drivers/process"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/machines"
)

func newMachines() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "machines",
		Short: "Validate or draw the CUE state machines (embedded, or from a directory)",
	}
	cmd.AddCommand(newMachinesVet(), newMachinesGraph())
	return cmd
}

// loadMachines loads DIR or the embedded machines against the real drivers' names.
func loadMachines(args []string) ([]*machine.Machine, error) {
	names, err := drivers.Names()
	if err != nil {
		return nil, err
	}
	if len(args) == 1 {
		return machine.LoadDir(args[0], names)
	}
	return machines.Load(names)
}

func printLoadErrors(cmd *cobra.Command, err error) error {
	var list machine.Errors
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintln(cmd.ErrOrStderr(), e)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%d problems\n", len(list))
		return errSilent
	}
	return err
}

func newMachinesVet() *cobra.Command {
	return &cobra.Command{
		Use:   "vet [DIR]",
		Short: "Load and validate machines against the schema and the registered driver functions",
		Long: "Load and validate machines against the schema and the registered driver functions. A DIR is checked as " +
			"the controller's --machines checks it: it must hold *.cue files, declare each machine once and declare every " +
			"machine the controller runs (" + strings.Join(machines.Names, ", ") + ").",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, err := loadMachines(args)
			if err != nil {
				return printLoadErrors(cmd, err)
			}
			for _, m := range ms {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: machine %s ok (%d states, %d transitions)\n", m.Source, m.Name, len(m.States), m.TransitionCount())
			}
			if len(args) == 1 {
				// What the controller would refuse at startup, vet refuses too.
				return process.RequireMachines(args[0], ms)
			}
			return nil
		},
	}
}

func newMachinesGraph() *cobra.Command {
	var only string
	cmd := &cobra.Command{
		Use:   "graph [DIR]",
		Short: "Print each machine as a Mermaid stateDiagram-v2",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, err := loadMachines(args)
			if err != nil {
				return printLoadErrors(cmd, err)
			}
			n := 0
			for _, m := range ms {
				if only != "" && m.Name != only {
					continue
				}
				if n > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				n++
				if err := machinegraph.Mermaid(cmd.OutOrStdout(), m); err != nil {
					return err
				}
			}
			if only != "" && n == 0 {
				return fmt.Errorf("no machine named %q", only)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&only, "machine", "", "print only this machine")
	return cmd
}
