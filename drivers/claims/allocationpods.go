package claims

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/engine"
)

// The allocation pod handoff (--allocator kube-scheduler), step by step:
//  1. createAllocationPod: the claim's allocation pod references it (drivers/allocationpod);
//  2. kube-scheduler allocates the claim for the pod in its scheduling cycle, with its own
//     in-flight record, adds the finalizer resource.kubernetes.io/delete-protection and writes
//     allocation + reservedFor in PreBind, then binds the pod (v1.37.2
//     pkg/scheduler/framework/plugins/dynamicresources bindClaim);
//  3. claimReservedForAllocationPod: the claim is allocated and reserved for the pod, and the
//     pod is bound, so kube-scheduler's binding cycle is over (no Unreserve can follow);
//  4. the machine removes the finalizer (merge patch carrying the resourceVersion);
//  5. completeAllocation deletes the pod with grace period 0 (it never ran).
//     kube-controller-manager's resourceclaim controller then drops it from reservedFor on the
//     pod's delete event (v1.37.2 pkg/controller/resourceclaim enqueuePod, syncClaim). It
//     deallocates only a claim that still carries the finalizer, and its status write carries
//     the resourceVersion it read: a stale read that still shows the finalizer conflicts, and
//     the retry sees it gone;
//  6. claimReservedForGoneAllocationPod / unreserveAllocationPod: an allocated claim still
//     reserved for its allocation pod unreserveGrace after a pass first found the pod gone
//     gets the entry dropped by the machine. kube-controller-manager may never hear of the
//     deletion: its pod informer, reconnecting after an API-server outage for the pod's whole
//     short life, gets no event, and the claim would stay reserved for a pod that does not
//     exist. Not at once: kube-controller-manager makes the same write moments after the
//     delete, and the two raced (one conflicted on every hand-off). Not before the delete:
//     kube-controller-manager reserves an allocated claim for a bound pod that uses it and is
//     not in reservedFor (syncPod, for pods bound without kube-scheduler), so it would put the
//     entry back.
// The claim ends allocated and reserved for nobody, as the simulator's allocator leaves it, but
// kube-scheduler made the decision.

// ownPod returns the claim's allocation pod from the pod cache, nil when there is none.
func (d *Driver) ownPod(claim *resourcev1.ResourceClaim) *corev1.Pod {
	for _, p := range d.Pods.For(claim) {
		if allocationpod.Of(p, claim) {
			return p
		}
	}
	return nil
}

// createPod creates the claim's allocation pod; one that already exists (an earlier pass whose
// cache was behind) is the same pod, as its name holds the claim's UID.
func (d *Driver) createPod(ctx context.Context, obj *unstructured.Unstructured) error {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return err
	}
	if err := d.PodNamespaces.Check(claim.Namespace, "cannot create allocation pod "+allocationpod.Name(claim)); err != nil {
		return err
	}
	_, err = d.kube.CoreV1().Pods(claim.Namespace).Create(ctx, allocationpod.Build(claim), metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case AdmissionWait(err):
		return engine.Pending("AllocationPodRefused", err.Error(), admissionRetry)
	}
	return err
}

// admissionRetry is how soon a pod refused by admission for a passing reason is tried again.
const admissionRetry = 2 * time.Second

// AdmissionWait reports whether a pod create was refused for a reason that passes by itself: the
// namespace's default ServiceAccount not created yet (kube-controller-manager makes it moments
// after the namespace; the ServiceAccount admission plugin refuses pods until then, v1.37.2
// plugin/pkg/admission/serviceaccount) or the namespace being deleted (the claim goes with it).
// Forbidden by RBAC stays an error.
func AdmissionWait(err error) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "error looking up service account") || strings.Contains(msg, "because it is being terminated")
}

// awaitPod reports, as pending, what kube-scheduler says about the allocation pod: its
// PodScheduled=False message (for example "0/3 nodes are available: 3 cannot allocate all
// claims"). `draforge explain claim/NAME` adds the allocator's per-request explanation.
func (d *Driver) awaitPod(ctx context.Context, obj *unstructured.Unstructured) error {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return err
	}
	return engine.Pending("Scheduling", SchedulingMessage(claim, d.ownPod(claim)), 0)
}

// SchedulingMessage says what a claim whose allocation pod kube-scheduler has not placed yet
// waits for.
func SchedulingMessage(claim *resourcev1.ResourceClaim, pod *corev1.Pod) string {
	name := allocationpod.Name(claim)
	if pod == nil {
		return "waiting for allocation pod " + name + " to be created"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return "kube-scheduler cannot place allocation pod " + name + ": " + strings.TrimSpace(c.Reason+": "+c.Message)
		}
	}
	return "waiting for kube-scheduler to allocate the claim for allocation pod " + name
}

