// Package kubeletplugin is `draforge kubelet-plugin`, the node agent that makes pods on real
// nodes start with simulated devices: for every DRA driver name the SimulatedDevicePools
// targeting its node use, it registers a DRA kubelet plugin (k8s.io/dynamic-resource-allocation
// kubeletplugin) with the kubelet, prepares claims by writing CDI specs that inject environment
// variables describing the devices, records them in a checkpoint, writes the claims'
// status.devices, and reports device health (faults) through the kubelet's health API.
// The behaviour mirrors kubernetes-sigs/dra-example-driver's kubelet plugin
// (cmd/dra-example-kubeletplugin: driver.go, state.go, cdi.go, checkpoint.go, health.go).
package kubeletplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// Config says where the kubelet's directories are and whom to talk to.
type Config struct {
	NodeName string
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	// PluginsDir holds one data directory per driver (socket dra.sock and the checkpoint):
	// /var/lib/kubelet/plugins on a node.
	PluginsDir string
	// RegistryDir is where the kubelet looks for registration sockets:
	// /var/lib/kubelet/plugins_registry on a node.
	RegistryDir string
	// CDIDir is where the container runtime reads CDI specs: /var/run/cdi.
	CDIDir string
	// HealthInterval is how often device health is re-sent while nothing changes.
	HealthInterval time.Duration
	Log            zerolog.Logger
	// Ready is called with true once every driver the node needs is registered (and false
	// while one is not), for the readiness probe.
	Ready func(bool)
	// Metrics receives the plugin's series; nil records nothing.
	Metrics *Metrics
}

func (c *Config) validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("the node name is required (--node-name or $NODE_NAME)"))
	}
	for name, dir := range map[string]string{"--plugins-dir": c.PluginsDir, "--registry-dir": c.RegistryDir, "--cdi-dir": c.CDIDir} {
		if !filepath.IsAbs(dir) {
			errs = append(errs, fmt.Errorf("%s must be an absolute path, got %q", name, dir))
		}
	}
	if c.HealthInterval <= 0 {
		errs = append(errs, errors.New("--health-interval must be positive"))
	}
	return errors.Join(errs...)
}

// Run serves until ctx ends. The set of drivers follows the pools: a driver starts when a pool
// targeting the node uses it, and also when an earlier process left prepared claims in its
// checkpoint (so the kubelet can unprepare them); it stops when neither holds any more.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Ready == nil {
		cfg.Ready = func(bool) {}
	}
	for _, dir := range []string{cfg.PluginsDir, cfg.RegistryDir, cfg.CDIDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	inv := newInventory(cfg.NodeName, cfg.Kube, cfg.Dynamic, cfg.Log)
	if err := inv.run(ctx); err != nil {
		if ctx.Err() != nil { // shut down before the caches synced: not a failure
			return nil
		}
		return err
	}
	running := map[string]*running{}
	defer func() {
		for _, r := range running {
			r.stop()
		}
	}()
	for {
		snap, changed := inv.current()
		want, err := wantedDrivers(cfg.PluginsDir, snap)
		if err != nil {
			return err
		}
		for name, r := range running {
			if !slices.Contains(want, name) && r.drv.idle() {
				cfg.Log.Info().Str("driver", name).Msg("driver no longer used on this node; unregistering")
				r.stop()
				delete(running, name)
				cfg.Metrics.forget(name)
			}
		}
		ok := true
		for _, name := range want {
			if running[name] != nil {
				continue
			}
			r, err := start(ctx, cfg, inv, name)
			if err != nil {
				cfg.Log.Error().Err(err).Str("driver", name).Msg("driver not started; retrying")
				ok = false
				continue
			}
			running[name] = r
		}
		cfg.Ready(ok)
		cfg.Metrics.setRegistered(len(running))
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(10 * time.Second): // retries failed starts
		}
	}
}

// wantedDrivers is the drivers of the node's devices plus those with a non-empty checkpoint.
func wantedDrivers(pluginsDir string, snap snapshot) ([]string, error) {
	want := snap.drivers()
	entries, err := os.ReadDir(pluginsDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() || slices.Contains(want, e.Name()) {
			continue
		}
		if _, err := os.Stat(filepath.Join(pluginsDir, e.Name(), checkpointFile)); err != nil {
			continue
		}
		cp, err := loadCheckpoint(filepath.Join(pluginsDir, e.Name()))
		if err != nil {
			return nil, err
		}
		if len(cp.Claims) > 0 {
			want = append(want, e.Name())
		}
	}
	slices.Sort(want)
	return want, nil
}

type running struct {
	drv    *driver
	helper *kubeletplugin.Helper
}

func (r *running) stop() { r.helper.Stop() }

// idle reports whether the driver has no prepared claim left.
func (d *driver) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.cp.Claims) == 0
}

func start(ctx context.Context, cfg Config, inv *inventory, name string) (*running, error) {
	dataDir := filepath.Join(cfg.PluginsDir, name)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, err
	}
	cp, err := loadCheckpoint(dataDir)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.With().Str("driver", name).Logger()
	d := &driver{name: name, node: cfg.NodeName, cdiDir: cfg.CDIDir, inv: inv, claims: cfg.Kube.ResourceV1(), log: log,
		health: cfg.HealthInterval, now: time.Now, cp: cp, metrics: cfg.Metrics}
	cfg.Metrics.setPrepared(name, len(cp.Claims))
	// The helper logs through klog, which engine/logging routes into the same JSON stream.
	hctx := klog.NewContext(ctx, klog.Background().WithValues("driver", name))
	h, err := kubeletplugin.Start(hctx, d,
		kubeletplugin.DriverName(name),
		kubeletplugin.KubeClient(cfg.Kube),
		kubeletplugin.NodeName(cfg.NodeName),
		kubeletplugin.RegistrarDirectoryPath(cfg.RegistryDir),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
	)
	if err != nil {
		return nil, fmt.Errorf("start kubelet plugin %s: %w", name, err)
	}
	log.Info().Str("socket", filepath.Join(dataDir, "dra.sock")).Str("registration", filepath.Join(cfg.RegistryDir, name+"-reg.sock")).
		Int("prepared", len(cp.Claims)).Msg("kubelet plugin registered")
	return &running{drv: d, helper: h}, nil
}
