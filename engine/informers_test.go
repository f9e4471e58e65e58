package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestDispatcherRunsFeedersFirst: whatever the registration order, a driver's store sees an
// event before any machine trigger reacts to it.
func TestDispatcherRunsFeedersFirst(t *testing.T) {
	var order []string
	h := func(name string) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { order = append(order, name) },
			UpdateFunc: func(any, any) { order = append(order, name) },
			DeleteFunc: func(any) { order = append(order, name) },
		}
	}
	d := &dispatcher{}
	d.add(h("trigger1"), false)
	d.add(h("feed1"), true)
	d.add(h("trigger2"), false)
	d.add(h("feed2"), true)
	d.OnAdd(nil, false)
	d.OnUpdate(nil, nil)
	d.OnDelete(nil)
	want := strings.Repeat("feed1,feed2,trigger1,trigger2,", 3)
	if got := strings.Join(order, ",") + ","; got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
}

// TestListTyped: For lists and watches a resource registered with ListTyped through its typed
// client, and caches what CacheTyped's shrink makes of each object (managedFields dropped);
// objects arriving by the watch go the same way.
func TestListTyped(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	}
	kube := fake.NewClientset(pod("p1"))
	i := NewInformers(nil)
	i.CacheTyped(pods, func() runtime.Object { return &corev1.Pod{} }, func(o runtime.Object) runtime.Object {
		p := o.(*corev1.Pod)
		p.Spec = corev1.PodSpec{NodeName: "shrunk:" + p.Spec.NodeName}
		return p
	})
	api := kube.CoreV1().Pods(metav1.NamespaceAll)
	i.ListTyped(pods, cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) },
		WatchFuncWithContext: api.Watch,
	}, kube))
	inf := i.For(pods)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := i.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cached := func(name string) (*corev1.Pod, bool) {
		o, ok, _ := inf.GetStore().GetByKey("ns/" + name)
		p, isPod := o.(*corev1.Pod)
		return p, ok && isPod
	}
	if p, ok := cached("p1"); !ok || p.Spec.NodeName != "shrunk:node-1" || p.ManagedFields != nil {
		t.Fatalf("listed pod %+v (cached %v), want a typed pod through the shrink, no managedFields", p, ok)
	}
	if p, _ := cached("p1"); p.APIVersion != "v1" || p.Kind != "Pod" {
		t.Errorf("listed pod has apiVersion %q kind %q, want v1 Pod as when converted from unstructured", p.APIVersion, p.Kind)
	}
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, pod("p2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, ok := cached("p2"); ok && p.Spec.NodeName == "shrunk:node-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("watched pod p2 not cached through the shrink")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, "ns"); len(objs) != 2 {
		t.Errorf("namespace index holds %d pods, want 2", len(objs))
	}
}

// TestListTypedScoped: ForName and ForNamespace of a resource registered with ListTypedScoped
// list and watch through its typed client, in their namespace, the name's field selector
// passed on, and cache typed objects.
func TestListTypedScoped(t *testing.T) {
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	lease := func(ns, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	}
	kube := fake.NewClientset(lease("kube-node-lease", "n1"), lease("kube-node-lease", "n2"), lease("other", "n1"))
	i := NewInformers(nil)
	i.CacheTyped(leases, func() runtime.Object { return &coordinationv1.Lease{} }, nil)
	var mu sync.Mutex // the two informers list at once
	var selectors []string
	i.ListTypedScoped(leases, func(namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
		api := kube.CoordinationV1().Leases(namespace)
		return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				tweak(&o)
				mu.Lock()
				selectors = append(selectors, o.FieldSelector)
				mu.Unlock()
				return api.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				tweak(&o)
				return api.Watch(ctx, o)
			},
		}, kube)
	})
	ns := i.ForNamespace(leases, "kube-node-lease")
	one := i.ForName(leases, "kube-node-lease", "n2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := i.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if keys := ns.GetStore().ListKeys(); len(keys) != 2 {
		t.Errorf("namespace informer holds %v, want the 2 leases of kube-node-lease", keys)
	}
	if o, ok, _ := ns.GetStore().GetByKey("kube-node-lease/n1"); !ok {
		t.Error("lease n1 not cached")
	} else if _, typed := o.(*coordinationv1.Lease); !typed {
		t.Errorf("cached as %T, want *coordinationv1.Lease", o)
	}
	// The fake client ignores field selectors: that the name informer asks with its name's is
	// what can be checked.
	if _, ok, _ := one.GetStore().GetByKey("kube-node-lease/n2"); !ok {
		t.Error("the name informer lacks its lease")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(selectors, "metadata.name=n2") {
		t.Errorf("list field selectors %q, want the name's", selectors)
	}
}
