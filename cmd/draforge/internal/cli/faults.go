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
	var xid int64
	cmd := &cobra.Command{
		Use:   "inject-fault POOL --device DEVICE --mode MODE [--xid XID]",
		Short: "Set a fault on one device of a SimulatedDevicePool (spec.faults)",
		Long: `inject-fault records a fault for a device (by name, e.g. gpu-1, or index) on one node
(--node) or on every targeted node, replacing the device's previous fault there.
unhealthy and capacity-exhausted taint the device, disappear removes it from its slice,
binding-failure fails its binding conditions, healthy removes the device's fault on that node.

For pools whose profile mirrors the NVIDIA GPU driver (nvidia-gpu, nvidia-gpu-shares), the
driver's health events publish its taints: xid (with --xid, e.g. 79) and ecc (XID 48) and
nvlink (XID 74) taint the device gpu.nvidia.com/xid=<XID>:NoSchedule (effect None for the XIDs
the driver ignores: 13, 31, 43, 45, 68, 109); gpu-lost taints every device of the node
gpu.nvidia.com/gpu-lost:NoSchedule; unmonitored taints the device gpu.nvidia.com/unmonitored:None.
NoSchedule keeps new claims off the device and leaves running pods alone. --mode healthy clears
the fault and its taint.`,
		Example: `  draforge inject-fault gpus --device 1 --node node-a --mode xid --xid 79
  draforge inject-fault gpus --device gpu-0 --mode ecc
  draforge inject-fault gpus --device 1 --node node-a --mode healthy`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if device == "" {
				return fmt.Errorf("--device is required")
			}
			f, err := poolfaults.NewFault(device, node, mode, xid)
			if err != nil {
				return err
			}
			p, err := patchFaults(cmd.Context(), kf, args[0], func(p *simdevice.Pool) ([]simdevice.Fault, error) {
				return poolfaults.Set(p, f)
			})
			if err != nil {
				return err
			}
			where := "all nodes"
			if node != "" {
				where = "node " + node
			}
			what := string(f.Mode)
			if x, ok := simdevice.FaultXIDOf(f); ok {
				what = fmt.Sprintf("%s (XID %d)", f.Mode, x)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "SimulatedDevicePool %s/%s: device %s on %s is %s (%d faults)\n", p.Namespace, p.Name, device, where, what, len(p.Spec.Faults))
			return nil
		},
	}
	cmd.Flags().StringVar(&device, "device", "", "device name (gpu-1) or index (1)")
	cmd.Flags().StringVar(&node, "node", "", "node the fault applies to (default: every targeted node)")
	cmd.Flags().StringVar(&mode, "mode", "unhealthy", "unhealthy, capacity-exhausted, disappear, binding-failure or healthy; for NVIDIA-profile pools also xid, ecc, nvlink, gpu-lost or unmonitored")
	cmd.Flags().Int64Var(&xid, "xid", 0, "XID code of an xid fault (e.g. 79)")
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
