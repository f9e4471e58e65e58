package kubeletplugin

import (
	"context"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/draforge/draforge/drivers/process"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/health"
	"github.com/draforge/draforge/engine/logging"
	"github.com/draforge/draforge/engine/unstructuredjson"
)

// ProcessOptions are `draforge kubelet-plugin`'s settings, its flags parsed by the caller; the
// plugin's own settings are checked by Run.
type ProcessOptions struct {
	Version, LogLevel string
	// RuntimeAddr serves /healthz, /readyz and /metrics.
	RuntimeAddr                               string
	NodeName, PluginsDir, RegistryDir, CDIDir string
	HealthInterval                            time.Duration
	DriverNames                               []string
	// ReadyTimeout and ReadyGrace bound /readyz; ShutdownWithin bounds the shutdown.
	ReadyTimeout, ReadyGrace, ShutdownWithin time.Duration
}

// RunProcess runs the plugin over cfg (a fresh config: its user agent is set here) with its
// runtime server until ctx ends. /readyz is ready once every driver the node needs is
// registered with the kubelet.
func RunProcess(ctx context.Context, cfg *rest.Config, o ProcessOptions) error {
	log, err := logging.New(os.Stderr, o.LogLevel)
	if err != nil {
		return err
	}
	cfg.UserAgent = "draforge-kubelet-plugin/" + o.Version
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := unstructuredjson.NewDynamicClient(cfg)
	if err != nil {
		return err
	}
	reg, err := process.NewRegistry()
	if err != nil {
		return err
	}
	m, err := NewMetrics(reg)
	if err != nil {
		return err
	}
	var registered atomic.Bool
	ready := &health.Readiness{Kube: kube, Timeout: o.ReadyTimeout, Grace: o.ReadyGrace, Synced: registered.Load}
	mux := http.NewServeMux()
	mux.Handle("/healthz", health.Liveness{})
	mux.Handle("/readyz", ready)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &health.Server{Addr: o.RuntimeAddr, Handler: mux, ShutdownTimeout: o.ShutdownWithin}
	plugin := engine.PluginFunc(func(ctx context.Context) error {
		return Run(ctx, Config{NodeName: o.NodeName, Kube: kube, Dynamic: dyn,
			PluginsDir: o.PluginsDir, RegistryDir: o.RegistryDir, CDIDir: o.CDIDir, HealthInterval: o.HealthInterval,
			Log: log, Ready: registered.Store, Metrics: m, DriverNames: o.DriverNames})
	})
	log.Info().Str("node", o.NodeName).Str("address", o.RuntimeAddr).Strs("driverNames", o.DriverNames).Msg("kubelet plugin starting")
	return process.Run(ctx, log, o.ShutdownWithin+time.Second, nil, srv, plugin)
}
