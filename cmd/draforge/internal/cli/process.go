package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/drivers/claims"
	"github.com/draforge/draforge/drivers/podnamespaces"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/logging"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/engine/unstructuredjson"
	"github.com/draforge/draforge/machines"
)

// processOptions are the settings the long-running commands (controller, serve) share.
type processOptions struct {
	component   string // user agent prefix: draforge-<component>/<version>
	logLevel    string
	machinesDir string
	qps         float32
	burst       int
	// metrics receives the drivers' own series.
	metrics prometheus.Registerer
	// allocatorFeatures overrides the allocator's default features (--feature-gates).
	allocatorFeatures *structured.Features
	// ignoreDeviceTaintRules is --feature-gates DRADeviceTaintRules=false.
	ignoreDeviceTaintRules bool
	// allocator is --allocator: who allocates standalone claims.
	allocator claims.Mode
	// podNamespaces is --pod-namespaces: where the controller writes pods.
	podNamespaces podnamespaces.Set
}

// process is what controller and serve both build: the logger, the clients and one set of
// informers. The controller adds the drivers registered over them (newProcess); serve only
// reads (newReadOnlyProcess). machines are validated against the drivers' names either way.
type process struct {
	log       zerolog.Logger
	cfg       *rest.Config
	kube      kubernetes.Interface
	dyn       dynamic.Interface
	informers *engine.Informers
	registry  *engine.Registry // nil in serve
	drivers   *drivers.Set     // nil in serve
	machines  []*machine.Machine
}

// newProcess is the controller's process: the drivers registered over the informers (their
// stores, the allocator, their actions) and the machines validated against them.
func newProcess(kf *kubeFlags, o processOptions) (*process, error) {
	rt, err := newBaseProcess(kf, o)
	if err != nil {
		return nil, err
	}
	rt.registry = engine.NewRegistry()
	if rt.drivers, err = drivers.Register(rt.registry, drivers.Deps{Kube: rt.kube, Dynamic: rt.dyn, Informers: rt.informers,
		Metrics: o.metrics, Log: rt.log, AllocatorFeatures: o.allocatorFeatures,
		IgnoreDeviceTaintRules: o.ignoreDeviceTaintRules, Allocator: o.allocator, PodNamespaces: o.podNamespaces}); err != nil {
		return nil, err
	}
	if rt.machines, err = loadMachineDir(o.machinesDir, rt.registry.Names()); err != nil {
		return nil, err
	}
	return rt, nil
}

// newReadOnlyProcess is serve's process: no driver is registered (no driver store, no
// allocator, no action, no queue). Its informers cache the resources the drivers read in the
// same typed, pruned form as the controller's, and the machines are checked against the
// drivers' names offline, as `draforge machines vet` does, so serve accepts exactly the
// machine files the controller accepts.
func newReadOnlyProcess(kf *kubeFlags, o processOptions) (*process, error) {
	rt, err := newBaseProcess(kf, o)
	if err != nil {
		return nil, err
	}
	drivers.CacheTyped(rt.informers)
	names, err := drivers.Names()
	if err != nil {
		return nil, err
	}
	if rt.machines, err = loadMachineDir(o.machinesDir, names); err != nil {
		return nil, err
	}
	return rt, nil
}

func newBaseProcess(kf *kubeFlags, o processOptions) (*process, error) {
	log, err := logging.New(os.Stderr, o.logLevel)
	if err != nil {
		return nil, err
	}
	cfg, err := kf.config()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "draforge-" + o.component + "/" + Version
	// Built-in types over protobuf (drivers.KubeConfig). The dynamic client (our CRDs, the
	// machines' unstructured objects) can only speak JSON; its decoder validates and parses each
	// object once (engine/unstructuredjson).
	kube, err := kubernetes.NewForConfig(drivers.KubeConfig(cfg))
	if err != nil {
		return nil, err
	}
	dyn, err := unstructuredjson.NewDynamicClient(cfg)
	if err != nil {
		return nil, err
	}
	informers := engine.NewInformers(dyn)
	drivers.OptionalResources(informers, log)
	drivers.ListTyped(informers, kube)
	return &process{log: log, cfg: cfg, kube: kube, dyn: dyn, informers: informers}, nil
}

// loadMachineDir loads the machines of dir, or the embedded ones when dir is empty. A dir that
// loads no machine (missing, empty), one twice (the same name in two files) or lacks one the
// controller runs is an error naming it, before anything starts.
func loadMachineDir(dir string, names machine.Names) ([]*machine.Machine, error) {
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
	if err := requireMachines(dir, ms); err != nil {
		return nil, err
	}
	return ms, nil
}

// requireMachines refuses a machine directory without every machine the controller runs: the
// directory replaces the embedded machines, it does not add to them.
func requireMachines(dir string, ms []*machine.Machine) error {
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

// lifecycle holds the probe and shutdown settings of the operations guide, shared by controller
// and serve.
type lifecycle struct {
	readyTimeout   time.Duration
	readyGrace     time.Duration
	shutdownWithin time.Duration
}

func (l *lifecycle) addFlags(f *pflag.FlagSet, shutdownHelp string) {
	f.DurationVar(&l.readyTimeout, "readiness-timeout", 2*time.Second, "bound of the /readyz API call")
	f.DurationVar(&l.readyGrace, "readiness-grace-period", 15*time.Second, "how long /readyz stays 200 degraded after the last success")
	f.DurationVar(&l.shutdownWithin, "shutdown-timeout", 5*time.Second, shutdownHelp)
}

func (l lifecycle) validate() []error {
	var errs []error
	if l.readyTimeout <= 0 {
		errs = append(errs, errors.New("--readiness-timeout must be positive"))
	}
	if l.readyGrace < 0 {
		errs = append(errs, errors.New("--readiness-grace-period must not be negative"))
	}
	if l.shutdownWithin <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	return errs
}

// runPlugins runs the plugins until ctx ends, then gives them `within` to stop: the process
// exits after that even with work in flight, as the operations guide promises.
func runPlugins(ctx context.Context, log zerolog.Logger, within time.Duration, elector engine.Elector, plugins ...engine.Plugin) error {
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
