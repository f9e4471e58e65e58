package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/drivers/poolfaults"
	"github.com/draforge/draforge/drivers/simdevice"
)

// patchFaults edits the faults of the pool name in the command's namespace (poolfaults.Patch).
func patchFaults(ctx context.Context, kf *kubeFlags, name string, edit func(*simdevice.Pool) ([]simdevice.Fault, error)) (*simdevice.Pool, error) {
	ns, err := kf.resolveNamespace()
	if err != nil {
		return nil, err
	}
	c, err := kf.clients()
	if err != nil {
		return nil, err
	}
	return poolfaults.Patch(ctx, c.Dynamic, ns, name, edit)
}

func newInjectFault(kf *kubeFlags) *cobra.Command {
	var device, node, mode string
	cmd := &cobra.Command{
		Use:   "inject-fault POOL --device DEVICE --mode unhealthy|capacity-exhausted|disappear|binding-failure|healthy",
		Short: "Set a fault on one device of a SimulatedDevicePool (spec.faults)",
		Long: `inject-fault records a fault for a device (by name, e.g. gpu-1, or index) on one node
(--node) or on every targeted node. unhealthy and capacity-exhausted taint the device,
disappear removes it from its slice, healthy removes the device's fault on that node.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := poolfaults.ParseMode(mode)
			if err != nil {
				return err
			}
			if device == "" {
				return fmt.Errorf("--device is required")
			}
			p, err := patchFaults(cmd.Context(), kf, args[0], func(p *simdevice.Pool) ([]simdevice.Fault, error) {
				return poolfaults.Set(p, poolfaults.DeviceRef(device), node, m)
			})
			if err != nil {
				return err
			}
			where := "all nodes"
			if node != "" {
				where = "node " + node
			}
			fmt.Fprintf(cmd.OutOrStdout(), "SimulatedDevicePool %s/%s: device %s on %s is %s (%d faults)\n", p.Namespace, p.Name, device, where, m, len(p.Spec.Faults))
			return nil
		},
	}
	cmd.Flags().StringVar(&device, "device", "", "device name (gpu-1) or index (1)")
	cmd.Flags().StringVar(&node, "node", "", "node the fault applies to (default: every targeted node)")
	cmd.Flags().StringVar(&mode, "mode", "unhealthy", "unhealthy, capacity-exhausted, disappear, binding-failure or healthy")
	return cmd
}

func newClearFaults(kf *kubeFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "clear-faults POOL",
		Short: "Remove every fault of a SimulatedDevicePool",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := patchFaults(cmd.Context(), kf, args[0], func(*simdevice.Pool) ([]simdevice.Fault, error) { return nil, nil })
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "SimulatedDevicePool %s/%s: faults cleared\n", p.Namespace, p.Name)
			return nil
		},
	}
}
