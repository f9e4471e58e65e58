// Package leader is the engine's leader-election plugin over a coordination.k8s.io Lease.
// The lease is never released early (ReleaseOnCancel=false) so an old leader and its
// replacement cannot overlap while work drains, and a process that loses the lease exits.
package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLost is returned when this process stops leading while it should still run.
var ErrLost = errors.New("leader lease lost")

// Config mirrors the --leader-elect and --leader-election-* flags.
type Config struct {
	Enabled        bool
	LeaseName      string
	LeaseNamespace string
	Identity       string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
}

// AddFlags binds the flags with the operations guide's defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	host, _ := os.Hostname()
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "default"
	}
	fs.BoolVar(&c.Enabled, "leader-elect", false, "run machines only while holding the leader Lease")
	fs.StringVar(&c.LeaseName, "leader-election-lease-name", "draforge-controller", "name of the leader Lease")
	fs.StringVar(&c.LeaseNamespace, "leader-election-lease-namespace", ns, "namespace of the leader Lease (default $POD_NAMESPACE or default)")
	fs.StringVar(&c.Identity, "leader-election-identity", identity, "holder identity (default $POD_NAME or host_pid)")
	fs.DurationVar(&c.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a non-renewed lease is honoured")
	fs.DurationVar(&c.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader retries renewing before giving up")
	fs.DurationVar(&c.RetryPeriod, "leader-election-retry-period", 2*time.Second, "interval between acquire/renew attempts")
}

// Validate enforces leaseDuration > renewDeadline > 1.2 × retryPeriod and non-empty names.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case c.LeaseName == "" || c.LeaseNamespace == "" || c.Identity == "":
		return errors.New("--leader-election-lease-name, --leader-election-lease-namespace and --leader-election-identity must not be empty")
	case c.RetryPeriod <= 0:
		return errors.New("--leader-election-retry-period must be positive")
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("--leader-election-lease-duration (%s) must be greater than --leader-election-renew-deadline (%s)", c.LeaseDuration, c.RenewDeadline)
	case float64(c.RenewDeadline) <= 1.2*float64(c.RetryPeriod):
		return fmt.Errorf("--leader-election-renew-deadline (%s) must be greater than 1.2 × --leader-election-retry-period (%s)", c.RenewDeadline, c.RetryPeriod)
	}
	return nil
}

// Elector implements engine.Elector.
type Elector struct {
	cfg      Config
	kube     kubernetes.Interface
	gauge    prometheus.Gauge
	watchdog *leaderelection.HealthzAdaptor
}

// New returns an elector; gauge (draforge_controller_leader) is 1 only while leading.
func New(cfg Config, kube kubernetes.Interface, gauge prometheus.Gauge) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Elector{cfg: cfg, kube: kube, gauge: gauge, watchdog: leaderelection.NewLeaderHealthzAdaptor(2 * time.Second)}, nil
}

// Watchdog fails /healthz when the leader stopped renewing its lease.
func (e *Elector) Watchdog() func(*http.Request) error { return e.watchdog.Check }

// Run campaigns for the lease and runs onLead while leading. It returns nil when ctx ends and
// ErrLost (or onLead's error) when leadership ends for any other reason.
func (e *Elector) Run(ctx context.Context, onLead func(ctx context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(e.cfg.LeaseName, e.cfg.LeaseNamespace),
		Client:     e.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
	}
	// client-go starts OnStartedLeading in a goroutine it does not wait for: track it, so Run
	// returns only after onLead has drained (the caller bounds that with its shutdown timeout),
	// and a callback that starts after le.Run returned does not run onLead at all.
	var (
		mu       sync.Mutex
		finished bool
		leading  sync.WaitGroup
		leadErr  error
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: false,
		Name:            e.cfg.LeaseName,
		WatchDog:        e.watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				mu.Lock()
				if finished {
					mu.Unlock()
					return
				}
				leading.Add(1)
				mu.Unlock()
				defer leading.Done()
				e.gauge.Set(1)
				leadErr = onLead(ctx)
			},
			OnStoppedLeading: func() { e.gauge.Set(0) },
		},
	})
	if err != nil {
		return err
	}
	// Only leaderelection.RunOrDie wires the watchdog itself; without this the /healthz
	// lease-renewal check never looks at anything.
	e.watchdog.SetLeaderElection(le)
	e.gauge.Set(0)
	le.Run(ctx)
	mu.Lock()
	finished = true
	mu.Unlock()
	leading.Wait()
	e.gauge.Set(0)
	if ctx.Err() != nil {
		return nil
	}
	if leadErr != nil {
		return leadErr
	}
	return ErrLost
}
