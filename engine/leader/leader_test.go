package leader

import (
	"strings"
	"testing"
	"time"
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
		{"e2e timings", with(func(c *Config) { c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 4*time.Second, 3*time.Second, 500 * time.Millisecond }), ""},
		{"lease equal to renew", with(func(c *Config) { c.LeaseDuration = c.RenewDeadline }), "--leader-election-lease-duration (10s) must be greater than --leader-election-renew-deadline (10s)"},
		{"lease below renew", with(func(c *Config) { c.LeaseDuration, c.RenewDeadline = 2*time.Second, 3*time.Second }), "--leader-election-lease-duration (2s) must be greater than --leader-election-renew-deadline (3s)"},
		{"renew exactly 1.2 retry", with(func(c *Config) { c.RenewDeadline, c.RetryPeriod = 12*time.Second, 10 * time.Second }), "must be greater than 1.2 × --leader-election-retry-period (10s)"},
		{"renew just above 1.2 retry", with(func(c *Config) { c.RenewDeadline, c.RetryPeriod = 12*time.Second+time.Millisecond, 10 * time.Second }), ""},
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
