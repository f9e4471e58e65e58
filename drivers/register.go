// Package drivers wires the Go functions that machines call by name (actions, observations,
// mappers) into an engine.Registry. Each sub-package is one driver.
package drivers

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/draforge/draforge/drivers/claims"
	"github.com/draforge/draforge/drivers/pools"
	"github.com/draforge/draforge/engine"
)

// Deps are what drivers need from the process.
type Deps struct {
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Informers *engine.Informers
	Metrics   prometheus.Registerer
	Log       zerolog.Logger
}

// Set is the registered drivers, for callers that read their state (explain, serve).
type Set struct {
	Claims *claims.Driver
	Pools  *pools.Driver
	// Plugins are the drivers' background loops (the orphan slice sweeper), leader-only.
	Plugins []engine.Plugin
}

// Register registers every driver's functions in reg.
func Register(reg *engine.Registry, d Deps) (*Set, error) {
	c, err := claims.Register(reg, d.Informers, d.Kube, d.Metrics)
	if err != nil {
		return nil, err
	}
	p, err := pools.Register(reg, d.Informers, d.Kube, d.Dynamic)
	if err != nil {
		return nil, err
	}
	sweeper, err := p.Sweeper()
	if err != nil {
		return nil, err
	}
	return &Set{Claims: c, Pools: p, Plugins: []engine.Plugin{sweeper}}, nil
}
