package engine

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/draforge/draforge/engine/machine"
)

func TestRelIndexMapsBackToOwners(t *testing.T) {
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	var x relIndex
	x.link(leases, "kube-node-lease/n1", "n1")
	x.link(leases, "kube-node-lease/n1", "n1")
	x.link(leases, "kube-node-lease/shared", "n1")
	x.link(leases, "kube-node-lease/shared", "n2")
	got := x.ownersOf(leases, "kube-node-lease/shared")
	slices.Sort(got)
	if !slices.Equal(got, []string{"n1", "n2"}) || len(x.ownersOf(leases, "kube-node-lease/n1")) != 1 {
		t.Errorf("owners %v", got)
	}
	if len(x.ownersOf(schema.GroupVersionResource{Resource: "pods"}, "kube-node-lease/n1")) != 0 {
		t.Error("owners found under another resource")
	}
	x.forget("n1")
	if got := x.ownersOf(leases, "kube-node-lease/shared"); !slices.Equal(got, []string{"n2"}) || len(x.ownersOf(leases, "kube-node-lease/n1")) != 0 {
		t.Errorf("after forget: %v", got)
	}
}

func TestLiteralName(t *testing.T) {
	tmpl := func(s string) *machine.Template {
		c, err := machine.CompileString(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name, ns string
		want     bool
	}{
		{"simulateddevicepools.draforge.oaslananka", "", true},
		{"{{.object.metadata.name}}", "", false},
		{"fixed", "kube-node-lease", false}, // namespaced: watched through the shared informer
	} {
		rel := machine.Related{NameT: tmpl(tc.name)}
		if tc.ns != "" {
			rel.NamespaceT = tmpl(tc.ns)
		}
		if name, ok := literalName(rel); ok != tc.want || (ok && name != tc.name) {
			t.Errorf("literalName(%q) = %q, %v", tc.name, name, ok)
		}
	}
}
