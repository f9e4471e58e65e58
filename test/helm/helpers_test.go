// Package helm tests the Helm chart in deploy/helm/draforge with the Helm CLI pinned in
// tools/helm: lint, rendering contracts, value validation, and that the chart's copies of the
// machines and the CRD match their sources. Install and RBAC tests against a real API server
// live in test/e2e (helm_test.go).
package helm

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/draforge/draforge/test/helmtool"
)

const release, namespace = "df", "draforge-system"

func chartDir(t *testing.T) string {
	t.Helper()
	dir, err := helmtool.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := helmtool.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// profile is the path of a values file shipped with the chart.
func profile(t *testing.T, name string) string {
	return filepath.Join(chartDir(t), name)
}

// helm runs the pinned helm and fails the test on error.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	res, err := helmtool.Run(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return res.Stdout
}

// rendered is the output of helm template, one object per document.
type rendered []*unstructured.Unstructured

// render runs helm template with extra args (--set, -f ...) and parses every document.
func render(t *testing.T, args ...string) rendered {
	t.Helper()
	out := helm(t, append([]string{"template", release, chartDir(t), "--namespace", namespace}, args...)...)
	return parse(t, out)
}

// renderErr runs helm template expecting a failure and returns its stderr.
func renderErr(t *testing.T, args ...string) string {
	t.Helper()
	res, err := helmtool.Run(t.Context(), append([]string{"template", release, chartDir(t), "--namespace", namespace}, args...)...)
	if err == nil {
		t.Fatalf("helm template %s succeeded, want an error; output:\n%s", strings.Join(args, " "), res.Stdout)
	}
	return res.Stderr
}

func parse(t *testing.T, out string) rendered {
	t.Helper()
	var objs rendered
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("parse rendered YAML: %v", err)
		}
		if m == nil {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatal("helm template rendered no objects")
	}
	return objs
}

// all returns the objects of a kind.
func (r rendered) all(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// get returns the object of kind and name, failing when absent.
func (r rendered) get(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.all(kind) {
		if o.GetName() == name {
			return o
		}
	}
	var have []string
	for _, o := range r {
		have = append(have, o.GetKind()+"/"+o.GetName())
	}
	t.Fatalf("%s %s not rendered; have %s", kind, name, strings.Join(have, ", "))
	return nil
}

// into converts an unstructured object to a typed one through YAML, as the API server would decode it.
func into[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	b, err := yaml.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%s %s does not decode strictly as %T: %v", o.GetKind(), o.GetName(), v, err)
	}
	return &v
}

func (r rendered) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	return into[appsv1.Deployment](t, r.get(t, "Deployment", name))
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

// flags maps --name=value args (the form the chart renders) to their values.
func flags(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			t.Errorf("arg %q is not in --name=value form", a)
		}
		if _, dup := m[name]; dup {
			t.Errorf("flag --%s given twice", name)
		}
		m[name] = value
	}
	return m
}
