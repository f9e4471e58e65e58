package cli

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/drivers/kubeletplugin"
	"github.com/draforge/draforge/drivers/simdevice"
)

type kubeletPluginOptions struct {
	addr           string
	logLevel       string
	nodeName       string
	pluginsDir     string
	registryDir    string
	cdiDir         string
	healthInterval time.Duration
	driverNames    []string
	lifecycle
}

func newKubeletPlugin(kf *kubeFlags) *cobra.Command {
	o := &kubeletPluginOptions{}
	cmd := &cobra.Command{
		Use:   "kubelet-plugin",
		Short: "Run the DRA kubelet plugin that prepares simulated devices on a real node",
		Long: `kubelet-plugin runs on every node (the chart's kubeletPlugin DaemonSet). For each DRA driver
name the SimulatedDevicePools targeting the node use, it registers with the kubelet
(--registry-dir) and serves the DRA gRPC API from --plugins-dir/<driver>/dra.sock: preparing a
claim writes a CDI spec to --cdi-dir that injects DRAFORGE_* environment variables describing
each device, records it in --plugins-dir/<driver>/checkpoint.json and writes the claim's
status.devices; unpreparing undoes that. Device health (the pools' "unhealthy" faults) goes to
the kubelet's DRA health API.

It serves only the driver names in --driver-names, and refuses a name another plugin serves on
the node: a socket of that name in --registry-dir or --plugins-dir/<driver> that it did not
create, or a ResourceSlice of that driver on the node without DRAForge's labels. A refused
name is logged and counted in draforge_kubelet_plugin_refused_drivers; the other names are
still served.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runKubeletPlugin(cmd.Context(), kf, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "runtime-address", ":8083", "listen address of /healthz, /readyz and /metrics")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	f.StringVar(&o.pluginsDir, "plugins-dir", "/var/lib/kubelet/plugins", "the kubelet's plugin data directory; each driver gets <dir>/<driver>")
	f.StringVar(&o.registryDir, "registry-dir", "/var/lib/kubelet/plugins_registry", "the kubelet's plugin registration directory")
	f.StringVar(&o.cdiDir, "cdi-dir", "/var/run/cdi", "the container runtime's CDI spec directory")
	f.DurationVar(&o.healthInterval, "health-interval", 10*time.Second, "how often device health is re-sent to the kubelet while nothing changes (the kubelet treats 30s without a report as unknown)")
	f.StringSliceVar(&o.driverNames, "driver-names", []string{simdevice.DefaultDriverName},
		`the DRA driver names it may serve, comma-separated ("*": any); a pool naming another driver is not served on this node`)
	o.lifecycle.addFlags(f, "graceful shutdown limit after SIGINT/SIGTERM")
	return cmd
}

func runKubeletPlugin(ctx context.Context, kf *kubeFlags, o *kubeletPluginOptions) error {
	if errs := o.lifecycle.validate(); len(errs) > 0 {
		return errs[0]
	}
	cfg, err := kf.config()
	if err != nil {
		return err
	}
	return kubeletplugin.RunProcess(ctx, cfg, kubeletplugin.ProcessOptions{Version: Version, LogLevel: o.logLevel, RuntimeAddr: o.addr,
		NodeName: o.nodeName, PluginsDir: o.pluginsDir, RegistryDir: o.registryDir, CDIDir: o.cdiDir,
		HealthInterval: o.healthInterval, DriverNames: o.driverNames,
		ReadyTimeout: o.readyTimeout, ReadyGrace: o.readyGrace, ShutdownWithin: o.shutdownWithin})
}
