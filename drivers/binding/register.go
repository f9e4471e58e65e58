package binding

import (
	"context"
	"fmt"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/engine"
)

// Driver registers the binding-condition functions a claim machine calls:
//
//   - observation claimAwaitsBindingConditions: an allocated claim has a simulated device with
//     binding conditions whose status the driver has not written yet;
//   - action setBindingConditions: write the due conditions to status.devices (Pending with the
//     time until the next device is due while its bindingDelaySeconds has not passed);
//   - observation claimBindingFailed: a claim the simulator allocated (reserved for nobody) has
//     a True binding failure condition or timed out (kube-scheduler's Filter/PostFilter verdict);
//   - action deallocateClaim: clear allocation, reservedFor and status.devices, as
//     kube-scheduler's PostFilter does, so the claim is allocated again.
type Driver struct {
	kube    kubernetes.Interface
	Timeout time.Duration
	// Published reports whether every device of an allocation is one DRAForge publishes;
	// claimBindingFailed holds only then (nil: never).
	Published func(*resourcev1.AllocationResult) bool
	now       func() time.Time
	pools     *clusterview.Pools
}

// New returns a Driver reading the decoded pools of the cluster view.
func New(kube kubernetes.Interface, pools *clusterview.Pools) *Driver {
	return &Driver{kube: kube, Timeout: DefaultTimeout, now: time.Now, pools: pools}
}

// Register registers the driver's functions in reg; pools is the cluster view's pool index.
func Register(reg *engine.Registry, kube kubernetes.Interface, pools *clusterview.Pools) *Driver {
	d := New(kube, pools)
	reg.Observation("claimAwaitsBindingConditions", d.awaits)
	reg.Action("setBindingConditions", d.set)
	reg.Observation("claimBindingFailed", d.failed)
	reg.Action("deallocateClaim", d.deallocate)
	return d
}

func (d *Driver) lookup() Lookup {
	return Index(d.pools.List())
}

// claimOf returns the pass's claim as the API type, converted once per pass; callers must not
// change it.
func claimOf(ctx context.Context, obj *unstructured.Unstructured) (*resourcev1.ResourceClaim, error) {
	c, ok := engine.PassTyped[resourcev1.ResourceClaim](ctx, obj)
	if !ok {
		return nil, fmt.Errorf("not a ResourceClaim: %s", obj.GetKind())
	}
	return c, nil
}

func (d *Driver) awaits(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	c, err := claimOf(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	_, changed, wait := Status(c, d.lookup(), d.now())
	return engine.Holds(changed || wait > 0), nil
}

func (d *Driver) set(ctx context.Context, obj *unstructured.Unstructured) error {
	c, err := claimOf(ctx, obj)
	if err != nil {
		return err
	}
	devices, changed, wait := Status(c, d.lookup(), d.now())
	if changed {
		c.Status.Devices = devices
		if _, err := d.kube.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if wait > 0 {
		return engine.Pending("BindingConditionsDue", fmt.Sprintf("binding conditions due in %s", wait.Round(time.Second)), wait)
	}
	return nil
}

func (d *Driver) failed(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	c, err := claimOf(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	if len(c.Status.ReservedFor) > 0 || c.DeletionTimestamp != nil {
		return engine.Holds(false), nil // in use: kube-scheduler decides for its pods
	}
	_, verr := Verdict(c, d.Timeout, d.now())
	if verr != nil {
		if d.Published == nil || !d.Published(c.Status.Allocation) {
			// Another driver's device is allocated: the claim is not DRAForge's to deallocate.
			return engine.Fact{Message: verr.Error() + "; not deallocated: the claim holds devices DRAForge does not publish"}, nil
		}
		return engine.Fact{Holds: true, Message: verr.Error()}, nil
	}
	return engine.Holds(false), nil
}

func (d *Driver) deallocate(ctx context.Context, obj *unstructured.Unstructured) error {
	c, err := claimOf(ctx, obj)
	if err != nil {
		return err
	}
	c.Status.Allocation, c.Status.ReservedFor, c.Status.Devices = nil, nil, nil
	_, err = d.kube.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
	return err
}
