package compactpod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func pod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u0"}}},
		Spec: corev1.PodSpec{NodeName: "n1", ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c1")}},
			Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "t", ResourceClaimName: ptr.To("p-t-abc")}}},
	}
}

// TestExpandKeepsWhatIsRead: the expanded pod has the identity and claim references and
// nothing else, and changing it leaves the cached form alone.
func TestExpandKeepsWhatIsRead(t *testing.T) {
	c := From(pod())
	got := c.Expand()
	want := pod()
	want.Spec = corev1.PodSpec{NodeName: "n1", ResourceClaims: want.Spec.ResourceClaims}
	want.Status = corev1.PodStatus{Phase: corev1.PodRunning, ResourceClaimStatuses: want.Status.ResourceClaimStatuses}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("Expand = %+v, want %+v", got, want)
	}
	got.Labels["a"] = "changed"
	*got.Spec.ResourceClaims[0].ResourceClaimName = "changed"
	if c.Labels["a"] != "b" || *c.ResourceClaims[0].ResourceClaimName != "c1" {
		t.Error("changing the expanded pod changed the cached form")
	}
}

func TestDecodeUnstructured(t *testing.T) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod())
	if err != nil {
		t.Fatal(err)
	}
	var c Pod
	if err := c.DecodeUnstructured(&unstructured.Unstructured{Object: m}); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(c.Expand(), From(pod()).Expand()) {
		t.Errorf("decoded %+v", c)
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"nodeName": 3}}}
	if err := c.DecodeUnstructured(bad); err == nil {
		t.Error("a malformed pod decoded without error")
	}
}
