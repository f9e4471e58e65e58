// Package claims is the claim machine's driver: it feeds the allocator from informer caches and
// registers the functions that allocate standalone claims (claims no pod uses): with
// --allocator simulator the simulator's own structured allocator (claimNeedsSimulatedAllocation,
// allocateClaim); with --allocator kube-scheduler an allocation pod per claim, so that
// kube-scheduler is the only allocator (claimNeedsAllocationPod, createAllocationPod,
// awaitAllocationPod, claimReservedForAllocationPod, completeAllocation, deleteAllocationPod,
// claimReservedForGoneAllocationPod, unreserveAllocationPod).
package claims

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/podnamespaces"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// Driver allocates claims the scheduler will not handle.
type Driver struct {
	Allocator *allocator.Allocator
	// Pods finds the pods using a claim (the cluster view's pod index).
	Pods *clusterview.Pods
	// Mode says who allocates standalone claims.
	Mode Mode
	kube kubernetes.Interface
	// writes is the process's memory of its writes the caches lag (Informers.Writes): the
	// claim machine passes over an allocated claim only once the cache shows the allocation.
	writes    *engine.Writes
	allocated prometheus.Counter
	// gone times how long claims stay reserved for their deleted allocation pods.
	gone goneSince

	// PodNamespaces are where allocation pods may be created (--pod-namespaces).
	PodNamespaces podnamespaces.Set
}

// Register feeds the allocator's claims from inf and registers the driver's functions in reg.
// opts configure the allocator (zero: kube-scheduler's 1.37 defaults; opts.Objects is what it
// reads of slices, classes, nodes and DeviceTaintRules, the cluster view in the controller);
// mode says who allocates standalone claims ("" is the default, kube-scheduler).
func Register(reg *engine.Registry, view *clusterview.View, kube kubernetes.Interface, metrics prometheus.Registerer, opts allocator.Options, mode Mode) (*Driver, error) {
	inf := view.Informers
	opts.Objects = view.Objects
	if mode == "" {
		mode = KubeScheduler
	}
	d := &Driver{
		Allocator: allocator.New(opts),
		Mode:      mode,
		kube:      kube,
		writes:    inf.Writes(),
		allocated: prometheus.NewCounter(prometheus.CounterOpts{Name: "draforge_controller_allocations_total",
			Help: "Standalone ResourceClaims allocated: by the simulator's allocator (--allocator simulator, counted after the status write) " +
				"or by kube-scheduler for an allocation pod (--allocator kube-scheduler, counted when the claim is taken over and the pod deleted)."}),
	}
	if metrics != nil {
		if err := metrics.Register(d.allocated); err != nil {
			return nil, err
		}
	}
	a := d.Allocator
	// Slices, classes, nodes and DeviceTaintRules are read from the cluster view
	// (opts.Objects); claims feed the allocator's record of held devices and writes in flight.
	inf.Feed(gvr.ResourceClaims, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if c, ok := heldOnly(obj); ok {
				a.UpsertClaim(c)
			}
		},
		UpdateFunc: func(_, obj any) {
			if c, ok := heldOnly(obj); ok {
				a.UpsertClaim(c)
			}
		},
		DeleteFunc: func(obj any) {
			// Forgetting needs only the claim's identity, even if its allocation is unreadable.
			if m := engine.ObjectMeta(obj); m != nil {
				c := &resourcev1.ResourceClaim{}
				c.Namespace, c.Name, c.UID = m.GetNamespace(), m.GetName(), m.GetUID()
				a.DeleteClaim(c)
				d.gone.forget(c.UID)
			}
		},
	})
	d.Pods = view.Pods
	reg.Observation("claimNeedsSimulatedAllocation", d.needsSimulatedAllocation)
	reg.Action("allocateClaim", d.allocate)
	reg.Observation("claimNeedsAllocationPod", d.needsAllocationPod)
	reg.Action("createAllocationPod", d.createPod)
	reg.Action("awaitAllocationPod", d.awaitPod)
	reg.Observation("claimReservedForAllocationPod", d.reservedForPod)
	reg.Action("completeAllocation", d.complete)
	reg.Action("deleteAllocationPod", d.deletePod)
	reg.Observation("claimReservedForGoneAllocationPod", d.reservedForGonePod)
	reg.Action("unreserveAllocationPod", d.unreserveGonePod)
	reg.Mapper("podClaims", podClaims)
	reg.Mapper("pendingClaims", d.pendingClaims)
	return d, nil
}

// needsSimulatedAllocation: a standalone claim waits for devices and the simulator allocates
// (--allocator simulator).
func (d *Driver) needsSimulatedAllocation(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	return d.needs(ctx, obj, Simulator)
}

// needsAllocationPod: a standalone claim waits for devices and kube-scheduler allocates it
// through an allocation pod (--allocator kube-scheduler).
func (d *Driver) needsAllocationPod(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	return d.needs(ctx, obj, KubeScheduler)
}

// needs is NeedsAllocation for the pass's claim, narrowed to claims that are DRAForge's: every
// request can be satisfied only by devices DRAForge publishes (allocator.Ownership). Any
// other claim, a real driver's or a mixed one, is left as Kubernetes leaves it: kube-scheduler
// allocates it when a pod using it is scheduled. Ownership is decided last, and only for
// standalone pending claims, so claims of pods cost nothing more.
func (d *Driver) needs(ctx context.Context, obj *unstructured.Unstructured, want Mode) (engine.Fact, error) {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	f := NeedsAllocation(want, d.Mode, claim, d.Pods.For(claim))
	if !f.Holds {
		return f, nil
	}
	if o := d.Allocator.Ownership(ctx, claim, simdevice.Published); !o.Owned {
		return engine.Fact{Message: NotOurs + ": " + o.Reason}, nil
	}
	return f, nil
}

