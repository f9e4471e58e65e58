package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Leader election timings of the two-process test; they satisfy
// leaseDuration > renewDeadline > 1.2 × retryPeriod.
const (
	leaseDuration   = 4 * time.Second
	renewDeadline   = 3 * time.Second
	retryPeriod     = 500 * time.Millisecond
	shutdownTimeout = 3 * time.Second
	leaseName       = "draforge-controller"
)

// startCandidate runs `draforge controller` with leader election on a Lease in ns.
func startCandidate(t *testing.T, ns, id string) *controller {
	t.Helper()
	return startController(t, "--leader-elect",
		"--leader-election-lease-namespace", ns, "--leader-election-identity", id,
		"--leader-election-lease-duration", leaseDuration.String(), "--leader-election-renew-deadline", renewDeadline.String(),
		"--leader-election-retry-period", retryPeriod.String(), "--shutdown-timeout", shutdownTimeout.String())
}

func holder(t *testing.T, e *env) string {
	lease, err := e.Kube.CoordinationV1().Leases(e.Namespace).Get(t.Context(), leaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// TestLeaderElectionTwoProcesses runs two real `draforge controller` processes on one Lease:
// exactly one leads and only it reports draforge_controller_leader 1; after kill -9 the other
// takes over once the lease expires; a graceful SIGTERM exits 0 within --shutdown-timeout
// without releasing the lease.
func TestLeaderElectionTwoProcesses(t *testing.T) {
	e := newEnv(t)
	installCRDs(t, e)
	bin := draforgeBinary(t)

	t.Run("flag-validation", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "controller", "--kubeconfig", kubeconfigPath, "--leader-elect",
			"--leader-election-lease-duration", "2s", "--leader-election-renew-deadline", "3s",
			"--runtime-address", freeAddr(t)).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("want a non-zero exit, got %v\n%s", err, out)
		}
		if want := "--leader-election-lease-duration (2s) must be greater than --leader-election-renew-deadline (3s)"; !strings.Contains(string(out), want) {
			t.Errorf("output %q does not say %q", out, want)
		}
	})

	procs := map[string]*controller{
		"a": startCandidate(t, e.Namespace, "a"),
		"b": startCandidate(t, e.Namespace, "b"),
	}
	other := func(id string) string {
		if id == "a" {
			return "b"
		}
		return "a"
	}
	// gauges returns "a=1 b=0" style state of the running processes.
	gauges := func() map[string]float64 {
		out := map[string]float64{}
		for id, p := range procs {
			if p.Running() {
				out[id] = p.Gauge("draforge_controller_leader")
			}
		}
		return out
	}

	var leader string
	eventually(t, 60*time.Second, func() (bool, string) {
		for id, p := range procs {
			if !p.Running() {
				t.Fatalf("controller %s exited: %v", id, p.ExitErr)
			}
		}
		leader = holder(t, e)
		g := gauges()
		if (leader == "a" || leader == "b") && g[leader] == 1 && g[other(leader)] == 0 {
			return true, ""
		}
		return false, fmt.Sprintf("lease holder %q, gauges %v", leader, g)
	})
	standby := other(leader)
	t.Logf("leader %s, standby %s", leader, standby)

	t.Run("probes", func(t *testing.T) {
		for id, p := range procs {
			eventually(t, 30*time.Second, func() (bool, string) {
				code, body := p.Get("/readyz")
				var res struct {
					Status string `json:"status"`
					Ready  bool   `json:"ready"`
					Reason string `json:"reason"`
				}
				if err := json.Unmarshal([]byte(body), &res); err != nil {
					return false, fmt.Sprintf("%s /readyz not JSON: %s", id, body)
				}
				return code == 200 && res.Status == "ready" && res.Ready && res.Reason == "ok", fmt.Sprintf("%s /readyz %d %s", id, code, body)
			})
			if code, body := p.Get("/healthz"); code != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
				t.Errorf("%s /healthz = %d %s", id, code, body)
			}
		}
	})

	// Leadership is stable: several renew periods later nothing moved.
	time.Sleep(4 * retryPeriod)
	if h, g := holder(t, e), gauges(); h != leader || g[leader] != 1 || g[standby] != 0 {
		t.Fatalf("leadership moved without a failure: holder %q gauges %v", h, g)
	}

	// kill -9 the leader: the standby must take over once the lease expires.
	killed := time.Now()
	if err := procs[leader].Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[leader].Exited
	var tookOver time.Duration
	deadline := killed.Add(30 * time.Second)
	for {
		if h, g := holder(t, e), gauges(); h == standby && g[standby] == 1 {
			tookOver = time.Since(killed)
			break
		}
		if !procs[standby].Running() {
			t.Fatalf("standby %s exited: %v", standby, procs[standby].ExitErr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby never took over: holder %q gauges %v", holder(t, e), gauges())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Lower bound: the killed leader renewed about one retryPeriod before dying (its renew
	// loop sleeps retryPeriod between renewals, and on a loaded machine the sleep and the
	// request can add up to another), so its lease is honoured for at least
	// leaseDuration - 2 × retryPeriod. Upper bound:
	// leaseDuration + retryPeriod as the operations guide states, plus slack for client-go's
	// acquire loop, which waits retryPeriod·(1+rand·1.2) between tries (up to 1.2 × retryPeriod
	// more, both to see the last renewal and to retry after expiry: 2 × 0.6s) and 0.5s for
	// this 50ms poll and the scrape.
	lower := leaseDuration - 2*retryPeriod
	upper := leaseDuration + retryPeriod + 2*time.Duration(1.2*float64(retryPeriod)) + 500*time.Millisecond
	t.Logf("takeover after kill -9: %s (allowed %s..%s)", tookOver.Round(time.Millisecond), lower, upper)
	if tookOver < lower || tookOver > upper {
		t.Errorf("takeover after %s, want within %s..%s", tookOver, lower, upper)
	}

	t.Run("graceful-shutdown-keeps-lease", func(t *testing.T) {
		p := procs[standby]
		start := time.Now()
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Exited:
		case <-time.After(shutdownTimeout + 2*time.Second):
			t.Fatalf("no exit within --shutdown-timeout %s (+2s)", shutdownTimeout)
		}
		took := time.Since(start)
		h := holder(t, e)
		t.Logf("SIGTERM → exit in %s; holder right after exit: %q", took.Round(time.Millisecond), h)
		if p.ExitErr != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0", p.ExitErr)
		}
		if took > shutdownTimeout+500*time.Millisecond {
			t.Errorf("exit took %s, more than --shutdown-timeout %s", took, shutdownTimeout)
		}
		if h != standby {
			t.Errorf("holder after graceful exit = %q, want %q (the lease must not be released early)", h, standby)
		}
	})
}
