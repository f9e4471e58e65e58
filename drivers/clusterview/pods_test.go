package clusterview

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/compactpod"
)

func names(pods []*corev1.Pod) string {
	s := ""
	for _, p := range pods {
		s += p.Name + ","
	}
	return s
}

// TestPods: a claim's pods are found by index on the informer's own (compact) pods: by name in
// spec.resourceClaims, by the generated name in status.resourceClaimStatuses, and the
// controlling owner pod by UID (only in the claim's namespace); updates and deletes show.
func TestPods(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, PodIndexers())
	pod := func(name string, mutate func(*corev1.Pod)) *compactpod.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")}}
		if mutate != nil {
			mutate(p)
		}
		return compactpod.From(p)
	}
	direct := pod("a", func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}}
	})
	generated := pod("b", func(p *corev1.Pod) {
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("shared")}}
	})
	owner := pod("owner", nil)
	elsewhere := compactpod.From(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "other", UID: "other-uid"}})
	for _, p := range []*compactpod.Pod{direct, generated, owner, elsewhere} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	view := PodsOver(idx)
	claim := func(name string, owners ...metav1.OwnerReference) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: owners}}
	}
	if got := names(view.For(claim("shared"))); got != "a,b," {
		t.Errorf("For(shared) = %s", got)
	}
	ref := func(uid types.UID, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "owner", UID: uid, Controller: ptr.To(controller)}
	}
	// The owner pod is found by name and must have the reference's UID (not a namesake).
	if got := names(view.For(claim("generated", ref("recreated-uid", true)))); got != "" {
		t.Errorf("a namesake of the owner counted: %s", got)
	}
	if got := names(view.For(claim("generated", ref("owner-uid", true)))); got != "owner," {
		t.Errorf("For(generated) = %s", got)
	}
	if got := names(view.For(claim("generated", ref("owner-uid", false), ref("other-uid", true)))); got != "" {
		t.Errorf("a non-controller owner or one in another namespace counted: %s", got)
	}
	got := view.For(claim("shared"))
	got[0].Name = "changed"
	if again := names(view.For(claim("shared"))); again != "a,b," {
		t.Errorf("For returned the cached pods themselves: %s", again)
	}
	if err := idx.Update(pod("a", nil)); err != nil {
		t.Fatal(err)
	}
	if err := idx.Delete(generated); err != nil {
		t.Fatal(err)
	}
	if got := names(view.For(claim("shared"))); got != "" {
		t.Errorf("For(shared) after update and delete = %s", got)
	}
}
