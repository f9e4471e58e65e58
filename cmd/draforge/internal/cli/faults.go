package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/faultcampaign"
	"github.com/draforge/draforge/drivers/gvr"
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

For pools whose profile mirrors the NVIDIA GPU driver without DynamicMIG (nvidia-gpu*), the
driver's health events publish its taints: xid (with --xid, e.g. 79) and ecc (XID 48) and
nvlink (XID 74) taint the device gpu.nvidia.com/xid=<XID>:NoSchedule (effect None for the XIDs
the driver ignores: 13, 31, 43, 45, 68, 109); gpu-lost taints every device of the node
gpu.nvidia.com/gpu-lost:NoSchedule; unmonitored taints the device gpu.nvidia.com/unmonitored:None.
NoSchedule keeps new claims off the device and leaves running pods alone. fabric-detached
detaches the GPU's NVLink fabric: nothing is published, but once every GPU of a node is
detached the node loses GPU Feature Discovery's nvidia.com/gpu.clique label until one is back.
--mode healthy clears the fault and its taint.`,
		Example: `  draforge inject-fault gpus --device 1 --node node-a --mode xid --xid 79
  draforge inject-fault gpus --device gpu-0 --mode ecc
  draforge inject-fault gpus --device 1 --node node-a --mode healthy
  draforge inject-fault gpus --device gpu-2 --node nvl72-r0-3 --mode fabric-detached`,
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
			what := describeFault(f)
			fmt.Fprintf(cmd.OutOrStdout(), "SimulatedDevicePool %s/%s: device %s on %s is %s (%d faults)\n", p.Namespace, p.Name, device, where, what, len(p.Spec.Faults))
			return nil
		},
	}
	cmd.Flags().StringVar(&device, "device", "", "device name (gpu-1) or index (1)")
	cmd.Flags().StringVar(&node, "node", "", "node the fault applies to (default: every targeted node)")
	cmd.Flags().StringVar(&mode, "mode", "unhealthy", "unhealthy, capacity-exhausted, disappear, binding-failure or healthy; for NVIDIA-profile pools also xid, ecc, nvlink, gpu-lost, unmonitored or fabric-detached")
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

func newFaultCampaign(kf *kubeFlags) *cobra.Command {
	var mode string
	var xid int64
	var c faultcampaign.Campaign
	var at time.Duration
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "fault-campaign POOL --seed S --mode MODE [--xid XID] (--fraction F | --rate-per-hour R) [--start D] [--duration D] [--at D]",
		Short: "Add the faults of a seeded fault campaign to a SimulatedDevicePool (spec.faults)",
		Long: `fault-campaign expands a seeded campaign over the pool's targeted nodes (the Nodes it selects
now) and adds the faults it has caused by --at (time since the campaign's time zero) to
spec.faults, each replacing the device's previous fault on its node. The same flags give the same
faults. With --fraction each device (each node for gpu-lost) is hit with that probability; with
--rate-per-hour the pool sees that many faults per hour at first, from --start for --duration
(0: no end), each device failing at most once. Step --at to advance a campaign; clear-faults
ends it. spec.faults holds at most 256 faults.`,
		Example: `  draforge fault-campaign gpus --seed 7 --mode xid --xid 79 --fraction 0.02
  draforge fault-campaign gpus --seed 7 --mode nvlink --rate-per-hour 4 --duration 2h --at 30m --dry-run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := poolfaults.ParseMode(mode)
			if err != nil {
				return err
			}
			c.Mode = m
			if xid != 0 {
				c.XID = &xid
			}
			if err := c.Validate(); err != nil {
				return err
			}
			ns, err := kf.resolveNamespace()
			if err != nil {
				return err
			}
			cl, err := kf.clients()
			if err != nil {
				return err
			}
			nodes, err := cl.Kube.CoreV1().Nodes().List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			var caused []simdevice.Fault
			expand := func(p *simdevice.Pool) ([]simdevice.Fault, error) {
				if len(p.Spec.DeviceGroups) > 0 {
					return nil, fmt.Errorf("SimulatedDevicePool %s/%s has deviceGroups: fault campaigns draw over deviceCount devices per node", p.Namespace, p.Name)
				}
				var names []string
				for i := range nodes.Items {
					if p.Targets(&nodes.Items[i]) {
						names = append(names, nodes.Items[i].Name)
					}
				}
				if caused, err = faultcampaign.Expand(c, names, p.Spec.DeviceCount, at); err != nil {
					return nil, err
				}
				return poolfaults.Merge(p, caused)
			}
			w := cmd.OutOrStdout()
			if dryRun {
				u, err := cl.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(ns).Get(cmd.Context(), args[0], metav1.GetOptions{})
				if err != nil {
					return err
				}
				p, err := simdevice.FromUnstructured(u)
				if err != nil {
					return err
				}
				if _, err := expand(p); err != nil {
					return err
				}
				for _, f := range caused {
					fmt.Fprintf(w, "node %s device %s: %s\n", f.Node, f.Device.String(), describeFault(f))
				}
				fmt.Fprintf(w, "SimulatedDevicePool %s/%s: the campaign has caused %d faults by %v (dry run, nothing written)\n", p.Namespace, p.Name, len(caused), at)
				return nil
			}
			p, err := poolfaults.Patch(cmd.Context(), cl.Dynamic, ns, args[0], expand)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "SimulatedDevicePool %s/%s: the campaign has caused %d faults by %v (%d faults)\n", p.Namespace, p.Name, len(caused), at, len(p.Spec.Faults))
			return nil
		},
	}
	cmd.Flags().Int64Var(&c.Seed, "seed", 0, "seed of the campaign's draws")
	cmd.Flags().StringVar(&mode, "mode", "", "fault mode of every hit device (not healthy); xid, ecc, nvlink, gpu-lost, unmonitored, fabric-detached (per node) for NVIDIA-profile pools")
	cmd.Flags().Int64Var(&xid, "xid", 0, "XID code with --mode xid")
	cmd.Flags().Float64Var(&c.Fraction, "fraction", 0, "fraction of the devices hit, in (0, 1]")
	cmd.Flags().Float64Var(&c.RatePerHour, "rate-per-hour", 0, "faults per hour over the whole pool at first")
	cmd.Flags().DurationVar(&c.Start, "start", 0, "when the campaign starts, after its time zero")
	cmd.Flags().DurationVar(&c.Duration, "duration", 0, "how long new faults keep coming (0: no end)")
	cmd.Flags().DurationVar(&at, "at", 0, "the time, after the campaign's time zero, whose faults are set")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the faults without writing them")
	return cmd
}

func describeFault(f simdevice.Fault) string {
	if x, ok := simdevice.FaultXIDOf(f); ok {
		return fmt.Sprintf("%s (XID %d)", f.Mode, x)
	}
	return string(f.Mode)
}