// reservedForPod holds when kube-scheduler allocated the claim for its allocation pod and bound
// the pod: the scheduler is done with both.
func (d *Driver) reservedForPod(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	pod := d.ownPod(claim)
	switch {
	case pod == nil:
		return engine.Fact{Message: "no allocation pod"}, nil
	case !allocationpod.ReservedFor(claim, pod):
		return engine.Fact{Message: "claim not allocated and reserved for allocation pod " + pod.Name}, nil
	case pod.Spec.NodeName == "":
		return engine.Fact{Message: "allocation pod " + pod.Name + " not bound yet"}, nil
	}
	return engine.Fact{Holds: true, Message: "allocated for allocation pod " + pod.Name + " on node " + pod.Spec.NodeName}, nil
}

// complete takes the claim over once its finalizer is removed: it deletes the allocation pod
// and counts the allocation (the reservation goes in step 5 or 6).
func (d *Driver) complete(ctx context.Context, obj *unstructured.Unstructured) error {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return err
	}
	// The grace starts at the first pass that finds the pod gone after this delete, never
	// earlier (a pod cache behind the claim cache may have looked like a gone pod before).
	d.gone.forget(claim.UID)
	deleted, err := d.deleteOwnPod(ctx, claim)
	if deleted {
		d.allocated.Inc()
	}
	return err
}

// reservedForGonePod holds when the claim is allocated and still reserved for its allocation
// pod, which has been gone for unreserveGrace (step 6); until then it asks for a recheck. Only
// after the hand-off: while kube-scheduler's finalizer is on, a pod missing from the cache is
// one the cache has not seen yet, bound and in use, not a deleted one.
func (d *Driver) reservedForGonePod(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	name := allocationpod.Name(claim)
	notGone := ""
	switch {
	case claim.Status.Allocation == nil || !allocationpod.ListsOwnPod(claim):
		notGone = "not reserved for allocation pod " + name
	case slices.Contains(claim.Finalizers, resourcev1.Finalizer):
		notGone = "reserved for allocation pod " + name + ", not handed over yet (finalizer " + resourcev1.Finalizer + ")"
	case d.ownPod(claim) != nil:
		notGone = "allocation pod " + name + " still exists"
	}
	if notGone != "" {
		d.gone.forget(claim.UID)
		return engine.Fact{Message: notGone}, nil
	}
	if wait := d.gone.wait(claim.UID); wait > 0 {
		return engine.Fact{Message: "reserved for allocation pod " + name + ", which is gone; left to kube-controller-manager for " + wait.Round(time.Millisecond).String(),
			RecheckAfter: wait}, nil
	}
	return engine.Fact{Holds: true, Message: "reserved for allocation pod " + name + ", which is gone"}, nil
}

// unreserveGonePod drops the gone allocation pod from reservedFor with one status update at the
// pass's resourceVersion. A conflict (kube-controller-manager wrote first after all) is the
// engine's to retry, as every write's: the next pass finds nothing to do.
func (d *Driver) unreserveGonePod(ctx context.Context, obj *unstructured.Unstructured) error {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return err
	}
	claim = claim.DeepCopy()
	if !allocationpod.Unreserve(claim) {
		return nil
	}
	// The typed claim is converted once per pass: an action before this one in the same
	// transition (a finalizer patch) may have moved obj on.
	claim.ResourceVersion, claim.Finalizers = obj.GetResourceVersion(), obj.GetFinalizers()
	written, err := d.kube.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		d.gone.forget(claim.UID)
		return nil // the claim is gone
	case err != nil:
		return err
	}
	d.writes.Wrote(gvr.ResourceClaims, written.Namespace+"/"+written.Name, written.ResourceVersion, "")
	d.gone.forget(claim.UID)
	return nil
}

// deletePod deletes the allocation pod of a claim that no longer needs it (deleted, or now
// used by a pod kube-scheduler schedules).
func (d *Driver) deletePod(ctx context.Context, obj *unstructured.Unstructured) error {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return err
	}
	_, err = d.deleteOwnPod(ctx, claim)
	return err
}

// deleteOwnPod deletes the claim's allocation pod at once (grace period 0: it never ran); a pod
// already gone counts as deleted by someone else.
func (d *Driver) deleteOwnPod(ctx context.Context, claim *resourcev1.ResourceClaim) (bool, error) {
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	if pod := d.ownPod(claim); pod != nil {
		opts.Preconditions = &metav1.Preconditions{UID: &pod.UID}
	}
	err := d.kube.CoreV1().Pods(claim.Namespace).Delete(ctx, allocationpod.Name(claim), opts)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
