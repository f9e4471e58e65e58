// Package drivers wires the Go functions that machines call by name (actions, observations,
// mappers) into an engine.Registry. Each sub-package is one driver, or a part of the product
// built over them: the read models and what reads them (inventory, explain, doctor,
// resourcegraph, machinegraph, httpapi), pool faults, the kubelet plugin, scenarios, and the
// assembly of the controller and serve processes (process, controller, serve).
package drivers

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/binding"
	"github.com/draforge/draforge/drivers/claims"
	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/computedomain"
	"github.com/draforge/draforge/drivers/gpufabric"
	"github.com/draforge/draforge/drivers/podnamespaces"
	podsDriver "github.com/draforge/draforge/drivers/pods"
	"github.com/draforge/draforge/drivers/pools"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// Deps are what drivers need from the process.
type Deps struct {
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Informers *engine.Informers
	Metrics   prometheus.Registerer
	Log       zerolog.Logger
	// AllocatorFeatures are the structured allocator's features (nil: kube-scheduler's defaults
	// for Kubernetes 1.37, see drivers/featuregates).
	AllocatorFeatures *structured.Features
	// IgnoreDeviceTaintRules is the DRADeviceTaintRules gate turned off.
	IgnoreDeviceTaintRules bool
	// Allocator says who allocates standalone claims ("": claims.KubeScheduler).
	Allocator claims.Mode
	// PodNamespaces are where the controller may write pods (--pod-namespaces; zero: all).
	PodNamespaces podnamespaces.Set
}

// Set is the registered drivers, for callers that read their state (explain, serve).
type Set struct {
	Claims *claims.Driver
	Pools  *pools.Driver
	// Binding sets simulated devices' binding conditions (its functions await a claim machine
	// that calls them, see drivers/binding).
	Binding *binding.Driver
	// Plugins are the drivers' background loops (the orphan slice sweeper), leader-only.
	Plugins []engine.Plugin
}

// Register registers every driver's functions in reg and builds their background loops.
func Register(reg *engine.Registry, d Deps) (*Set, error) {
	set, err := register(reg, d)
	if err != nil {
		return nil, err
	}
	sweeper, err := set.Pools.Sweeper()
	if err != nil {
		return nil, err
	}
	set.Plugins = []engine.Plugin{sweeper}
	return set, nil
}

// register registers every driver's functions in reg, without the background loops.
func register(reg *engine.Registry, d Deps) (*Set, error) {
	view, err := clusterview.New(d.Informers)
	if err != nil {
		return nil, err
	}
	for _, p := range clusterview.Pruned() {
		reg.Pruned(p)
	}
	c, err := claims.Register(reg, view, d.Kube, d.Metrics, allocator.Options{Features: d.AllocatorFeatures,
		IgnoreDeviceTaintRules: d.IgnoreDeviceTaintRules}, d.Allocator)
	if err != nil {
		return nil, err
	}
	p, err := pools.Register(reg, d.Informers, d.Kube, d.Dynamic)
	if err != nil {
		return nil, err
	}
	c.PodNamespaces = d.PodNamespaces
	b := binding.Register(reg, d.Kube, view.Pools)
	b.Published = func(alloc *resourcev1.AllocationResult) bool {
		return c.Allocator.AllPublished(alloc, simdevice.Published)
	}
	pd, err := podsDriver.Register(reg, d.Informers, d.Kube, view.Pools)
	if err != nil {
		return nil, err
	}
	pd.PodNamespaces = d.PodNamespaces
	if _, err := computedomain.Register(reg, d.Informers, view.Pools, pd); err != nil {
		return nil, err
	}
	gpufabric.Register(reg, d.Informers, view.Pools)
	return &Set{Claims: c, Pools: p, Binding: b}, nil
}
