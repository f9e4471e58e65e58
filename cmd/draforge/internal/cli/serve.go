package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/drivers/httpapi"
	"github.com/draforge/draforge/drivers/process"
	"github.com/draforge/draforge/drivers/serve"
)

type serveOptions struct {
	addr          string
	logLevel      string
	corsOrigins   []string
	controllerURL string
	reports       string
	machinesDir   string
	qps           float32
	burst         int
	lifecycle
	doctorInterval  time.Duration
	rebuildInterval time.Duration
	heartbeat       time.Duration
}

func newServe(kf *kubeFlags) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the read-only HTTP API, the event stream and the dashboard",
		Long: `Serve watches SimulatedDevicePools, ResourceSlices, DeviceClasses, ResourceClaims, Pods and
Nodes with informers and answers every request from the newest snapshot of their caches; it never
lists from the API server per request. Doctor facts (discovery, the CRD, the controller) are
gathered every --doctor-interval. Machine states are derived from the caches by the machines'
derive rules alone (no driver, no queue, no write: serve only ever GETs and watches); their
transition history lives in the controller and is included when --controller-url is set.

The API is read-only and has no authentication: keep it behind a port-forward, a NetworkPolicy or
an authenticating proxy. CORS is not an authentication boundary.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), kf, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "address", ":8080", "listen address of the API, dashboard, /healthz, /readyz and /metrics")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringSliceVar(&o.corsOrigins, "cors-allowed-origins", nil, "exact origins (scheme://host[:port], comma-separated) allowed to read the API cross-origin; none by default, no wildcard")
	f.StringVar(&o.controllerURL, "controller-url", "", "base URL of the controller's --debug-address, e.g. http://127.0.0.1:8084 (machine history and the doctor's controller check; "+
		"its --runtime-address answers only the check)")
	f.StringVar(&o.reports, "reports", "", "directory of draforge replay's output (its --out directories) to serve under /reports/; the dashboard links the newest report")
	f.StringVar(&o.machinesDir, "machines", "", "directory of CUE machine files replacing the embedded ones (use the controller's; checked as the controller checks it)")
	f.Float32Var(&o.qps, "kube-api-qps", 20, "client-side QPS limit towards the API server")
	f.IntVar(&o.burst, "kube-api-burst", 40, "client-side burst towards the API server")
	o.lifecycle.addFlags(f, "graceful shutdown limit after SIGINT/SIGTERM (streams are cancelled at once)")
	f.DurationVar(&o.doctorInterval, "doctor-interval", 30*time.Second, "how often doctor facts (discovery, CRD, controller) are gathered")
	f.DurationVar(&o.rebuildInterval, "snapshot-interval", 250*time.Millisecond, "minimum time between two snapshot rebuilds")
	f.DurationVar(&o.heartbeat, "stream-heartbeat", 15*time.Second, "interval of the event stream's heartbeat comments")
	_ = f.MarkHidden("snapshot-interval")
	_ = f.MarkHidden("stream-heartbeat")
	return cmd
}

func (o *serveOptions) validate() error {
	errs := o.lifecycle.validate()
	if o.doctorInterval <= 0 || o.rebuildInterval <= 0 || o.heartbeat <= 0 {
		errs = append(errs, errors.New("--doctor-interval, --snapshot-interval and --stream-heartbeat must be positive"))
	}
	if _, err := httpapi.ParseOrigins(o.corsOrigins); err != nil {
		errs = append(errs, fmt.Errorf("--cors-allowed-origins: %w", err))
	}
	return errors.Join(errs...)
}

func runServe(ctx context.Context, kf *kubeFlags, o *serveOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	cfg, err := kf.config()
	if err != nil {
		return err
	}
	s, err := serve.New(cfg, serve.Options{
		Process: process.Options{Version: Version, LogLevel: o.logLevel, MachinesDir: o.machinesDir, QPS: o.qps, Burst: o.burst},
		Addr:    o.addr, AllowedOrigins: o.corsOrigins, ControllerURL: o.controllerURL, Reports: o.reports,
		ReadyTimeout: o.readyTimeout, ReadyGrace: o.readyGrace, ShutdownWithin: o.shutdownWithin,
		DoctorInterval: o.doctorInterval, SnapshotInterval: o.rebuildInterval, Heartbeat: o.heartbeat})
	if err != nil {
		return err
	}
	s.Log.Info().Str("address", o.addr).Int("corsOrigins", len(o.corsOrigins)).Bool("controllerURL", o.controllerURL != "").Msg("serve starting")
	return s.Run(ctx)
}
