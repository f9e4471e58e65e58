package cli

import (
	"context"
	"fmt"
	"sync/atomic"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"

	"github.com/draforge/draforge/cmd/draforge/internal/tui"
	"github.com/draforge/draforge/drivers/httpapi"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/poolfaults"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

func newTUI(kf *kubeFlags) *cobra.Command {
	var allowFaults bool
	cmd := &cobra.Command{
		Use:   "tui",
		Short: "Terminal UI: overview, pools, node × device occupancy, claims, pods and doctor, live",
		Long: `The terminal UI watches the same objects as serve with informers and redraws from the newest
snapshot of their caches on every change; it never polls the API server. It is read-only.

Keys: tab or ←/→ or 1-6 switch views, ↑/↓ j/k pgup/pgdn g/G move, / filters the list as you
type (enter keeps the filter, esc clears it), enter explains the selected claim or pod (the same
explanation as draforge explain), esc closes it, q quits.

With --allow-faults, F on an allocated claim offers to mark the device it holds unhealthy on its
node (spec.faults of its SimulatedDevicePool, as inject-fault does); nothing is written until
you confirm with y.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTUI(cmd.Context(), kf, allowFaults) },
	}
	cmd.Flags().BoolVar(&allowFaults, "allow-faults", false, "enable fault injection (F, then y to confirm); read-only without it")
	return cmd
}

func runTUI(ctx context.Context, kf *kubeFlags, allowFaults bool) error {
	c, err := kf.clients()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	informers := engine.NewInformers(c.Dynamic)
	model := tui.New()
	if allowFaults {
		model.WithFaults(func(ctx context.Context, f tui.FaultTarget) error {
			_, err := poolfaults.Patch(ctx, c.Dynamic, f.Namespace, f.Pool, func(p *simdevice.Pool) ([]simdevice.Fault, error) {
				return poolfaults.Set(p, simdevice.Fault{Device: poolfaults.DeviceRef(f.Device), Node: f.Node, Mode: simdevice.FaultUnhealthy})
			})
			return err
		})
	}
	p := tea.NewProgram(model, tea.WithContext(ctx))
	var version atomic.Uint64
	watcher := &httpapi.Watcher{Informers: informers, OnSnapshot: func(s *inventory.Snapshot) {
		p.Send(tui.SnapshotMsg{Snapshot: s, Version: version.Add(1)})
	}}
	if err := watcher.Register(); err != nil {
		return err
	}
	watchErr := make(chan error, 1)
	go func() { watchErr <- engine.RunPlugins(ctx, nil, informers.Plugin(), watcher) }()
	if _, err := p.Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("tui: %w", err)
	}
	cancel()
	if err := <-watchErr; err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
