package engine

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

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

// TestRelatedInformerScope: a related object is listed and watched as narrowly as its
// templates allow — one object for a literal name, one namespace for a literal namespace, the
// whole resource otherwise — so the chart's RBAC can be as narrow (a Role in kube-node-lease).
func TestRelatedInformerScope(t *testing.T) {
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	lease := func(ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("coordination.k8s.io/v1")
		u.SetKind("Lease")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	tmpl := func(s string) *machine.Template {
		if s == "" {
			return nil
		}
		c, err := machine.CompileString(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name, ns string
		// what the informer lists: namespace ("" = all) and field selector
		wantNS, wantFields string
		// the keys it caches (the fake client honours namespaces, not field selectors)
		wantKeys []string
	}{
		{"{{.object.metadata.name}}", "kube-node-lease", "kube-node-lease", "", []string{"kube-node-lease/n1", "kube-node-lease/n2"}},
		{"n1", "kube-node-lease", "kube-node-lease", "metadata.name=n1", []string{"kube-node-lease/n1", "kube-node-lease/n2"}},
		{"{{.object.metadata.name}}", "{{.object.metadata.namespace}}", "", "", []string{"default/n1", "kube-node-lease/n1", "kube-node-lease/n2"}},
		{"n1", "{{.object.metadata.namespace}}", "", "metadata.name=n1", []string{"default/n1", "kube-node-lease/n1", "kube-node-lease/n2"}},
	} {
		t.Run(tc.ns+"/"+tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{leases: "LeaseList"},
				lease("kube-node-lease", "n1"), lease("kube-node-lease", "n2"), lease("default", "n1"))
			i := NewInformers(dyn)
			inf := RelatedInformer(i, machine.Related{Name: "lease", Resource: leases, NamespaceT: tmpl(tc.ns), NameT: tmpl(tc.name)})
			if again := RelatedInformer(i, machine.Related{Name: "other", Resource: leases, NamespaceT: tmpl(tc.ns), NameT: tmpl(tc.name)}); again != inf {
				t.Error("the same scope got a second informer")
			}
			if err := i.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			var lists []string
			for _, a := range dyn.Actions() {
				if l, ok := a.(clienttesting.ListAction); ok {
					lists = append(lists, l.GetNamespace()+"|"+l.GetListRestrictions().Fields.String())
				}
			}
			if want := []string{tc.wantNS + "|" + tc.wantFields}; !slices.Equal(lists, want) {
				t.Errorf("lists %q, want %q", lists, want)
			}
			keys := inf.GetStore().ListKeys()
			slices.Sort(keys)
			if !slices.Equal(keys, tc.wantKeys) {
				t.Errorf("cached %v, want %v", keys, tc.wantKeys)
			}
		})
	}
}
