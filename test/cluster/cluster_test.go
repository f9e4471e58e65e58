package cluster

import (
	"slices"
	"strings"
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

// TestProfileArgs: the default profile adds no flag; dra-all gives the three Kubernetes
// components the same gates and kube-apiserver its API versions, and etcd nothing. An unknown
// profile is an error naming the known ones.
func TestProfileArgs(t *testing.T) {
	def, err := ProfileNamed("")
	if err != nil || def.Name != "default" {
		t.Fatalf("ProfileNamed(\"\") = %+v, %v", def, err)
	}
	for _, c := range []Component{Etcd, APIServer, Scheduler, ControllerManager} {
		if got := def.args(c); len(got) != 0 {
			t.Errorf("default profile gives %s %v", c, got)
		}
	}
	all, err := ProfileNamed("dra-all")
	if err != nil {
		t.Fatal(err)
	}
	api := all.args(APIServer)
	if len(api) != 2 || !strings.HasPrefix(api[0], "--feature-gates=") || !strings.Contains(api[0], "DRAWorkloadResourceClaims=true") ||
		!strings.Contains(api[0], "GenericWorkload=true") || api[1] != "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true,"+
		"resource.k8s.io/v1alpha3=true,scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true" {
		t.Errorf("kube-apiserver flags %v", api)
	}
	for _, c := range []Component{Scheduler, ControllerManager} {
		if got := all.args(c); !slices.Equal(got, api[:1]) {
			t.Errorf("%s flags %v, want %v", c, got, api[:1])
		}
	}
	if got := all.args(Etcd); len(got) != 0 {
		t.Errorf("etcd flags %v", got)
	}
	for _, g := range all.Gates {
		if g.KEP == "" || (g.Stage != "alpha" && g.Stage != "beta") {
			t.Errorf("gate %+v without its KEP or stage", g)
		}
	}
	if _, err := ProfileNamed("dra-everything"); err == nil || !strings.Contains(err.Error(), "dra-all") {
		t.Errorf("unknown profile: %v", err)
	}
}
