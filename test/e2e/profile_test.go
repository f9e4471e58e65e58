package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// TestControlPlaneProfileDRAAll: with the dra-all profile kube-apiserver, kube-scheduler and
// kube-controller-manager start with every gate of the profile on (kube-apiserver's
// kubernetes_feature_enabled metric says so; a component that rejects a gate exits, which
// Start reports), PodGroups and Workloads are served (scheduling.k8s.io v1alpha3 and v1beta1)
// and a DeviceTaintRule written as resource.k8s.io/v1beta2 is accepted. The default control
// plane (the suite's) serves none of those versions.
func TestControlPlaneProfileDRAAll(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own control plane")
	}
	profile, err := cluster.ProfileNamed("dra-all")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Dir: t.TempDir(), Log: os.Stderr, Extra: cluster.Workloads, Profile: "dra-all"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	e := e2eutil.NewEnv(t, c.Kubeconfig)
	ctx := t.Context()

	metrics, err := e.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range profile.Gates {
		want := `kubernetes_feature_enabled{name="` + g.Name + `",stage="` + strings.ToUpper(g.Stage) + `"} 1`
		if !strings.Contains(string(metrics), want) {
			t.Errorf("kube-apiserver's metrics lack %s", want)
		}
	}

	served := func(d discovery.DiscoveryInterface, gv, resource string) bool {
		list, err := d.ServerResourcesForGroupVersion(gv)
		return err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource })
	}
	want := map[string][]string{
		"scheduling.k8s.io/v1alpha3": {"podgroups", "workloads", "compositepodgroups"},
		"scheduling.k8s.io/v1beta1":  {"podgroups", "workloads"},
		"resource.k8s.io/v1beta2":    {"devicetaintrules", "resourceclaims"},
		"resource.k8s.io/v1beta1":    {"resourceclaims"},
		"resource.k8s.io/v1alpha3":   {"resourcepoolstatusrequests"},
	}
	for gv, resources := range want {
		for _, r := range resources {
			if !served(e.Kube.Discovery(), gv, r) {
				t.Errorf("dra-all: %s %s not served", gv, r)
			}
		}
	}

	rules := schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1beta2", Resource: "devicetaintrules"}
	rule := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
		"metadata": map[string]any{"name": "maintenance"},
		"spec": map[string]any{
			"deviceSelector": map[string]any{"driver": "gpu.example.com"},
			"taint":          map[string]any{"key": "example.com/maintenance", "effect": "NoSchedule"},
		},
	}}
	if _, err := e.Dynamic.Resource(rules).Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Errorf("a v1beta2 DeviceTaintRule: %v", err)
	}

	if e2eutil.ExistingCluster(os.Getenv) != "" {
		return // the default profile's check needs the suite's own control plane
	}
	def := e2eutil.NewEnv(t, kubeconfigPath)
	for gv, resources := range want {
		if served(def.Kube.Discovery(), gv, resources[0]) {
			t.Errorf("default profile serves %s %s", gv, resources[0])
		}
	}
}
