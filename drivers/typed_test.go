package drivers

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/draforge/draforge/drivers/compactpod"
	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// TestTypedCachesShareObjects: slices, nodes and pods are cached once, typed (slices in compact
// form), managedFields stripped and pods and nodes pruned; the drivers' stores hold the
// informers' own pointers.
func TestTypedCachesShareObjects(t *testing.T) {
	toU := func(o any) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	node := "node-a"
	objs := []runtime.Object{
		toU(&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "pod-uid", ManagedFields: managed,
				Annotations: map[string]string{"big": "x"}, Labels: map[string]string{"app": "a"}},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "default",
				Containers:     []corev1.Container{{Name: "c", Image: "busybox"}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("claim")}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr("claim")}}}}),
		toU(&corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"x": "y"}, ManagedFields: managed},
			Status:     corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"busybox"}}}}}),
		toU(&resourcev1.ResourceSlice{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: managed},
			Spec: resourcev1.ResourceSliceSpec{Driver: simdevice.DefaultDriverName, NodeName: &node,
				Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}}}),
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvr.SimulatedDevicePools: "SimulatedDevicePoolList", gvr.ResourceSlices: "ResourceSliceList", gvr.DeviceClasses: "DeviceClassList", gvr.DeviceTaintRules: "DeviceTaintRuleList",
		gvr.ResourceClaims: "ResourceClaimList", gvr.Nodes: "NodeList", gvr.Pods: "PodList",
		gvr.CustomResourceDefinitions: "CustomResourceDefinitionList", gvr.ComputeDomains: "ComputeDomainList",
	}, objs...)
	inf := engine.NewInformers(client)
	set, err := Register(engine.NewRegistry(), Deps{Dynamic: client, Informers: inf, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := inf.Start(ctx); err != nil {
		t.Fatal(err)
	}

	o, _, _ := inf.For(gvr.Pods).GetStore().GetByKey("ns/p")
	pod, ok := o.(*compactpod.Pod)
	if !ok {
		t.Fatalf("pod cached as %T", o)
	}
	if pod.ManagedFields != nil || pod.Annotations != nil {
		t.Errorf("pod not pruned: %+v", pod)
	}
	if pod.NodeName != node || len(pod.ResourceClaims) != 1 || len(pod.ResourceClaimStatuses) != 1 ||
		pod.UID != "pod-uid" || pod.Labels["app"] != "a" {
		t.Errorf("pod lost fields it needs: %+v", pod)
	}
	if got, ok := engine.Typed[corev1.Pod](o); !ok || got.Spec.NodeName != node || got.Spec.Containers != nil || got.Status.Phase != corev1.PodRunning ||
		len(got.Spec.ResourceClaims) != 1 || got.Namespace != "ns" {
		t.Errorf("Typed expanded the cached pod to %+v", got)
	}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim"}}
	var pods []*corev1.Pod
	for deadline := time.Now().Add(5 * time.Second); len(pods) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // handlers run after the cache synced
		pods = set.Claims.Pods.For(claim)
	}
	if len(pods) != 1 || pods[0].UID != pod.UID {
		t.Errorf("pod index does not find the pod: %v", pods)
	}

	o, _, _ = inf.For(gvr.Nodes).GetStore().GetByKey(node)
	n, ok := o.(*corev1.Node)
	if !ok || n.ManagedFields != nil || n.Status.Images != nil || n.Labels["x"] != "y" {
		t.Errorf("node cached as %T %+v", o, o)
	}
	o, _, _ = inf.For(gvr.ResourceSlices).GetStore().GetByKey("s")
	if s, ok := o.(*compactslice.Slice); !ok || s.ManagedFields != nil || s.Pool().Name != "p" || s.NodeName() != node {
		t.Errorf("slice cached as %T %+v", o, o)
	}
	if s, ok := engine.Typed[resourcev1.ResourceSlice](o); !ok || s.Spec.Pool.Name != "p" || *s.Spec.NodeName != node {
		t.Errorf("slice expanded to %+v", s)
	}
}

func ptr[T any](v T) *T { return &v }
