package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/logging"
	"github.com/draforge/draforge/engine/machine"
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
}

// process is what controller and serve both build: the logger, the clients, one set of
// informers, the drivers registered over them and the machines validated against the drivers.
type process struct {
	log       zerolog.Logger
	cfg       *rest.Config
	kube      kubernetes.Interface
	dyn       dynamic.Interface
	informers *engine.Informers
	registry  *engine.Registry
	drivers   *drivers.Set
	machines  []*machine.Machine
}

func newProcess(kf *kubeFlags, o processOptions) (*process, error) {
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
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rt := &process{log: log, cfg: cfg, kube: kube, dyn: dyn, informers: engine.NewInformers(dyn), registry: engine.NewRegistry()}
	if rt.drivers, err = drivers.Register(rt.registry, drivers.Deps{Kube: kube, Dynamic: dyn, Informers: rt.informers,
		Metrics: o.metrics, Log: log, AllocatorFeatures: o.allocatorFeatures,
		IgnoreDeviceTaintRules: o.ignoreDeviceTaintRules}); err != nil {
		return nil, err
	}
	if o.machinesDir != "" {
		rt.machines, err = machine.LoadDir(o.machinesDir, rt.registry.Names())
	} else {
		rt.machines, err = machine.Default(rt.registry.Names())
	}
	if err != nil {
		return nil, fmt.Errorf("load machines:\n%w", err)
	}
	return rt, nil
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
