package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/draforge/draforge/drivers/claims"
	"github.com/draforge/draforge/drivers/featuregates"
	"github.com/draforge/draforge/drivers/podnamespaces"
	"github.com/draforge/draforge/drivers/process"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/health"
	"github.com/draforge/draforge/engine/leader"
	"github.com/draforge/draforge/engine/metrics"
	"github.com/draforge/draforge/machines"
)

type controllerOptions struct {
	machinesDir string
	runtimeAddr string
	// debugAddr is --debug-address: /debug/machines and /debug/pprof/, loopback unless set.
	debugAddr string
	logLevel  string
	qps       float32
	burst     int
	// featureGates is kube-scheduler's --feature-gates of the cluster; gates is it parsed.
	featureGates string
	gates        featuregates.Gates
	// allocatorName is --allocator; allocator is it parsed.
	allocatorName string
	allocator     claims.Mode
	// podNamespaceNames is --pod-namespaces; podNamespaces is it parsed.
	podNamespaceNames []string
	podNamespaces     podnamespaces.Set
	// profiling serves net/http/pprof on the debug address (as kube components' --profiling).
	profiling bool
	// gcPercent is --gc-percent, the GC target unless GOGC is set.
	gcPercent int
	lifecycle
	leader leader.Config
}

func newController(kf *kubeFlags) *cobra.Command {
	o := &controllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the pool and claim machines (with leader election, probes and metrics)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runController(cmd.Context(), kf, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.machinesDir, "machines", "", "directory of CUE machine files replacing the embedded ones; it must declare every machine the controller runs ("+
		strings.Join(machines.Names, ", ")+"), each once")
	f.StringVar(&o.runtimeAddr, "runtime-address", ":8082", "address of /healthz, /readyz and /metrics (probes and scraping)")
	f.StringVar(&o.debugAddr, "debug-address", defaultDebugAddress, "address of the unauthenticated debug endpoints: /debug/machines/ (object state and transition history, for "+
		"serve and doctor --controller-url) and, with --profiling, /debug/pprof/; it also answers /healthz, /readyz and /metrics. Loopback by default "+
		"(reach it with kubectl port-forward); an empty value serves no debug endpoint")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.Float32Var(&o.qps, "kube-api-qps", 50, "client-side QPS limit towards the API server")
	f.IntVar(&o.burst, "kube-api-burst", 100, "client-side burst towards the API server")
	f.StringVar(&o.featureGates, "feature-gates", "", "kube-scheduler's --feature-gates of the cluster (Name=true,...), when they differ from the Kubernetes "+
		featuregates.KubernetesVersion+" defaults; the DRA gates decide the allocator's features, others are ignored")
	f.StringVar(&o.allocatorName, "allocator", string(claims.KubeScheduler), "who allocates standalone claims (claims no pod uses): "+
		"kube-scheduler (through a short-lived allocation pod per claim, so kube-scheduler is the only allocator and no device is allocated twice) "+
		"or simulator (the simulator's own allocator, for control planes without kube-scheduler; with kube-scheduler running both may pick the same device)")
	f.StringSliceVar(&o.podNamespaceNames, podnamespaces.Flag, nil, "namespaces in which the controller writes pods (creates allocation pods, "+
		"completes the deletion of pods on simulated nodes, writes their status), comma-separated; empty: every namespace. "+
		"Elsewhere it leaves pods alone and reports the claim or pod as pending with reason "+podnamespaces.Reason+
		" (the Helm chart grants pod writes by a Role in each of these namespaces: controller.podNamespaces)")
	f.IntVar(&o.gcPercent, "gc-percent", 200, "Go GC target percentage (GOGC) unless the GOGC environment variable is set: "+
		"the caches are most of the heap and every watch event allocates, so 200 trades half again the heap for about half the garbage collector's CPU")
	f.BoolVar(&o.profiling, "profiling", false, "serve Go profiles at /debug/pprof/ on the --debug-address (unauthenticated: keep the address private)")
	o.lifecycle.addFlags(f, "graceful shutdown limit after SIGINT/SIGTERM")
	o.leader.AddFlags(f)
	return cmd
}

func (o *controllerOptions) validate() error {
	errs := o.lifecycle.validate()
	if o.profiling && o.debugAddr == "" {
		errs = append(errs, errors.New("--profiling serves /debug/pprof/ on the --debug-address, which is empty"))
	}
	if o.gcPercent < 1 {
		errs = append(errs, fmt.Errorf("--gc-percent %d: must be at least 1 (set GOGC=off to turn the collector off)", o.gcPercent))
	}
	var err error
	if o.gates, err = featuregates.Parse(o.featureGates); err != nil {
		errs = append(errs, err)
	}
	if o.allocator, err = claims.ParseMode(o.allocatorName); err != nil {
		errs = append(errs, err)
	}
	if o.podNamespaces, err = podnamespaces.Parse(o.podNamespaceNames); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, o.leader.Validate())...)
}

func runController(ctx context.Context, kf *kubeFlags, o *controllerOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(o.gcPercent)
	}
	m0 := metrics.New()
	features := o.gates.Allocator()
	cfg, err := kf.config()
	if err != nil {
		return err
	}
	rt, err := process.New(cfg, process.Options{Component: "controller", Version: Version, LogLevel: o.logLevel, MachinesDir: o.machinesDir,
		QPS: o.qps, Burst: o.burst, Metrics: m0.Registry, AllocatorFeatures: &features,
		IgnoreDeviceTaintRules: !o.gates.DeviceTaintRules(), Allocator: o.allocator, PodNamespaces: o.podNamespaces})
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
	if o.leader.Enabled {
		el, err := leader.New(o.leader, kube, m0.Leader)
		if err != nil {
			return err
		}
		live.Watchdogs["leader_election"] = el.Watchdog()
		elector = el
	} else {
		m0.Leader.Set(1)
	}
	ready := &health.Readiness{Kube: kube, Timeout: o.readyTimeout, Grace: o.readyGrace, Synced: informers.Synced}
	plugins := []engine.Plugin{&health.Server{Addr: o.runtimeAddr, Handler: runtimeHandler(live, ready, m0), ShutdownTimeout: o.shutdownWithin}}
	if o.debugAddr != "" {
		plugins = append(plugins, &health.Server{Addr: o.debugAddr, Handler: debugHandler(live, ready, m0, eng.DebugHandler(), o.profiling), ShutdownTimeout: o.shutdownWithin})
	}

	log.Info().Int("machines", len(machines)).Bool("leaderElect", o.leader.Enabled).Str("allocator", string(o.allocator)).Str("podNamespaces", o.podNamespaces.String()).Str("runtimeAddress", o.runtimeAddr).
		Str("debugAddress", o.debugAddr).Str("featureGates", o.gates.String()).Str("allocatorFeatures", fmt.Sprintf("%+v", features)).Msg("controller starting")
	plugins = append(append(plugins, informers.Plugin(), eng.Plugin()), rt.Drivers.Plugins...)
	return process.Run(ctx, log, o.shutdownWithin, elector, plugins...)
}

// defaultDebugAddress keeps the debug endpoints on loopback: they are unauthenticated, the
// machine history names objects of every namespace, and profiles cost CPU. The port is not the
// runtime port (8082) nor the kubelet plugin's (8083).
const defaultDebugAddress = "127.0.0.1:8084"

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
