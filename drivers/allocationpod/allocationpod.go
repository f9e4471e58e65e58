// Package allocationpod builds the allocation pod through which kube-scheduler allocates a
// standalone ResourceClaim (one no pod uses) when the controller runs with --allocator
// kube-scheduler: the pod references the claim, kube-scheduler allocates the claim for it with
// its own in-flight tracking (so no device is ever handed out twice by two allocators), and the
// claim machine then takes the claim over and deletes the pod, which never runs.
package allocationpod

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/simnode"
)

const (
	// Label marks an allocation pod; its value is the UID of the claim it allocates (a claim
	// name may be longer than a label value may be). The simulated kubelet never selects pods
	// carrying it.
	Label = "draforge.oaslananka/allocation-pod"
	// ClaimAnnotation names the claim, for people reading `kubectl get pod -o yaml`.
	ClaimAnnotation = "draforge.oaslananka/allocation-for"
	// NamePrefix starts every allocation pod's name; the claim's UID follows, so a claim
	// re-created under the same name never finds its predecessor's pod.
	NamePrefix = "draforge-alloc-"
	// PodClaimName is the pod's name for the claim (spec.resourceClaims[0].name).
	PodClaimName = "claim"
	// Image is the container image named in the spec. The pod never runs; the name is in the
	// reserved .invalid domain (RFC 6761) so that no container could start even if a real
	// kubelet admitted the pod.
	Image = "draforge.invalid/allocation-pod:never-runs"
)

// Name is the name of the claim's allocation pod.
func Name(claim *resourcev1.ResourceClaim) string { return NamePrefix + string(claim.UID) }

// Is reports whether pod is an allocation pod (of any claim).
func Is(pod *corev1.Pod) bool {
	_, ok := pod.Labels[Label]
	return ok
}

// Of reports whether pod is the allocation pod of claim.
func Of(pod *corev1.Pod, claim *resourcev1.ResourceClaim) bool {
	return pod.Namespace == claim.Namespace && pod.Labels[Label] == string(claim.UID) && claim.UID != ""
}

// Build returns the allocation pod of claim: in the claim's namespace, referencing it by
// resourceClaimName, owned by it (the garbage collector removes the pod with the claim),
// tolerating every taint (node taints play no part in a standalone claim's allocation, as for
// the simulator's own allocator), without resource requests (only the claim decides where it
// fits), without a service account token, scheduled by the default scheduler.
//
// It can only be placed on a simulated node: a required node affinity on the simulated-node
// label, which kube-scheduler honours when it places the pod and a real kubelet checks again
// when it admits one (its predicate admission runs the scheduler's node affinity filter,
// v1.37.2 pkg/kubelet/lifecycle/predicate.go) before it prepares any device. Its image cannot
// be pulled, so not even a kubelet whose node wrongly carries the label could start it.
func Build(claim *resourcev1.ResourceClaim) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        Name(claim),
			Namespace:   claim.Namespace,
			Labels:      map[string]string{Label: string(claim.UID)},
			Annotations: map[string]string{ClaimAnnotation: claim.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim", Name: claim.Name, UID: claim.UID,
				// Not the controller: a pod's controller is its workload (Job, ReplicaSet), and
				// tools reading pods' controllers must not take the claim for one.
			}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: simnode.LabelSimulated, Operator: corev1.NodeSelectorOpIn, Values: []string{simnode.LabelSimulatedValue},
					}},
				}}},
			}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: PodClaimName, ResourceClaimName: ptr.To(claim.Name)}},
			Containers: []corev1.Container{{
				Name:  "allocate",
				Image: Image,
				Resources: corev1.ResourceRequirements{
					Claims: []corev1.ResourceClaim{{Name: PodClaimName}},
				},
			}},
		},
	}
}

// ReservedFor reports whether claim is allocated and reserved for pod (by name and UID), i.e.
// kube-scheduler's PreBind wrote the allocation for the allocation pod.
func ReservedFor(claim *resourcev1.ResourceClaim, pod *corev1.Pod) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	for _, r := range claim.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" && r.Name == pod.Name && r.UID == pod.UID {
			return true
		}
	}
	return false
}

// ownEntry matches the reservedFor entry of the claim's allocation pod (by name: it holds the
// claim's UID, so no other pod has it).
func ownEntry(claim *resourcev1.ResourceClaim) func(resourcev1.ResourceClaimConsumerReference) bool {
	name := Name(claim)
	return func(r resourcev1.ResourceClaimConsumerReference) bool {
		return r.APIGroup == "" && r.Resource == "pods" && r.Name == name
	}
}

// ListsOwnPod reports whether the claim's reservedFor names its allocation pod.
func ListsOwnPod(claim *resourcev1.ResourceClaim) bool {
	return slices.ContainsFunc(claim.Status.ReservedFor, ownEntry(claim))
}

// Unreserve drops the claim's own allocation pod from reservedFor and reports whether there was
// an entry to drop.
func Unreserve(claim *resourcev1.ResourceClaim) bool {
	before := len(claim.Status.ReservedFor)
	claim.Status.ReservedFor = slices.DeleteFunc(claim.Status.ReservedFor, ownEntry(claim))
	return len(claim.Status.ReservedFor) < before
}

// HandedOver reports whether claim is in the state the handoff leaves it: allocated, reserved
// for nobody and without kube-scheduler's delete-protection finalizer (resourcev1.Finalizer),
// so that it stays allocated until deleted, as one the controller allocated itself. Whether its
// allocation pod is gone is the caller's to check.
func HandedOver(claim *resourcev1.ResourceClaim) bool {
	return claim.Status.Allocation != nil && len(claim.Status.ReservedFor) == 0 &&
		!slices.Contains(claim.Finalizers, resourcev1.Finalizer)
}
