// Package compactpod is the form the drivers' pod informer caches Pods in: the identity and the
// claim references DRAForge reads, without the rest of the API type. A typed corev1.Pod is
// 1,240 bytes even with every unread field cleared (PodSpec and PodStatus are large structs),
// which made a bound pod, also cached by the pod machine's own informer, cost over 6 KiB.
package compactpod

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Pod is a cached Pod reduced to what the allocator's pod index, the podClaims mapper and the
// serve views read. Cached objects are shared and must not be mutated.
type Pod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	NodeName string
	// Phase is status.phase, for the serve views: doctor's DRA010 skips pods in a terminal
	// phase, whose generated claims Kubernetes deletes. One of the constant strings (no
	// allocation per pod).
	Phase                 corev1.PodPhase
	ResourceClaims        []corev1.PodResourceClaim
	ResourceClaimStatuses []corev1.PodResourceClaimStatus
	// SchedulingGroup is the pod's PodGroup (a gang), for explain; nil for most pods.
	SchedulingGroup *corev1.PodSchedulingGroup
	// Scheduled is the PodScheduled condition, kept for allocation pods and pods not bound yet
	// (its message says why kube-scheduler cannot place them); nil for every other pod.
	Scheduled *corev1.PodCondition
}

// Kept are the paths of a Pod that the compact form keeps (see machine.Pruned), as From and
// Expand copy them: a machine that reads another field of a pod from the shared pod cache
// fails to load. Scheduled (status.conditions[type=PodScheduled]) is kept only by the caller
// that sets it.
var Kept = []string{"apiVersion", "kind",
	"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion", "metadata.labels",
	"metadata.ownerReferences", "metadata.deletionTimestamp",
	"spec.nodeName", "spec.resourceClaims", "spec.schedulingGroup", "status.phase", "status.resourceClaimStatuses"}

// From returns the compact form of p; it shares p's labels, references and claim lists.
func From(p *corev1.Pod) *Pod {
	return &Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, OwnerReferences: p.OwnerReferences, DeletionTimestamp: p.DeletionTimestamp,
		},
		NodeName:              p.Spec.NodeName,
		Phase:                 internPhase(p.Status.Phase),
		ResourceClaims:        p.Spec.ResourceClaims,
		ResourceClaimStatuses: p.Status.ResourceClaimStatuses,
		SchedulingGroup:       p.Spec.SchedulingGroup,
	}
}

// internPhase returns the package constant equal to phase, so cached pods share its bytes
// instead of each holding the decoder's copy; an unknown phase is kept as it is.
func internPhase(phase corev1.PodPhase) corev1.PodPhase {
	for _, known := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
		if phase == known {
			return known
		}
	}
	return phase
}

// Expand returns a new API Pod with the kept fields, deep-copied (a caller may change it).
func (p *Pod) Expand() *corev1.Pod {
	out := &corev1.Pod{TypeMeta: p.TypeMeta}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.NodeName = p.NodeName
	out.Spec.SchedulingGroup = p.SchedulingGroup.DeepCopy()
	out.Status.Phase = p.Phase
	for _, rc := range p.ResourceClaims {
		out.Spec.ResourceClaims = append(out.Spec.ResourceClaims, *rc.DeepCopy())
	}
	for _, st := range p.ResourceClaimStatuses {
		out.Status.ResourceClaimStatuses = append(out.Status.ResourceClaimStatuses, *st.DeepCopy())
	}
	if p.Scheduled != nil {
		out.Status.Conditions = []corev1.PodCondition{*p.Scheduled.DeepCopy()}
	}
	return out
}

// GetObjectKind implements runtime.Object.
func (p *Pod) GetObjectKind() schema.ObjectKind { return &p.TypeMeta }

// DeepCopyObject implements runtime.Object.
func (p *Pod) DeepCopyObject() runtime.Object {
	out := From(p.Expand())
	if p.Scheduled != nil {
		out.Scheduled = p.Scheduled.DeepCopy()
	}
	return out
}

// ExpandObject implements engine.Compact.
func (p *Pod) ExpandObject() runtime.Object { return p.Expand() }

// DecodeUnstructured implements engine.UnstructuredDecoder, for a pod cached unstructured.
func (p *Pod) DecodeUnstructured(u *unstructured.Unstructured) error {
	var full corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &full); err != nil {
		return err
	}
	*p = *From(&full)
	return nil
}
