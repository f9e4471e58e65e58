package engine

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/engine/machine"
)

// shortPod is a shrunk cache form of a pod, as a driver's CacheTyped shrink would make.
type shortPod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	NodeName string
}

func (p *shortPod) DeepCopyObject() runtime.Object { c := *p; return &c }

func selectablePods(inf *Informers) {
	inf.ListTyped(podsGVR, &cache.ListWatch{})
	inf.CacheTyped(podsGVR, func() runtime.Object { return &corev1.Pod{} }, func(o runtime.Object) runtime.Object {
		p := o.(*corev1.Pod)
		return &shortPod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels}, NodeName: p.Spec.NodeName}
	})
	inf.Selectable(podsGVR, Selectable{
		Fields: func(obj any) fields.Set {
			switch p := obj.(type) {
			case *corev1.Pod:
				return fields.Set{"spec.nodeName": p.Spec.NodeName}
			case *shortPod:
				return fields.Set{"spec.nodeName": p.NodeName}
			}
			return nil
		},
		Full: func(o runtime.Object) runtime.Object {
			o.(*corev1.Pod).Spec.Volumes = nil // what the full form drops
			return o
		},
	})
}

func boundPod(name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, ResourceVersion: "1"},
		Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "v"}}}}
}

// TestOwnObjectsFromTheSharedTypedCache: a machine with a selector on a Selectable resource
// reads the shared typed informer: the objects it selects are cached in full form and read as
// unstructured, the others are cached shrunk and are not its objects; its handler sees only
// its objects, and one that stops being selected as deleted.
func TestOwnObjectsFromTheSharedTypedCache(t *testing.T) {
	inf := NewInformers(nil)
	selectablePods(inf)
	m := &machine.Machine{Name: "pod", Resource: podsGVR, FieldSelector: "spec.nodeName!=", SelectorWithout: []string{"skip"}}
	o, err := ownObjects(inf, m)
	if err != nil {
		t.Fatal(err)
	}
	if o.match == nil || o.inf != inf.For(podsGVR) {
		t.Fatal("the machine does not read the shared informer")
	}
	transform := inf.transform(podsGVR)
	cached := map[string]any{}
	for _, p := range []*corev1.Pod{boundPod("bound", "n1", nil), boundPod("pending", "", nil), boundPod("skipped", "n1", map[string]string{"skip": "yes"})} {
		c, err := transform(p)
		if err != nil {
			t.Fatal(err)
		}
		cached[p.Name] = c
		if err := o.inf.GetStore().Add(c); err != nil {
			t.Fatal(err)
		}
	}
	if p, ok := cached["bound"].(*corev1.Pod); !ok || p.Spec.Volumes != nil {
		t.Fatalf("a selected pod is cached as %T, want the full form (pruned)", cached["bound"])
	}
	for _, n := range []string{"pending", "skipped"} {
		if _, ok := cached[n].(*shortPod); !ok {
			t.Fatalf("pod %s is cached as %T, want the shrunk form", n, cached[n])
		}
	}
	if keys := o.keys(); len(keys) != 1 || keys[0] != "ns/bound" {
		t.Errorf("keys = %v, want [ns/bound]", keys)
	}
	u, ok, err := o.get("ns/bound")
	if err != nil || !ok {
		t.Fatalf("get bound: %v %v", ok, err)
	}
	if node, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); node != "n1" || u.GetResourceVersion() != "1" {
		t.Errorf("unstructured pod = %v", u.Object)
	}
	if _, ok, _ := o.get("ns/pending"); ok {
		t.Error("an unselected pod is the machine's")
	}
	// A pass hands drivers the cache's own typed pod (PassCached), not a conversion.
	raw, _, _, _ := o.load("ns/bound")
	ctx := withPass(context.Background(), raw)
	if p, ok := PassCached[corev1.Pod](ctx); !ok || p != cached["bound"] {
		t.Errorf("PassCached = %p, %v; want the cached pod %p", p, ok, cached["bound"])
	}
	if p, ok := PassTyped[corev1.Pod](ctx, u); !ok || p != cached["bound"] {
		t.Errorf("PassTyped = %p, %v; want the cached pod %p, not a conversion", p, ok, cached["bound"])
	}
	if _, ok := PassCached[shortPod](ctx); ok {
		t.Error("PassCached of another type holds")
	}
	if _, ok := PassCached[corev1.Pod](context.Background()); ok {
		t.Error("PassCached outside a pass holds")
	}

	var got []string
	h := o.handler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { got = append(got, "add") },
		UpdateFunc: func(any, any) { got = append(got, "update") },
		DeleteFunc: func(any) { got = append(got, "delete") },
	})
	h.OnAdd(cached["pending"], false)
	h.OnAdd(cached["bound"], false)
	h.OnUpdate(cached["pending"], cached["bound"]) // bound now
	h.OnUpdate(cached["bound"], cached["skipped"]) // labelled away
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/bound", Obj: cached["bound"]})
	h.OnDelete(cached["pending"])
	if want := "add update delete delete"; strings.Join(got, " ") != want {
		t.Errorf("handler saw %q, want %q", strings.Join(got, " "), want)
	}
}

// TestOwnObjectsRefusesAnUnknownField: a field selector the typed cache cannot evaluate would
// select nothing; the machine fails to start, naming the field and what it may use.
func TestOwnObjectsRefusesAnUnknownField(t *testing.T) {
	inf := NewInformers(nil)
	selectablePods(inf)
	_, err := ownObjects(inf, &machine.Machine{Name: "pod", Resource: podsGVR, FieldSelector: "spec.schedulerName=x"})
	if err == nil || !strings.Contains(err.Error(), "spec.schedulerName is not a selectable field of pods (selectable: spec.nodeName)") {
		t.Fatalf("err = %v", err)
	}
}
