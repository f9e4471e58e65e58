package leader

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Enabled: true, LeaseName: "draforge-controller", LeaseNamespace: "ns", Identity: "a",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	cases := []struct {
		name    string
		cfg     Config
		wantErr string // "" = valid
	}{
		{"guide defaults", ok, ""},
		{"disabled skips every check", Config{}, ""},
		{"e2e timings", with(func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
		}), ""},
		{"lease equal to renew", with(func(c *Config) { c.LeaseDuration = c.RenewDeadline }), "--leader-election-lease-duration (10s) must be greater than --leader-election-renew-deadline (10s)"},
		{"lease below renew", with(func(c *Config) { c.LeaseDuration, c.RenewDeadline = 2*time.Second, 3*time.Second }), "--leader-election-lease-duration (2s) must be greater than --leader-election-renew-deadline (3s)"},
		{"renew exactly 1.2 retry", with(func(c *Config) { c.RenewDeadline, c.RetryPeriod = 12*time.Second, 10*time.Second }), "must be greater than 1.2 × --leader-election-retry-period (10s)"},
		{"renew just above 1.2 retry", with(func(c *Config) { c.RenewDeadline, c.RetryPeriod = 12*time.Second+time.Millisecond, 10*time.Second }), ""},
		{"renew below retry", with(func(c *Config) { c.RetryPeriod = 11 * time.Second }), "1.2 × --leader-election-retry-period (11s)"},
		{"zero retry", with(func(c *Config) { c.RetryPeriod = 0 }), "--leader-election-retry-period must be positive"},
		{"negative retry", with(func(c *Config) { c.RetryPeriod = -time.Second }), "--leader-election-retry-period must be positive"},
		{"empty lease name", with(func(c *Config) { c.LeaseName = "" }), "must not be empty"},
		{"empty namespace", with(func(c *Config) { c.LeaseNamespace = "" }), "must not be empty"},
		{"empty identity", with(func(c *Config) { c.Identity = "" }), "must not be empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErr != "" && err == nil:
				t.Fatalf("no error, want %q", c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr):
				t.Fatalf("error %q does not contain %q", err, c.wantErr)
			}
		})
	}
}

// TestRunWaitsForOnLead: on shutdown Run returns only after the leader's work has drained,
// never releases the Lease, and leaves the gauge at 0.
func TestRunWaitsForOnLead(t *testing.T) {
	kube := fake.NewClientset()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "draforge_controller_leader"})
	el, err := New(Config{Enabled: true, LeaseName: "l", LeaseNamespace: "ns", Identity: "a",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}, kube, gauge)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := make(chan struct{})
	var drained atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- el.Run(ctx, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			time.Sleep(300 * time.Millisecond) // in-flight work draining
			drained.Store(true)
			return nil
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("never started leading")
	}
	if v := gaugeValue(gauge); v != 1 {
		t.Errorf("gauge while leading = %v", v)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if !drained.Load() {
		t.Error("Run returned before onLead finished draining")
	}
	if v := gaugeValue(gauge); v != 0 {
		t.Errorf("gauge after Run = %v", v)
	}
	lease, err := kube.CoordinationV1().Leases("ns").Get(context.Background(), "l", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "a" {
		t.Errorf("holder after shutdown = %v, want a (no early release)", h)
	}
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	_ = g.Write(&m)
	return m.GetGauge().GetValue()
}
