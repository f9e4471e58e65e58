package engine

import (
	"context"
	"errors"
	"sync"
)

// Plugin is something the controller process runs beside the machines: the runtime HTTP
// server, the informer caches, the leader Lease. Start blocks until ctx ends.
type Plugin interface {
	Start(ctx context.Context) error
}

// LeaderElected is implemented by plugins that must run only on the leader.
type LeaderElected interface {
	NeedLeaderElection() bool
}

// Elector runs onLead while this process holds leadership (see engine/leader).
type Elector interface {
	Run(ctx context.Context, onLead func(ctx context.Context) error) error
}

// PluginFunc adapts a function to Plugin.
type PluginFunc func(ctx context.Context) error

// Start implements Plugin.
func (f PluginFunc) Start(ctx context.Context) error { return f(ctx) }

// RunPlugins starts every plugin in order, each in its own goroutine; plugins that need leader
// election run under elector (or directly when elector is nil). It returns nil when ctx ends,
// or the first plugin error after cancelling the rest.
func RunPlugins(ctx context.Context, elector Elector, plugins ...Plugin) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	fail := func(err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			once.Do(func() { firstErr = err })
		}
		cancel()
	}
	var leaderOnly []Plugin
	for _, p := range plugins {
		if le, ok := p.(LeaderElected); ok && le.NeedLeaderElection() && elector != nil {
			leaderOnly = append(leaderOnly, p)
			continue
		}
		wg.Go(func() {
			if err := p.Start(ctx); err != nil || ctx.Err() == nil {
				fail(err)
			}
		})
	}
	if len(leaderOnly) > 0 {
		wg.Go(func() {
			fail(elector.Run(ctx, func(ctx context.Context) error {
				return RunPlugins(ctx, nil, leaderOnly...)
			}))
		})
	}
	<-ctx.Done()
	wg.Wait()
	return firstErr
}

// Plugin returns the engine itself as a leader-only plugin: Start runs the machines.
func (e *Engine) Plugin() Plugin { return enginePlugin{e} }

type enginePlugin struct{ e *Engine }

func (p enginePlugin) Start(ctx context.Context) error { p.e.Run(ctx); return nil }
func (enginePlugin) NeedLeaderElection() bool          { return true }

// CachePlugin starts the informers on every replica, so a standby takes over with warm caches.
func (i *Informers) Plugin() Plugin {
	return PluginFunc(func(ctx context.Context) error {
		if err := i.Start(ctx); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
}
