// Package controller assembles and runs `draforge controller`: the process (drivers/process)
// with the drivers registered, an Events recorder, the engine over the machines, leader
// election, and the runtime and debug HTTP servers (probes, metrics, machine history, profiles).
package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/draforge/draforge/drivers/featuregates"
	"github.com/draforge/draforge/drivers/process"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/health"
	"github.com/draforge/draforge/engine/leader"
	"github.com/draforge/draforge/engine/metrics"
)

// Options are the controller's settings, its flags parsed and checked by the caller.
type Options struct {
	// Process are the process's settings; Run sets its Component, Metrics, AllocatorFeatures
	// and IgnoreDeviceTaintRules (from Gates).
	Process process.Options
	// Gates are kube-scheduler's feature gates of the cluster: they decide the allocator's
	// features and whether DeviceTaintRules are honoured.
	Gates featuregates.Gates
	// RuntimeAddr serves /healthz, /readyz and /metrics; DebugAddr ("": none) serves those and
	// the machine history, plus Go profiles when Profiling is set.
	RuntimeAddr, DebugAddr string
	Profiling              bool
	Leader                 leader.Config
	// ReadyTimeout and ReadyGrace bound /readyz; ShutdownWithin bounds the shutdown.
	ReadyTimeout, ReadyGrace, ShutdownWithin time.Duration
}

// Run builds the controller over cfg (a fresh config: the process sets its rate limits and
// user agent) and runs it until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	m0 := metrics.New()
	features := o.Gates.Allocator()
	po := o.Process
	po.Component, po.Metrics, po.AllocatorFeatures, po.IgnoreDeviceTaintRules = "controller", m0.Registry, &features, !o.Gates.DeviceTaintRules()
	rt, err := process.New(cfg, po)
	if err != nil {
		return err
	}
	log, kube, dyn, informers, machines := rt.Log, rt.Kube, rt.Dynamic, rt.Informers, rt.Machines
	m0.InitMachines(machines)

	// Events get their own client (and so their own rate limiter), as in kube-scheduler: one
	// Event per transition must not halve the rate of the writes that do the work.
	eventClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventClient.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "draforge-controller"})

	eng, err := engine.New(engine.Options{
		Dynamic: dyn, Informers: informers, Registry: rt.Registry, Machines: machines,
		Recorder: recorder, Observer: m0, Log: log,
	})
	if err != nil {
		return err
	}

	var elector engine.Elector
	live := health.Liveness{Watchdogs: map[string]func(*http.Request) error{}}
	if o.Leader.Enabled {
		el, err := leader.New(o.Leader, kube, m0.Leader)
		if err != nil {
			return err
		}
		live.Watchdogs["leader_election"] = el.Watchdog()
		elector = el
	} else {
		m0.Leader.Set(1)
	}
	ready := &health.Readiness{Kube: kube, Timeout: o.ReadyTimeout, Grace: o.ReadyGrace, Synced: informers.Synced}
	plugins := []engine.Plugin{&health.Server{Addr: o.RuntimeAddr, Handler: runtimeHandler(live, ready, m0), ShutdownTimeout: o.ShutdownWithin}}
	if o.DebugAddr != "" {
		plugins = append(plugins, &health.Server{Addr: o.DebugAddr, Handler: debugHandler(live, ready, m0, eng.DebugHandler(), o.Profiling), ShutdownTimeout: o.ShutdownWithin})
	}

	log.Info().Int("machines", len(machines)).Bool("leaderElect", o.Leader.Enabled).Str("allocator", string(po.Allocator)).Str("podNamespaces", po.PodNamespaces.String()).Str("runtimeAddress", o.RuntimeAddr).
		Str("debugAddress", o.DebugAddr).Str("featureGates", o.Gates.String()).Str("allocatorFeatures", fmt.Sprintf("%+v", features)).Msg("controller starting")
	plugins = append(append(plugins, informers.Plugin(), eng.Plugin()), rt.Drivers.Plugins...)
	return process.Run(ctx, log, o.ShutdownWithin, elector, plugins...)
}

// runtimeHandler is the controller's runtime HTTP surface on every interface, what the kubelet's
// probes and Prometheus need: /healthz, /readyz and /metrics, nothing else.
func runtimeHandler(live health.Liveness, ready *health.Readiness, m *metrics.Metrics) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", live)
	mux.Handle("/readyz", ready)
	mux.Handle("/metrics", m.Handler())
	return mux
}

// debugHandler is the --debug-address surface: the runtime endpoints (so one --controller-url
// serves both serve's history and doctor's /readyz check), the read-only state and transition
// history of one object (for draforge serve --controller-url) and, with --profiling, Go profiles.
func debugHandler(live health.Liveness, ready *health.Readiness, m *metrics.Metrics, states http.Handler, profiling bool) *http.ServeMux {
	mux := runtimeHandler(live, ready, m)
	mux.Handle("GET /debug/machines/{machine}/{namespace}/{name}", states)
	mux.Handle("GET /debug/machines/{machine}/{name}", states) // cluster-scoped (node)
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
