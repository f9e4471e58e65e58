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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
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
	// DriverNames are the driver names it may serve (--driver-names); "*" allows any. The
	// guard (guard.go) also refuses a name another plugin serves on the node.
	DriverNames []string
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
	if err := allowList(c.DriverNames).validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run serves until ctx ends. The set of drivers follows the pools: a driver starts when a pool
// targeting the node uses it, and also when an earlier process left prepared claims in its
// checkpoint (so the kubelet can unprepare them); it stops when neither holds any more. Every
// pass runs the guard (guard.go): a name is registered only when the guard allows it, and a
// running driver is stopped when another plugin of its name appears on the node.
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
	refused := map[string]string{} // driver name -> the refusal last logged
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
		verdicts, err := judge(ctx, cfg, inv, want, running)
		if err != nil {
			// Without the node's sockets no name can be vouched for: start none this pass.
			cfg.Log.Error().Err(err).Msg("sockets on the node not readable; no driver started this pass")
			verdicts = nil
		}
		ok := err == nil
		var refusals []refusalKey
		for _, v := range verdicts {
			name := v.Driver
			if !v.serve() {
				for _, rf := range v.Refusals {
					refusals = append(refusals, refusalKey{name, rf.Reason})
				}
				reportRefusal(cfg, refused, v, snap, running[name])
				if r := running[name]; r != nil {
					r.stop()
					delete(running, name)
					cfg.Metrics.forget(name)
				}
				continue
			}
			if _, was := refused[name]; was {
				cfg.Log.Info().Str("driver", name).Msg("driver name no longer refused")
				delete(refused, name)
			}
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
		for name := range refused {
			if !slices.Contains(want, name) {
				delete(refused, name)
			}
		}
		// Refused names do not make the pod unready: refusing is the plugin doing its job, and
		// an unready pod would stall the DaemonSet's rollout on that node for good.
		cfg.Ready(ok)
		cfg.Metrics.setRegistered(len(running))
		cfg.Metrics.setRefused(refusals)
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(10 * time.Second): // retries failed starts, re-runs the guard
		}
	}
}

// judge gathers the guard's inputs (the node's sockets and ResourceSlices, the data
// directories' marks) and returns its verdicts for the wanted names.
func judge(ctx context.Context, cfg Config, inv *inventory, want []string, running map[string]*running) ([]verdict, error) {
	var own []os.FileInfo
	var notRunning []string
	marked := map[string]bool{}
	for _, name := range want {
		if r := running[name]; r != nil {
			own = append(own, r.sockets()...)
			continue
		}
		notRunning = append(notRunning, name)
		marked[name] = ownsDataDir(filepath.Join(cfg.PluginsDir, name))
	}
	// Sockets are only looked at while a name is wanted: an idle plugin dials nobody.
	var sockets []socketFile
	if len(want) > 0 {
		var err error
		if sockets, err = scanSockets(ctx, cfg.RegistryDir, cfg.PluginsDir, notRunning, own); err != nil {
			return nil, err
		}
	}
	return decide(guardInput{Want: want, Allowed: cfg.DriverNames, Sockets: sockets, Slices: inv.nodeSlices(),
		Marked: marked, Node: cfg.NodeName}), nil
}

// reportRefusal logs a refusal when it is new or its reasons changed.
func reportRefusal(cfg Config, refused map[string]string, v verdict, snap snapshot, r *running) {
	msg := v.String()
	if refused[v.Driver] == msg {
		return
	}
	refused[v.Driver] = msg
	pools := map[string]bool{}
	for _, d := range snap[v.Driver] {
		pools[d.SDP] = true
	}
	ev := cfg.Log.Error().Str("driver", v.Driver).Str("reason", msg).Strs("pools", slices.Sorted(maps.Keys(pools)))
	if r != nil {
		ev.Msg("driver name refused: another plugin serves it on this node; unregistering it")
		return
	}
	ev.Msg("driver name refused: not registered with the kubelet")
}

// wantedDrivers is the drivers of the node's devices plus those with a non-empty checkpoint
// in a data directory of DRAForge's: the plugins directory is the kubelet's, shared with every
// other plugin on the node, whose checkpoints are none of ours.
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
		if _, err := os.Stat(filepath.Join(pluginsDir, e.Name(), checkpointFile)); err != nil || !ownsDataDir(filepath.Join(pluginsDir, e.Name())) {
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
	drv     *driver
	helper  *kubeletplugin.Helper
	dataDir string
	mu      sync.Mutex
	own     []os.FileInfo // the sockets its listeners created
}

// stop unregisters the driver: the helper closes its sockets (removing only its own files)
// and the data directory loses DRAForge's mark, so a socket found there later is not
// mistaken for one of ours.
func (r *running) stop() {
	r.helper.Stop()
	if err := unmarkDataDir(r.dataDir); err != nil {
		r.drv.log.Warn().Err(err).Msg("data directory mark not removed")
	}
}

func (r *running) sockets() []os.FileInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.own)
}

func (r *running) created(fi os.FileInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.own = append(r.own, fi)
}

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
	// Marked before the sockets exist: should this process die without removing them, the
	// next one knows they were DRAForge's.
	if err := markDataDir(dataDir); err != nil {
		return nil, err
	}
	log := cfg.Log.With().Str("driver", name).Logger()
	d := &driver{name: name, node: cfg.NodeName, cdiDir: cfg.CDIDir, inv: inv, claims: cfg.Kube.ResourceV1(), log: log,
		health: cfg.HealthInterval, now: time.Now, cp: cp, metrics: cfg.Metrics}
	cfg.Metrics.setPrepared(name, len(cp.Claims))
	r := &running{drv: d, dataDir: dataDir}
	guarded := guardedListener{created: r.created}
	// The helper logs through klog, which engine/logging routes into the same JSON stream.
	hctx := klog.NewContext(ctx, klog.Background().WithValues("driver", name))
	h, err := kubeletplugin.Start(hctx, d,
		kubeletplugin.RegistrarListener(guarded.listen),
		kubeletplugin.PluginListener(guarded.listen),
		kubeletplugin.DriverName(name),
		kubeletplugin.KubeClient(cfg.Kube),
		kubeletplugin.NodeName(cfg.NodeName),
		kubeletplugin.RegistrarDirectoryPath(cfg.RegistryDir),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
	)
	if err != nil {
		_ = unmarkDataDir(dataDir)
		return nil, fmt.Errorf("start kubelet plugin %s: %w", name, err)
	}
	r.helper = h
	log.Info().Str("socket", filepath.Join(dataDir, "dra.sock")).Str("registration", filepath.Join(cfg.RegistryDir, name+"-reg.sock")).
		Int("prepared", len(cp.Claims)).Msg("kubelet plugin registered")
	return r, nil
}
