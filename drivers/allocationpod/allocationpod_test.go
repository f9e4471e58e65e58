package allocationpod

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/simnode"
)

func claim() *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu-claim", Namespace: "team-a",
		UID: "0b9a6f0e-8f3c-4d43-9d0b-2f51d1e0a1c7"}}
}

// TestBuild: the pod references the claim, is owned by it (not as controller), tolerates every
// taint, requests nothing, mounts no token, is scheduled by the default scheduler and carries
// the label the pod machine leaves out.
func TestBuild(t *testing.T) {
	c := claim()
	p := Build(c)
	if p.Name != "draforge-alloc-"+string(c.UID) || p.Namespace != "team-a" {
		t.Errorf("pod %s/%s", p.Namespace, p.Name)
	}
	if errs := validation.IsDNS1123Subdomain(p.Name); len(errs) > 0 {
		t.Errorf("pod name %q: %v", p.Name, errs)
	}
	if v := p.Labels[Label]; v != string(c.UID) || len(validation.IsValidLabelValue(v)) > 0 {
		t.Errorf("label %s=%q", Label, v)
	}
	if p.Annotations[ClaimAnnotation] != "gpu-claim" {
		t.Errorf("annotations %v", p.Annotations)
	}
	if len(p.OwnerReferences) != 1 {
		t.Fatalf("owners %+v", p.OwnerReferences)
	}
	o := p.OwnerReferences[0]
	if o.APIVersion != "resource.k8s.io/v1" || o.Kind != "ResourceClaim" || o.Name != "gpu-claim" || o.UID != c.UID || ptr.Deref(o.Controller, false) || ptr.Deref(o.BlockOwnerDeletion, false) {
		t.Errorf("owner %+v", o)
	}
	s := p.Spec
	if len(s.ResourceClaims) != 1 || ptr.Deref(s.ResourceClaims[0].ResourceClaimName, "") != "gpu-claim" || s.ResourceClaims[0].ResourceClaimTemplateName != nil {
		t.Errorf("resourceClaims %+v", s.ResourceClaims)
	}
	if len(s.Tolerations) != 1 || s.Tolerations[0].Operator != corev1.TolerationOpExists || s.Tolerations[0].Key != "" || s.Tolerations[0].Effect != "" {
		t.Errorf("tolerations %+v, want one that tolerates every taint", s.Tolerations)
	}
	if !(s.AutomountServiceAccountToken != nil && !*s.AutomountServiceAccountToken) || s.SchedulerName != "" || s.NodeName != "" || s.NodeSelector != nil {
		t.Errorf("spec %+v", s)
	}
	// Only simulated nodes match, as kube-scheduler and a real kubelet's admission read it.
	required := nodeaffinity.GetRequiredNodeAffinity(p)
	for _, n := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{simnode.LabelSimulated: simnode.LabelSimulatedValue}, true},
		{nil, false},
		{map[string]string{simnode.LabelSimulated: "false"}, false},
		{map[string]string{"kubernetes.io/hostname": "node-a"}, false},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: n.labels}}
		if got, err := required.Match(node); err != nil || got != n.want {
			t.Errorf("node with labels %v: matches %v (%v), want %v", n.labels, got, err, n.want)
		}
	}
	if s.Containers[0].Image != Image || !strings.HasSuffix(strings.Split(Image, "/")[0], ".invalid") {
		t.Errorf("image %q: want one in the reserved .invalid domain, never pullable", s.Containers[0].Image)
	}
	if len(s.Containers) != 1 || len(s.Containers[0].Resources.Requests) != 0 || len(s.Containers[0].Resources.Limits) != 0 ||
		len(s.Containers[0].Resources.Claims) != 1 || s.Containers[0].Resources.Claims[0].Name != s.ResourceClaims[0].Name {
		t.Errorf("containers %+v", s.Containers)
	}
	if !Is(p) || !Of(p, c) {
		t.Error("the built pod is not recognised as the claim's allocation pod")
	}
}

func TestOf(t *testing.T) {
	c := claim()
	p := Build(c)
	other := claim()
	other.UID = "another"
	if Of(p, other) {
		t.Error("a claim re-created under the same name must not own its predecessor's pod")
	}
	p2 := Build(c)
	p2.Namespace = "team-b"
	if Of(p2, c) {
		t.Error("a pod of another namespace is not the claim's")
	}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: "team-a"}}
	if Is(plain) || Of(plain, c) {
		t.Error("a user pod is no allocation pod")
	}
	if Of(p, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}}) {
		t.Error("a claim without UID owns no pod")
	}
}

func TestReservedFor(t *testing.T) {
	c := claim()
	p := Build(c)
	p.UID = "pod-uid"
	ref := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{ref}
	if ReservedFor(c, p) {
		t.Error("a claim reserved but not allocated is not handed over")
	}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	if !ReservedFor(c, p) {
		t.Error("allocated and reserved for the pod")
	}
	stale := p.DeepCopy()
	stale.UID = "older"
	if ReservedFor(c, stale) {
		t.Error("a reservation for another pod of the same name")
	}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "user", UID: "u"}}
	if ReservedFor(c, p) {
		t.Error("reserved for another pod only")
	}
}

func TestHandedOver(t *testing.T) {
	c := claim()
	if HandedOver(c) {
		t.Error("an unallocated claim is not handed over")
	}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: Name(c), UID: "pod-uid"}}
	c.Finalizers = []string{"example.com/keep", resourcev1.Finalizer}
	if HandedOver(c) {
		t.Error("still reserved for its allocation pod and protected")
	}
	c.Status.ReservedFor = nil
	if HandedOver(c) {
		t.Error("kube-scheduler's delete-protection finalizer left on")
	}
	c.Finalizers = []string{"example.com/keep"}
	if !HandedOver(c) {
		t.Error("allocated, reserved for nobody, another owner's finalizer only: handed over")
	}
}

func TestUnreserve(t *testing.T) {
	c := claim()
	user := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "user", UID: "u"}
	other := resourcev1.ResourceClaimConsumerReference{APIGroup: "example.com", Resource: "pods", Name: Name(c), UID: "x"}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{user,
		{Resource: "pods", Name: Name(c), UID: "pod-uid"}, other}
	if !Unreserve(c) {
		t.Fatal("the allocation pod's entry was there to drop")
	}
	if want := []resourcev1.ResourceClaimConsumerReference{user, other}; !slices.Equal(c.Status.ReservedFor, want) {
		t.Errorf("reservedFor %v, want %v", c.Status.ReservedFor, want)
	}
	if Unreserve(c) {
		t.Error("nothing left to drop")
	}
}
