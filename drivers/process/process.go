// Package process builds what the long-running commands (draforge controller and serve) share:
// the logger, the API clients, one set of informers and the machines checked against the
// drivers' names; Run, which runs plugins and bounds their shutdown; and NewRegistry, the metrics
// registry of the processes without the controller's (serve, the kubelet plugin).
package process

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/drivers/claims"
	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/podnamespaces"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/logging"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/engine/metrics"
	"github.com/draforge/draforge/engine/unstructuredjson"
	"github.com/draforge/draforge/machines"
)

// Options are the settings the long-running commands (controller, serve) share.
type Options struct {
	// Component and Version make the user agent: draforge-<Component>/<Version>.
	Component, Version string
	LogLevel           string
	// MachinesDir is --machines: a directory replacing the embedded machines ("": embedded).
	MachinesDir string
	QPS         float32
	Burst       int
	// Metrics receives the drivers' own series.
	Metrics prometheus.Registerer
	// AllocatorFeatures overrides the allocator's default features (--feature-gates).
	AllocatorFeatures *structured.Features
	// IgnoreDeviceTaintRules is --feature-gates DRADeviceTaintRules=false.
	IgnoreDeviceTaintRules bool
	// Allocator is --allocator: who allocates standalone claims.
	Allocator claims.Mode
	// PodNamespaces is --pod-namespaces: where the controller writes pods.
	PodNamespaces podnamespaces.Set
}

// Process is what controller and serve both build: the logger, the clients and one set of
// informers. The controller adds the drivers registered over them (New); serve only reads
// (NewReadOnly). Machines are validated against the drivers' names either way.
type Process struct {
	Log       zerolog.Logger
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Informers *engine.Informers
	Registry  *engine.Registry // nil in serve
	Drivers   *drivers.Set     // nil in serve
	Machines  []*machine.Machine
}

// New is the controller's process over cfg (a fresh config: its rate limits and user agent are
// set here): the drivers registered over the informers (their stores, the allocator, their
// actions) and the machines validated against them.
func New(cfg *rest.Config, o Options) (*Process, error) {
	rt, err := newBase(cfg, o)
	if err != nil {
		return nil, err
	}
	rt.Registry = engine.NewRegistry()
	if rt.Drivers, err = drivers.Register(rt.Registry, drivers.Deps{Kube: rt.Kube, Dynamic: rt.Dynamic, Informers: rt.Informers,
		Metrics: o.Metrics, Log: rt.Log, AllocatorFeatures: o.AllocatorFeatures,
		IgnoreDeviceTaintRules: o.IgnoreDeviceTaintRules, Allocator: o.Allocator, PodNamespaces: o.PodNamespaces}); err != nil {
		return nil, err
	}
	if rt.Machines, err = LoadMachines(o.MachinesDir, rt.Registry.Names()); err != nil {
		return nil, err
	}
	return rt, nil
}

// NewReadOnly is serve's process: no driver is registered (no driver store, no
// allocator, no action, no queue). Its informers cache the resources the drivers read in the
// same typed, pruned form as the controller's, and the machines are checked against the
// drivers' names offline, as `draforge machines vet` does, so serve accepts exactly the
// machine files the controller accepts.
func NewReadOnly(cfg *rest.Config, o Options) (*Process, error) {
	rt, err := newBase(cfg, o)
	if err != nil {
		return nil, err
	}
	clusterview.Forms(rt.Informers)
	names, err := drivers.Names()
	if err != nil {
		return nil, err
	}
	if rt.Machines, err = LoadMachines(o.MachinesDir, names); err != nil {
		return nil, err
	}
	return rt, nil
}

func newBase(cfg *rest.Config, o Options) (*Process, error) {
	log, err := logging.New(os.Stderr, o.LogLevel)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.UserAgent = "draforge-" + o.Component + "/" + o.Version
	// Built-in types over protobuf (clusterview.KubeConfig). The dynamic client (our CRDs, the
	// machines' unstructured objects) can only speak JSON; its decoder validates and parses each
	// object once (engine/unstructuredjson).
	kube, err := kubernetes.NewForConfig(clusterview.KubeConfig(cfg))
	if err != nil {
		return nil, err
	}
	dyn, err := unstructuredjson.NewDynamicClient(cfg)
	if err != nil {
		return nil, err
	}
	informers := engine.NewInformers(dyn)
	clusterview.Watch(informers, kube, log)
	return &Process{Log: log, Kube: kube, Dynamic: dyn, Informers: informers}, nil
}

// LoadMachines loads the machines of dir, or the embedded ones when dir is empty. A dir that
// loads no machine (missing, empty), one twice (the same name in two files) or lacks one the
// controller runs is an error naming it, before anything starts.
func LoadMachines(dir string, names machine.Names) ([]*machine.Machine, error) {
	if dir == "" {
		ms, err := machines.Load(names)
		if err != nil {
			return nil, fmt.Errorf("load machines:\n%w", err)
		}
		return ms, nil
	}
	ms, err := machine.LoadDir(dir, names)
	if err != nil {
		return nil, fmt.Errorf("load machines from --machines %s:\n%w", dir, err)
	}
	if err := RequireMachines(dir, ms); err != nil {
		return nil, err
	}
	return ms, nil
}

// RequireMachines refuses a machine directory without every machine the controller runs: the
// directory replaces the embedded machines, it does not add to them.
func RequireMachines(dir string, ms []*machine.Machine) error {
	missing := machine.Missing(ms, machines.Names)
	if len(missing) == 0 {
		return nil
	}
	files := make([]string, len(missing))
	for i, m := range missing {
		files[i] = m + ".cue"
	}
	return fmt.Errorf("--machines %s: no machine %s: the directory replaces the embedded machines and the controller runs %s; "+
		"copy %s from machines/ (or the chart's files/machines/) and edit the copies",
		dir, quoteAll(missing), strings.Join(machines.Names, ", "), strings.Join(files, ", "))
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// Run runs the plugins until ctx ends, then gives them `within` to stop: the process
// exits after that even with work in flight, as the operations guide promises.
func Run(ctx context.Context, log zerolog.Logger, within time.Duration, elector engine.Elector, plugins ...engine.Plugin) error {
	done := make(chan error, 1)
	go func() { done <- engine.RunPlugins(ctx, elector, plugins...) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info().Dur("within", within).Msg("shutting down")
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		log.Warn().Msg("shutdown timeout reached; exiting with work in flight")
		return nil
	}
}

// NewRegistry is a private Prometheus registry with the Go and process collectors and
// client-go's REST client requests, for the processes without the controller's metrics (serve,
// the kubelet plugin).
func NewRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := metrics.RegisterRESTClient(reg); err != nil {
		return nil, err
	}
	return reg, nil
}
