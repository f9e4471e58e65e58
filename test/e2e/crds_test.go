package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs server-side applies every CRD in deploy/crds and waits until each is
// Established. It is idempotent, so every test that needs the CRDs calls it.
func installCRDs(t *testing.T, e *env) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(), "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under deploy/crds: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		applyCRDs(t, e, data)
	}
}

// applyCRDs server-side applies the CRD documents in data and waits until they are Established.
func applyCRDs(t *testing.T, e *env, data []byte) {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode CRD: %v", err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() != "CustomResourceDefinition" {
			t.Fatalf("not a CRD: %s %s", u.GetKind(), u.GetName())
		}
		if _, err := e.Dynamic.Resource(crdGVR).Apply(t.Context(), u.GetName(), u,
			metav1.ApplyOptions{FieldManager: "draforge-e2e", Force: true}); err != nil {
			t.Fatalf("apply CRD %s: %v", u.GetName(), err)
		}
		waitEstablished(t, e, u.GetName())
	}
}

func waitEstablished(t *testing.T, e *env, name string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		crd, err := e.Dynamic.Resource(crdGVR).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, ""
			}
		}
		return false, name + " not Established"
	})
	// Discovery can lag Established by a moment: wait until the resource is served.
	gvrs := crdServed(t, e, name)
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Dynamic.Resource(gvrs).List(t.Context(), metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// crdServed returns the GVR of the storage version of a CRD.
func crdServed(t *testing.T, e *env, name string) schema.GroupVersionResource {
	t.Helper()
	crd, err := e.Dynamic.Resource(crdGVR).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok && m["storage"] == true {
			return schema.GroupVersionResource{Group: group, Version: m["name"].(string), Resource: plural}
		}
	}
	t.Fatalf("CRD %s has no storage version", name)
	return schema.GroupVersionResource{}
}
