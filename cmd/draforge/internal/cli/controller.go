package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/drivers/claims"
	"github.com/draforge/draforge/drivers/controller"
	"github.com/draforge/draforge/drivers/featuregates"
	"github.com/draforge/draforge/drivers/podnamespaces"
	"github.com/draforge/draforge/drivers/process"
	"github.com/draforge/draforge/engine/leader"
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
		Short: "Run the machines (" + strings.Join(machines.Names, ", ") + ") with leader election, probes and metrics",
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
	cfg, err := kf.config()
	if err != nil {
		return err
	}
	return controller.Run(ctx, cfg, controller.Options{
		Process: process.Options{Version: Version, LogLevel: o.logLevel, MachinesDir: o.machinesDir, QPS: o.qps, Burst: o.burst,
			Allocator: o.allocator, PodNamespaces: o.podNamespaces},
		Gates: o.gates, RuntimeAddr: o.runtimeAddr, DebugAddr: o.debugAddr, Profiling: o.profiling, Leader: o.leader,
		ReadyTimeout: o.readyTimeout, ReadyGrace: o.readyGrace, ShutdownWithin: o.shutdownWithin})
}

// defaultDebugAddress keeps the debug endpoints on loopback: they are unauthenticated, the
// machine history names objects of every namespace, and profiles cost CPU. The port is not the
// runtime port (8082) nor the kubelet plugin's (8083).
const defaultDebugAddress = "127.0.0.1:8084"
