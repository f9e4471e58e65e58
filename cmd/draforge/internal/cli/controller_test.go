package cli

import (
	"strings"
	"testing"
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
