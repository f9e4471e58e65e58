package cli

import (
	"strings"
	"testing"

	"github.com/draforge/draforge/drivers/claims"
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
