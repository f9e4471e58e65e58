package e2eutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simnode"
)

// ApplyFiles creates or updates every document of the files with server-side apply (field
// manager "e2e"), in file order. Namespaced objects without a namespace go to ns.
func (e *Env) ApplyFiles(t *testing.T, ns string, files ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range DecodeDocs(t, b) {
			out = append(out, e.Apply(t, ns, u))
		}
	}
	return out
}

// DecodeDocs decodes a multi-document YAML or JSON stream, skipping empty documents.
func DecodeDocs(t testing.TB, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// Apply server-side applies one object (namespace ns when it is namespaced and has none).
func (e *Env) Apply(t *testing.T, ns string, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := e.TryApply(t, ns, u)
	if err != nil {
		t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return got
}

// TryApply is Apply returning the API server's error (admission and validation tests).
func (e *Env) TryApply(t *testing.T, ns string, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	if u.GetKind() == simnode.Kind {
		// Not an API object: its Nodes are applied, as `draforge scenario apply` does.
		spec, err := simnode.Decode(u)
		if err != nil {
			return nil, err
		}
		return u, simnode.Apply(t.Context(), e.Dynamic, spec, nil)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("map %s: %v", gvk, err)
	}
	ri := e.Dynamic.Resource(m.Resource)
	var api interface {
		Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error)
	} = ri
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		api = ri.Namespace(u.GetNamespace())
	}
	var got *unstructured.Unstructured
	var last error
	// A namespace an earlier test deleted may still be terminating: wait for it to go.
	Eventually(t, 60*time.Second, func() (bool, string) {
		got, last = api.Apply(t.Context(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e", Force: true})
		// A pod in a namespace created a moment ago waits for its default ServiceAccount.
		return last == nil || !strings.Contains(last.Error(), "because it is being terminated") &&
			!strings.Contains(last.Error(), `serviceaccount "default" not found`), fmt.Sprint(last)
	})
	return got, last
}

// Setup installs the CRDs and the simulated nodes of examples/simulated-nodes.yaml, node-a/b/c
// (both idempotent).
func (e *Env) Setup(t *testing.T) {
	t.Helper()
	e.InstallCRDs(t)
	e.ApplyNodes(t, filepath.Join(RepoRoot(), "examples", "simulated-nodes.yaml"))
}

// ApplyNodes creates or updates the Nodes the SimulatedNodes documents of file declare, as
// `draforge nodes apply -f` does, and returns their names.
func (e *Env) ApplyNodes(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range DecodeDocs(t, b) {
		spec, err := simnode.Decode(u)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := simnode.Apply(t.Context(), e.Dynamic, spec, nil); err != nil {
			t.Fatal(err)
		}
		names = append(names, spec.NodeNames()...)
	}
	return names
}

// InstallCRDs server-side applies every CRD in deploy/crds, and NVIDIA's ComputeDomain CRD
// (deploy/crds/nvidia, as NVIDIA's chart installs it) for simulated compute domains, and waits
// until each is Established. It is idempotent, so every test that needs the CRDs calls it.
func (e *Env) InstallCRDs(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under deploy/crds: %v", err)
	}
	nvidia, _ := filepath.Glob(filepath.Join(RepoRoot(), "deploy", "crds", "nvidia", "*.yaml"))
	files = append(files, nvidia...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		e.ApplyCRDs(t, data)
	}
}

// ApplyCRDs server-side applies the CRD documents in data and waits until they are Established.
func (e *Env) ApplyCRDs(t *testing.T, data []byte) {
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
		if _, err := e.Dynamic.Resource(gvr.CustomResourceDefinitions).Apply(t.Context(), u.GetName(), u,
			metav1.ApplyOptions{FieldManager: "draforge-e2e", Force: true}); err != nil {
			t.Fatalf("apply CRD %s: %v", u.GetName(), err)
		}
		e.WaitEstablished(t, u.GetName())
	}
}

// WaitEstablished waits until the CRD is Established and its resource is served.
func (e *Env) WaitEstablished(t *testing.T, name string) {
	t.Helper()
	Eventually(t, 30*time.Second, func() (bool, string) {
		crd, err := e.Dynamic.Resource(gvr.CustomResourceDefinitions).Get(t.Context(), name, metav1.GetOptions{})
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
	gvrs := e.CRDServed(t, name)
	Eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Dynamic.Resource(gvrs).List(t.Context(), metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// CRDServed returns the GVR of the storage version of a CRD.
func (e *Env) CRDServed(t *testing.T, name string) schema.GroupVersionResource {
	t.Helper()
	crd, err := e.Dynamic.Resource(gvr.CustomResourceDefinitions).Get(t.Context(), name, metav1.GetOptions{})
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
