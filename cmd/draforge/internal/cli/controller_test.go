package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/draforge/draforge/drivers/claims"
	"github.com/draforge/draforge/machines"
)

// TestControllerFeatureGates: --feature-gates is checked before anything starts, with
// kube-scheduler's errors, and sets the allocator's features.
func TestControllerFeatureGates(t *testing.T) {
	parse := func(flag string) (*controllerOptions, error) {
		cmd := newController(&kubeFlags{})
		if err := cmd.Flags().Parse([]string{"--feature-gates=" + flag}); err != nil {
			t.Fatal(err)
		}
		o := &controllerOptions{}
		// newController's options are closed over; read the flag back into fresh options.
		o.featureGates, _ = cmd.Flags().GetString("feature-gates")
		o.allocatorName, _ = cmd.Flags().GetString("allocator")
		o.gcPercent, _ = cmd.Flags().GetInt("gc-percent")
		o.lifecycle = lifecycle{readyTimeout: 1, shutdownWithin: 1}
		return o, o.validate()
	}
	if _, err := parse("DRAAdminAccess=false"); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("a locked gate must be refused, got %v", err)
	}
	o, err := parse("DRAConsumableCapacity=false,DRAFractionalCapacityRange=false,SchedulerQueueingHints=true")
	if err != nil {
		t.Fatal(err)
	}
	if f := o.gates.Allocator(); f.ConsumableCapacity || !f.PartitionableDevices {
		t.Errorf("features %+v", f)
	}
}

// TestControllerAllocatorFlag: --allocator defaults to kube-scheduler, accepts simulator and
// refuses anything else before anything starts.
func TestControllerAllocatorFlag(t *testing.T) {
	parse := func(args ...string) (*controllerOptions, error) {
		cmd := newController(&kubeFlags{})
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		o := &controllerOptions{lifecycle: lifecycle{readyTimeout: 1, shutdownWithin: 1}}
		o.allocatorName, _ = cmd.Flags().GetString("allocator")
		o.gcPercent, _ = cmd.Flags().GetInt("gc-percent")
		return o, o.validate()
	}
	if o, err := parse(); err != nil || o.allocator != claims.KubeScheduler {
		t.Errorf("default: %q, %v; want kube-scheduler", o.allocator, err)
	}
	if o, err := parse("--allocator=simulator"); err != nil || o.allocator != claims.Simulator {
		t.Errorf("--allocator=simulator: %q, %v", o.allocator, err)
	}
	if _, err := parse("--allocator=both"); err == nil || !strings.Contains(err.Error(), `--allocator "both"`) {
		t.Errorf("--allocator=both must be refused naming the flag, got %v", err)
	}
}

// TestControllerGCPercentFlag: --gc-percent defaults to 200 and refuses what would turn the
// collector off or make it run constantly, naming the flag.
func TestControllerGCPercentFlag(t *testing.T) {
	parse := func(args ...string) (*controllerOptions, error) {
		cmd := newController(&kubeFlags{})
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		o := &controllerOptions{lifecycle: lifecycle{readyTimeout: 1, shutdownWithin: 1}, allocatorName: string(claims.KubeScheduler)}
		o.gcPercent, _ = cmd.Flags().GetInt("gc-percent")
		return o, o.validate()
	}
	if o, err := parse(); err != nil || o.gcPercent != 200 {
		t.Errorf("default: %d, %v; want 200", o.gcPercent, err)
	}
	if o, err := parse("--gc-percent=100"); err != nil || o.gcPercent != 100 {
		t.Errorf("--gc-percent=100: %d, %v", o.gcPercent, err)
	}
	for _, bad := range []string{"0", "-1"} {
		if _, err := parse("--gc-percent=" + bad); err == nil || !strings.Contains(err.Error(), "--gc-percent "+bad) {
			t.Errorf("--gc-percent=%s must be refused naming the flag, got %v", bad, err)
		}
	}
}

// writeMachines copies the embedded machine files named in files into a new directory; extra
// maps a new file name to the embedded file it copies.
func writeMachines(t *testing.T, files []string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(to, from string) {
		src, err := machines.FS.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		write(f, f)
	}
	for to, from := range extra {
		write(to, from)
	}
	return dir
}

