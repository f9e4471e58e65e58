package e2e

import (
	"os"
	"path/filepath"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestUpstreamExampleDriverSpecs applies dra-example-driver's own demo specs, unchanged
// (testdata/upstream), beside a pool shaped as the driver with the configuration each demo
// names and the DeviceClass its chart installs (templates/deviceclass.yaml: every device of
// driver gpu.example.com). Their pods must run on the simulated node, the claims allocated as
// the demo describes.
func TestUpstreamExampleDriverSpecs(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t)
	cases := []struct {
		file, profile string
		gpus          int
		// shared: every claim got gpu-0 and consumed the demo's 16Gi and 20 compute of it.
		shared bool
	}{
		// "Two Pods, One Container each, One GPU Each", on the chart's default (no partitions).
		{"basic-resourceclaimtemplate.yaml", "example-gpu-plain", 2, false},
		// "Two Pods sharing one GPU via AllowMultipleAllocations": gpuAllowMultipleAllocations=true, one GPU.
		{"gpu-allow-multiple-allocations.yaml", "example-gpu-shared", 1, true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			const node = "node-b"
			class := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
				"metadata": map[string]any{"name": "gpu.example.com"},
				"spec": map[string]any{"selectors": []any{map[string]any{
					"cel": map[string]any{"expression": "device.driver == 'gpu.example.com'"}}}},
			}}
			pool := newPool(e.Namespace, "example-driver", map[string]any{
				"driverName": "gpu.example.com", "deviceType": "gpu", "deviceCount": int64(c.gpus),
				"profile": c.profile, "targetNodes": []any{node},
			})
			e.Apply(t, "", class)
			e.Apply(t, "", pool)
			e.WaitPoolReady(t, e.Namespace, "example-driver")
			src, err := os.ReadFile(filepath.Join("testdata", "upstream", "dra-example-driver", c.file))
			if err != nil {
				t.Fatal(err)
			}
			docs := decodeDocs(t, src)
			t.Cleanup(func() { e.DeleteDocs(t, append(docs, pool, class)) })
			var pods []string
			ns := namespaceOf(docs)
			for _, u := range docs {
				e.Apply(t, "", u)
				if u.GetKind() == "Pod" {
					pods = append(pods, u.GetName())
				}
			}
			if len(pods) != 2 {
				t.Fatalf("%s: want the demo's two pods, found %v", c.file, pods)
			}
			for _, p := range pods {
				e.checkWorkload(t, ns, "pod", p, "running", node, "")
			}
			claims, err := e.Kube.ResourceV1().ResourceClaims(ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			devices := map[string]int{}
			for _, cl := range claims.Items {
				if cl.Status.Allocation == nil || len(cl.Status.Allocation.Devices.Results) != 1 {
					t.Fatalf("claim %s: want one allocated device, got %+v", cl.Name, cl.Status.Allocation)
				}
				r := cl.Status.Allocation.Devices.Results[0]
				devices[r.Device]++
				if c.shared {
					checkConsumed(t, cl.Name, r, map[resourcev1.QualifiedName]string{"memory": "16Gi", "compute": "20"})
				}
			}
			if len(claims.Items) != 2 {
				t.Fatalf("want 2 claims, got %d", len(claims.Items))
			}
			want := map[string]int{"gpu-0": 1, "gpu-1": 1}
			if c.shared {
				want = map[string]int{"gpu-0": 2}
			}
			if len(devices) != len(want) || devices["gpu-0"] != want["gpu-0"] {
				t.Errorf("devices allocated %v, want %v", devices, want)
			}
		})
	}
}

// checkConsumed checks an allocation result's consumed capacity.
func checkConsumed(t *testing.T, claim string, r resourcev1.DeviceRequestAllocationResult, want map[resourcev1.QualifiedName]string) {
	t.Helper()
	for k, v := range want {
		got, ok := r.ConsumedCapacity[k]
		if !ok || got.Cmp(resource.MustParse(v)) != 0 {
			t.Errorf("claim %s: consumed %s = %v, want %s (all: %v)", claim, k, got, v, r.ConsumedCapacity)
		}
	}
}
