package cluster

import (
	"slices"
	"testing"
	"time"
)

func TestNodeLifecycleArgs(t *testing.T) {
	if got := (NodeLifecycle{}).args(); len(got) != 0 {
		t.Errorf("zero NodeLifecycle gives %v, want the upstream defaults (no flags)", got)
	}
	got := NodeLifecycle{MonitorPeriod: time.Second, GracePeriod: 20 * time.Second}.args()
	want := []string{"--node-monitor-period=1s", "--node-monitor-grace-period=20s"}
	if !slices.Equal(got, want) {
		t.Errorf("args %v, want %v", got, want)
	}
}

func TestControllersCoverWorkloads(t *testing.T) {
	for _, c := range []string{"serviceaccount-controller", "serviceaccount-token-controller", "namespace-controller",
		"garbage-collector-controller", "resourceclaim-controller", "device-taint-eviction-controller",
		"job-controller", "replicaset-controller", "deployment-controller", "node-lifecycle-controller"} {
		if !slices.Contains(Controllers, c) {
			t.Errorf("kube-controller-manager would not run %s", c)
		}
	}
	if slices.Contains(Controllers, "node-ipam-controller") {
		t.Error("node-ipam-controller needs a cluster CIDR the local control plane does not have")
	}
}