// NotOurs starts the reason of a claim DRAForge leaves to Kubernetes.
const NotOurs = "not DRAForge's claim"

// typedClaim returns the pass's claim as the API type, converted once per pass; callers must
// not change it.
func typedClaim(ctx context.Context, obj *unstructured.Unstructured) (*resourcev1.ResourceClaim, error) {
	claim, ok := engine.PassTyped[resourcev1.ResourceClaim](ctx, obj)
	if !ok {
		return nil, fmt.Errorf("not a ResourceClaim: %s", obj.GetKind())
	}
	return claim, nil
}

// allocate picks devices with the structured allocator (which records them in flight first, so
// no concurrent pass can take them) and writes status.allocation. The write carries the cached
// resourceVersion: if the claim changed meanwhile it conflicts and the reservation is released.
func (d *Driver) allocate(ctx context.Context, obj *unstructured.Unstructured) error {
	claim, err := typedClaim(ctx, obj)
	if err != nil {
		return err
	}
	if d.Mode != Simulator {
		// A machine file from before --allocator existed calls this in kube-scheduler mode:
		// allocating here would race kube-scheduler again.
		return engine.Pending("KubeSchedulerAllocates", "--allocator "+string(d.Mode)+": the simulator does not allocate", 0)
	}
	if d.Allocator.InFlight(claim.UID) {
		// A write of ours for this claim had an unknown outcome (a successful one is in
		// Informers.Writes: the engine passes over the claim only once the cache shows it).
		done, err := d.settleInFlight(ctx, claim)
		if err != nil || done {
			return err
		}
	}
	result, err := d.Allocator.Allocate(ctx, claim)
	var unsat *allocator.Unsatisfiable
	if errors.As(err, &unsat) {
		return engine.Pending("Unsatisfiable", unsat.Reason, 0)
	}
	if err != nil {
		return err
	}
	now := metav1.Now()
	result.AllocationTimestamp = &now
	claim = claim.DeepCopy()
	claim.Status.Allocation = result
	written, err := d.kube.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		// Only a definite rejection frees the devices: after a timeout or a dropped connection
		// the write may have landed, and releasing would let another claim take the same devices.
		if definitelyRejected(err) {
			d.Allocator.Release(claim.UID)
		}
		return err
	}
	d.writes.Wrote(gvr.ResourceClaims, claim.Namespace+"/"+claim.Name, written.ResourceVersion, "")
	d.allocated.Inc()
	return nil
}

// settleInFlight resolves a reservation the cache has not confirmed yet with one live read:
// if the claim is allocated on the server we wait for the informer; otherwise the earlier write
// did not land and the reservation is released so allocation can start over.
func (d *Driver) settleInFlight(ctx context.Context, claim *resourcev1.ResourceClaim) (bool, error) {
	live, err := d.kube.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		d.Allocator.Release(claim.UID)
		return true, nil
	case err != nil:
		return true, err
	case live.UID == claim.UID && live.Status.Allocation != nil:
		return true, engine.Pending("AllocationInFlight", "allocation written, waiting for the informer to observe it", 0)
	}
	d.Allocator.Release(claim.UID)
	return false, nil
}

func definitelyRejected(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) ||
		apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsMethodNotSupported(err)
}

// podClaims maps a pod to the claims it names in spec.resourceClaims. The claims named only in
// status.resourceClaimStatuses are generated from templates and controlled by the pod
// (kube-controller-manager's resourceclaim controller refuses any other, v1.37.2
// pkg/controller/resourceclaim handleClaim): the claim machine never allocates those
// (allocator.ClaimNeedsSimulatedAllocation) and nothing else it reads about them comes from
// pods, so a pod's progress must not re-sync them (it did, about ten times per pod).
func podClaims(obj metav1.Object) []cache.ObjectName {
	pod, ok := engine.Typed[corev1.Pod](obj)
	if !ok {
		return nil
	}
	var keys []cache.ObjectName
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			keys = append(keys, cache.ObjectName{Namespace: pod.Namespace, Name: *rc.ResourceClaimName})
		}
	}
	return keys
}

// pendingClaims maps any change (a slice, a class) to the claims still waiting for devices.
// Allocated claims derive to a state with no events, so re-syncing them would be work without
// effect, and with hundreds of allocated claims and a pool publishing a thousand slices it
// would dominate the controller's CPU.
func (d *Driver) pendingClaims(metav1.Object) []cache.ObjectName {
	var keys []cache.ObjectName
	for _, k := range d.Allocator.PendingClaims() {
		ns, name, err := cache.SplitMetaNamespaceKey(k)
		if err == nil {
			keys = append(keys, cache.ObjectName{Namespace: ns, Name: name})
		}
	}
	return keys
}

// heldOnly converts what the allocator keeps of an informer's claim (its name, UID, deletion and
// allocation): the claim machine caches claims unstructured, and converting the whole claim, its
// spec above all, on every claim event was most of the allocator's feeding cost.
func heldOnly(obj any) (*resourcev1.ResourceClaim, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return engine.Typed[resourcev1.ResourceClaim](obj)
	}
	c := &resourcev1.ResourceClaim{}
	c.Namespace, c.Name, c.UID, c.DeletionTimestamp = u.GetNamespace(), u.GetName(), u.GetUID(), u.GetDeletionTimestamp()
	if alloc, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "allocation"); ok && alloc != nil {
		m, ok := alloc.(map[string]any)
		c.Status.Allocation = &resourcev1.AllocationResult{}
		if !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(m, c.Status.Allocation) != nil {
			return nil, false
		}
	}
	return c, true
}
