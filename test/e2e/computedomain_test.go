package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/draforge/draforge/drivers/computedomain"
	"github.com/draforge/draforge/drivers/gvr"
)

// TestComputeDomainChannels runs NVIDIA's own IMEX channel demos (demo/specs/imex at v0.4.1,
// unchanged) on simulated nodes whose compute-domain driver is a SimulatedDevicePool: the
// compute-domain machine writes the ComputeDomain's workload claim template, kube-scheduler
// allocates the channel, the simulated kubelet starts the pod only once the ComputeDomain lists
// its node Ready, and the node leaves the status when the pod is gone.
func TestComputeDomainChannels(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t)
	read := func(name string) []*unstructured.Unstructured {
		src, err := os.ReadFile(filepath.Join("testdata", "upstream", "dra-driver-nvidia-gpu", name))
		if err != nil {
			t.Fatal(err)
		}
		return decodeDocs(t, src)
	}
	classes := read("deviceclasses.yaml")
	pool := newPool(e.Namespace, "compute-domain", map[string]any{
		"driverName": computedomain.DriverName, "deviceType": "channel", "deviceCount": int64(1),
		"profile": "nvidia-compute-domain", "targetNodes": []any{"node-a", "node-b", "node-c"},
	})
	t.Cleanup(func() { e.DeleteDocs(t, append(classes, pool)) })
	for _, u := range classes {
		e.Apply(t, "", u)
	}
	e.Apply(t, "", pool)
	e.WaitPoolReady(t, e.Namespace, "compute-domain")

	for _, c := range []struct{ file, cd, template, pod, mode string }{
		{"channel-injection.yaml", "imex-channel-injection", "imex-channel-0", "imex-channel-injection", "Single"},
		{"channel-injection-all.yaml", "imex-channel-injection-all", "tpl-imex-channels", "imex-channel-injection-all", "All"},
	} {
		t.Run(c.file, func(t *testing.T) {
			docs := read(c.file)
			for _, u := range docs {
				e.Apply(t, e.Namespace, u)
			}
			t.Cleanup(func() { e.DeleteDocs(t, docs) })
			e.checkWorkload(t, e.Namespace, "pod", c.pod, "running", "", "")
			pod, err := e.Kube.CoreV1().Pods(e.Namespace).Get(t.Context(), c.pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cd := e.computeDomain(t, c.cd)
			// The workload template, owned by the ComputeDomain, with the driver's config.
			tpl, err := e.Kube.ResourceV1().ResourceClaimTemplates(e.Namespace).Get(t.Context(), c.template, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(tpl.OwnerReferences) != 1 || tpl.OwnerReferences[0].UID != cd.GetUID() ||
				tpl.Labels["resource.nvidia.com/computeDomain"] != string(cd.GetUID()) {
				t.Errorf("template %s: owners %+v labels %v, want the ComputeDomain %s", c.template, tpl.OwnerReferences, tpl.Labels, cd.GetUID())
			}
			cfg := tpl.Spec.Spec.Devices.Config
			if len(cfg) != 1 || cfg[0].Opaque == nil || cfg[0].Opaque.Driver != computedomain.DriverName ||
				string(cfg[0].Opaque.Parameters.Raw) != fmt.Sprintf(`{"allocationMode":%q,"apiVersion":"resource.nvidia.com/v1beta1","domainID":%q,"kind":"ComputeDomainChannelConfig"}`, c.mode, cd.GetUID()) {
				t.Errorf("template config %+v", cfg)
			}
			// The pod's claim has channel-0 of its node.
			claims, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, cl := range claims.Items {
				if len(cl.OwnerReferences) == 1 && cl.OwnerReferences[0].Name == c.pod && cl.Status.Allocation != nil {
					r := cl.Status.Allocation.Devices.Results
					found = len(r) == 1 && r[0].Driver == computedomain.DriverName && r[0].Device == "channel-0"
				}
			}
			if !found {
				t.Errorf("no claim of pod %s has channel-0: %+v", c.pod, claims.Items)
			}
			// status: numNodes 1, the pod's node Ready at index 0, the domain Ready.
			want := fmt.Sprintf("Ready [%s:0:Ready]", pod.Spec.NodeName)
			e.waitComputeDomain(t, c.cd, want)

			// The pod gone (its claim deleted by kube-controller-manager), the node leaves.
			if err := e.Kube.CoreV1().Pods(e.Namespace).Delete(t.Context(), c.pod, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			e.waitComputeDomain(t, c.cd, "NotReady []")
		})
	}

	// A channel claim in another namespace than its ComputeDomain: the driver refuses to
	// prepare it (AssertComputeDomainNamespace), so its pod never starts and the node never joins.
	t.Run("claim in another namespace", func(t *testing.T) {
		docs := read("channel-injection.yaml")
		for _, u := range docs {
			e.Apply(t, e.Namespace, u)
		}
		t.Cleanup(func() { e.DeleteDocs(t, docs) })
		e.checkWorkload(t, e.Namespace, "pod", "imex-channel-injection", "running", "", "")
		tpl, err := e.Kube.ResourceV1().ResourceClaimTemplates(e.Namespace).Get(t.Context(), "imex-channel-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		other := newEnv(t)
		stray := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
			"metadata": map[string]any{"name": "imex-channel-0", "namespace": other.Namespace},
		}}
		spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tpl.Spec)
		if err != nil {
			t.Fatal(err)
		}
		stray.Object["spec"] = spec
		other.Apply(t, "", stray)
		pod := docs[1].DeepCopy()
		pod.SetNamespace(other.Namespace)
		pod.SetResourceVersion("")
		other.Apply(t, "", pod)
		// Allocated and bound by kube-scheduler, then held by the simulated kubelet.
		eventually(t, 60*time.Second, func() (bool, string) {
			p, err := other.Kube.CoreV1().Pods(other.Namespace).Get(t.Context(), pod.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Spec.NodeName != "", "pod not bound yet"
		})
		time.Sleep(10 * time.Second)
		p, err := other.Kube.CoreV1().Pods(other.Namespace).Get(t.Context(), pod.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := podRunning(p); ok {
			t.Errorf("pod %s/%s runs with a channel of a ComputeDomain in another namespace", p.Namespace, p.Name)
		}
		first, err := e.Kube.CoreV1().Pods(e.Namespace).Get(t.Context(), "imex-channel-injection", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.waitComputeDomain(t, "imex-channel-injection", fmt.Sprintf("Ready [%s:0:Ready]", first.Spec.NodeName))
	})
}

func (e *env) computeDomain(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	cd, err := e.Dynamic.Resource(gvr.ComputeDomains).Namespace(e.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cd
}

// waitComputeDomain waits for the ComputeDomain's status, written "<status> [<node>:<index>:<status> ...]".
func (e *env) waitComputeDomain(t *testing.T, name, want string) {
	t.Helper()
	eventually(t, 60*time.Second, func() (bool, string) {
		cd, err := e.Dynamic.Resource(gvr.ComputeDomains).Namespace(e.Namespace).Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err != nil {
			return false, fmt.Sprint(err)
		}
		got, _, _ := unstructured.NestedString(cd.Object, "status", "status")
		got += " ["
		nodes, _, _ := unstructured.NestedSlice(cd.Object, "status", "nodes")
		for i, n := range nodes {
			m, _ := n.(map[string]any)
			if i > 0 {
				got += " "
			}
			got += fmt.Sprintf("%v:%v:%v", m["name"], m["index"], m["status"])
		}
		got += "]"
		return got == want, fmt.Sprintf("ComputeDomain %s status %s, want %s", name, got, want)
	})
}

// checkComputeDomainRunning waits for the ComputeDomain to be Ready with n nodes listed Ready,
// no (clique, index) twice, and reports the cliques it spans.
func (e *env) checkComputeDomainRunning(t *testing.T, ns, name, n string) {
	t.Helper()
	eventually(t, 90*time.Second, func() (bool, string) {
		cd, err := e.Dynamic.Resource(gvr.ComputeDomains).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		status, _, _ := unstructured.NestedString(cd.Object, "status", "status")
		nodes, _, _ := unstructured.NestedSlice(cd.Object, "status", "nodes")
		seen, cliques, ready := map[string]bool{}, map[string]int{}, 0
		for _, o := range nodes {
			m, _ := o.(map[string]any)
			key := fmt.Sprintf("%v/%v", m["cliqueID"], m["index"])
			if seen[key] {
				return false, "ComputeDomain " + name + " lists " + key + " twice"
			}
			seen[key] = true
			cliques[fmt.Sprint(m["cliqueID"])]++
			if m["status"] == "Ready" {
				ready++
			}
		}
		got := fmt.Sprintf("%s with %d nodes Ready", status, ready)
		return got == "Ready with "+n+" nodes Ready", fmt.Sprintf("ComputeDomain %s: %s (nodes per clique %v)", name, got, cliques)
	})
}
