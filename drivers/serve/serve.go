// Package serve assembles `draforge serve`: the read-only process (drivers/process), the HTTP
// API over snapshots of its informer caches (drivers/httpapi), machine states derived from the
// caches (engine.Reader) and the doctor facts gathered in the background (drivers/doctor).
package serve

import (
	"context"
	"net/http"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/draforge/draforge/drivers/doctor"
	"github.com/draforge/draforge/drivers/httpapi"
	"github.com/draforge/draforge/drivers/process"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/health"
)

// Options are serve's settings, its flags parsed and checked by the caller.
type Options struct {
	// Process are the process's settings (New sets its Component; no driver option applies:
	// serve registers no driver). Its MachinesDir is checked as the controller checks it.
	Process process.Options
	// Addr serves the API, the dashboard, /healthz, /readyz and /metrics.
	Addr           string
	AllowedOrigins []string
	// ControllerURL is the controller's debug address ("": no machine history, no controller
	// check in doctor).
	ControllerURL string
	// Reports is draforge replay's output directory, served under /reports/ ("": none).
	Reports string
	// ReadyTimeout and ReadyGrace bound /readyz; ShutdownWithin bounds the server's shutdown.
	ReadyTimeout, ReadyGrace, ShutdownWithin time.Duration
	// DoctorInterval is how often doctor facts are gathered, SnapshotInterval the least time
	// between two snapshots, Heartbeat the event stream's heartbeat.
	DoctorInterval, SnapshotInterval, Heartbeat time.Duration
}

// Serve is serve built, not yet running: the HTTP server, the informers, the snapshot watcher
// and the doctor facts loop. It is read only: no driver, no queue, no allocator; machine states
// come from the pure derive step over the caches (engine.Reader).
type Serve struct {
	*process.Process
	// Plugins are what Run runs: the server, the informers, the watcher and the facts loop.
	Plugins        []engine.Plugin
	shutdownWithin time.Duration
}

// New builds serve over cfg (a fresh config: the process sets its rate limits and user agent).
func New(cfg *rest.Config, o Options) (*Serve, error) {
	po := o.Process
	po.Component = "serve"
	rt, err := process.NewReadOnly(cfg, po)
	if err != nil {
		return nil, err
	}
	log, kube, informers := rt.Log, rt.Kube, rt.Informers
	// Discovery and CRD reads of the doctor facts get their own bound.
	factsCfg := rest.CopyConfig(cfg)
	factsCfg.Timeout = 10 * time.Second
	factsKube, err := kubernetes.NewForConfig(factsCfg)
	if err != nil {
		return nil, err
	}
	factsDyn, err := dynamic.NewForConfig(factsCfg)
	if err != nil {
		return nil, err
	}

	reg, err := process.NewRegistry()
	if err != nil {
		return nil, err
	}

	states, err := engine.NewReader(informers, rt.Machines)
	if err != nil {
		return nil, err
	}
	httpClient := &http.Client{Timeout: 5 * time.Second}

	var srv *httpapi.Server
	ready := &health.Readiness{Kube: kube, Timeout: o.ReadyTimeout, Grace: o.ReadyGrace,
		Synced: func() bool { return informers.Synced() && srv.Ready() }}
	srv, err = httpapi.New(httpapi.Options{
		Addr: o.Addr, Log: log, Version: po.Version, AllowedOrigins: o.AllowedOrigins,
		Readiness: ready, Liveness: health.Liveness{}, Registry: reg,
		Machines:        &httpapi.EngineMachines{Engine: states, ControllerURL: o.ControllerURL, HTTP: httpClient},
		Heartbeat:       o.Heartbeat,
		ShutdownTimeout: o.ShutdownWithin,
		Reports:         o.Reports,
	})
	if err != nil {
		return nil, err
	}
	watcher := &httpapi.Watcher{Informers: informers, Server: srv, Interval: o.SnapshotInterval}
	if err := watcher.Register(); err != nil {
		return nil, err
	}
	facts := engine.PluginFunc(func(ctx context.Context) error {
		for {
			gctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			srv.SetFacts(doctor.Gather(gctx, doctor.GatherOptions{Discovery: factsKube.Discovery(), Dynamic: factsDyn,
				ControllerURL: o.ControllerURL, HTTP: httpClient}))
			cancel()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.DoctorInterval):
			}
		}
	})
	return &Serve{Process: rt, Plugins: []engine.Plugin{srv, informers.Plugin(), watcher, facts}, shutdownWithin: o.ShutdownWithin}, nil
}

// Run runs serve until ctx ends.
func (s *Serve) Run(ctx context.Context) error {
	// One second more than the server's own shutdown, so streams and requests end first.
	return process.Run(ctx, s.Log, s.shutdownWithin+time.Second, nil, s.Plugins...)
}
