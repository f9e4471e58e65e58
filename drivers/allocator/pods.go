package allocator

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/compactpod"
)

// ClaimNeedsSimulatedAllocation reports whether DRAForge should allocate the claim itself: it
// is not allocated, not being deleted, and no unscheduled pod (spec.nodeName == "") references
// it, because kube-scheduler allocates the claims of the pods it schedules and we must not race
// it. pods may be any superset of the referencing pods (for example all pods of the namespace):
// references are checked here. A claim controlled by a Pod (generated from a template, or an
// extended-resource claim) is never ours: only kube-scheduler allocates it, and one whose pod
// is done or gone must stay unallocated, as kube-controller-manager's resourceclaim controller
// deletes it then (it re-creates a deleted template claim even for a finished pod, v1.37.2
// pkg/controller/resourceclaim podNeedsWork, and such a claim must not take devices).
// The claim's own allocation pod (drivers/allocationpod, --allocator kube-scheduler) does not
// count as a user: the claim stays standalone while kube-scheduler allocates it for that pod.
func ClaimNeedsSimulatedAllocation(claim *resourcev1.ResourceClaim, pods []*corev1.Pod) bool {
	if claim.Status.Allocation != nil || claim.DeletionTimestamp != nil || controlledByPod(claim) {
		return false
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" && PodReferencesClaim(pod, claim) && !allocationpod.Of(pod, claim) {
			return false
		}
	}
	return true
}

// PodReferencesClaim reports whether the pod uses the claim: by name in spec.resourceClaims, by
// the name recorded in status.resourceClaimStatuses for a claim generated from a template, or,
// before that status is written, as the claim's controlling owner.
func PodReferencesClaim(pod *corev1.Pod, claim *resourcev1.ResourceClaim) bool {
	if pod.Namespace != claim.Namespace {
		return false
	}
	if slices.Contains(ClaimNamesForPod(pod), claim.Name) {
		return true
	}
	return isOwnerPod(claim, pod.UID)
}

func controlledByPod(claim *resourcev1.ResourceClaim) bool {
	for _, ref := range claim.OwnerReferences {
		if ref.APIVersion == "v1" && ref.Kind == "Pod" && ptr.Deref(ref.Controller, false) {
			return true
		}
	}
	return false
}

func isOwnerPod(claim *resourcev1.ResourceClaim, podUID types.UID) bool {
	for _, ref := range claim.OwnerReferences {
		if ref.APIVersion == "v1" && ref.Kind == "Pod" && ref.UID == podUID && ptr.Deref(ref.Controller, false) {
			return true
		}
	}
	return false
}

// ClaimNamesForPod returns the sorted names of the claims (in the pod's namespace) that the pod
// references directly or through status.resourceClaimStatuses. It makes no assumption about how
// template-generated claims are named.
func ClaimNamesForPod(pod *corev1.Pod) []string {
	return claimNames(pod.Spec.ResourceClaims, pod.Status.ResourceClaimStatuses)
}

func claimNames(claims []corev1.PodResourceClaim, statuses []corev1.PodResourceClaimStatus) []string {
	names := sets.New[string]()
	for _, rc := range claims {
		if rc.ResourceClaimName != nil {
			names.Insert(*rc.ResourceClaimName)
		}
	}
	for _, st := range statuses {
		if st.ResourceClaimName != nil {
			names.Insert(*st.ResourceClaimName)
		}
	}
	return sets.List(names)
}

// ClaimKeysForPod returns ClaimNamesForPod as "namespace/name" keys; it can back a
// cache.IndexFunc on a pod informer.
func ClaimKeysForPod(pod *corev1.Pod) []string {
	names := ClaimNamesForPod(pod)
	for i, n := range names {
		names[i] = pod.Namespace + "/" + n
	}
	return names
}

// CompactClaimKeys is ClaimKeysForPod for a compact pod.
func CompactClaimKeys(pod *compactpod.Pod) []string {
	names := claimNames(pod.ResourceClaims, pod.ResourceClaimStatuses)
	for i, n := range names {
		names[i] = pod.Namespace + "/" + n
	}
	return names
}