// TestControllerRefusesBadMachinesDir: a --machines directory that loads no machine, loads one
// twice or lacks one the controller runs stops the controller at startup with an error naming
// the path, before it serves a probe or talks to the API server (the kubeconfig points at a
// closed port, so a controller that started would only retry until the deadline).
func TestControllerRefusesBadMachinesDir(t *testing.T) {
	t.Setenv("GOGC", "100") // runController must not change the test process's GC target
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	all := []string{"claim.cue", "computedomain.cue", "gpuclique.cue", "node.cue", "pod.cue", "pool.cue"}
	missing := filepath.Join(t.TempDir(), "missing")
	empty := t.TempDir()
	twice := writeMachines(t, all, map[string]string{"pool-copy.cue": "pool.cue"})
	lacking := writeMachines(t, all[:5], nil)
	for _, c := range []struct {
		name, dir string
		want      []string
	}{
		{"missing", missing, []string{missing + ": no such directory"}},
		{"empty", empty, []string{empty + ": no machine files (*.cue)"}},
		{"twice", twice, []string{filepath.Join(twice, "pool.cue") + ":", `machine "pool" already defined at ` + filepath.Join(twice, "pool-copy.cue") + ":"}},
		{"lacking", lacking, []string{"--machines " + lacking + `: no machine "pool"`, "copy pool.cue"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			root := newRoot("draforge")
			root.SetOut(&bytes.Buffer{})
			root.SetErr(&bytes.Buffer{})
			root.SetArgs([]string{"controller", "--kubeconfig", kc, "--machines", c.dir,
				"--runtime-address", "127.0.0.1:0", "--debug-address", "127.0.0.1:0", "--log-level", "error"})
			err := root.ExecuteContext(ctx)
			if ctx.Err() != nil {
				t.Fatalf("the controller started with --machines %s instead of refusing it", c.dir)
			}
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to contain %q", err, w)
				}
			}
		})
	}
	// The same directories are what `machines vet DIR` refuses (it reports the lacking one
	// after the machines it loaded).
	root := newRoot("draforge")
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"machines", "vet", lacking})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), `no machine "pool"`) {
		t.Errorf("machines vet of a directory without pool: %v", err)
	}
}

// TestControllerDebugAddress: the debug endpoints default to loopback, the runtime address is
// the chart's, and --profiling without a debug address is refused (what each address serves:
// drivers/controller's TestRuntimeAndDebugHandlers).
func TestControllerDebugAddress(t *testing.T) {
	cmd := newController(&kubeFlags{})
	def := cmd.Flags().Lookup("debug-address").DefValue
	host, _, err := net.SplitHostPort(def)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("--debug-address defaults to %q, want a loopback address", def)
	}
	if rt := cmd.Flags().Lookup("runtime-address").DefValue; rt != ":8082" {
		t.Errorf("--runtime-address default %q changed: the chart's probes and Service use it", rt)
	}
	o := &controllerOptions{lifecycle: lifecycle{readyTimeout: 1, shutdownWithin: 1}, allocatorName: string(claims.KubeScheduler), gcPercent: 200,
		profiling: true}
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--profiling") {
		t.Errorf("--profiling with an empty --debug-address: %v", err)
	}
}

// TestControllerPodNamespacesFlag: --pod-namespaces defaults to every namespace, takes a
// comma-separated list and refuses what is not a namespace name before anything starts.
func TestControllerPodNamespacesFlag(t *testing.T) {
	parse := func(args ...string) (*controllerOptions, error) {
		cmd := newController(&kubeFlags{})
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		o := &controllerOptions{lifecycle: lifecycle{readyTimeout: 1, shutdownWithin: 1}, allocatorName: string(claims.KubeScheduler), gcPercent: 200}
		o.podNamespaceNames, _ = cmd.Flags().GetStringSlice("pod-namespaces")
		return o, o.validate()
	}
	if o, err := parse(); err != nil || !o.podNamespaces.All() {
		t.Errorf("default: %q, %v; want every namespace", o.podNamespaces, err)
	}
	o, err := parse("--pod-namespaces=team-b,team-a")
	if err != nil || o.podNamespaces.String() != "team-a,team-b" || o.podNamespaces.Allows("default") {
		t.Errorf("--pod-namespaces=team-b,team-a: %q, %v", o.podNamespaces, err)
	}
	if _, err := parse("--pod-namespaces=team-a,Team_B"); err == nil || !strings.Contains(err.Error(), `--pod-namespaces entry 2 "Team_B" is not a namespace name`) {
		t.Errorf("a bad namespace must be refused naming the flag, got %v", err)
	}
}
