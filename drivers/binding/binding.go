// Package binding is the simulated DRA driver's side of device binding conditions (KEP-5007,
// DRADeviceBindingConditions) and kube-scheduler's verdict on them, for devices published by
// SimulatedDevicePools with deviceGroups[].bindingConditions.
//
// The driver: once an allocated claim's device has waited its group's bindingDelaySeconds
// (from status.allocation.allocationTimestamp), it writes the device's entry in the claim's
// status.devices with every binding condition True, or, when the device has a binding-failure
// fault, the first binding failure condition True.
//
// The scheduler: Verdict mirrors isClaimReadyForBinding and isClaimTimeout of
// k8s.io/kubernetes v1.37.2 pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go.
// kube-scheduler waits in PreBind while a claim is not ready, and deallocates it (allocation,
// reservedFor and status.devices cleared) when a failure condition is True or the binding
// timeout (600s by default) passed; Deallocate does the same for claims the simulator allocated.
package binding

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/simdevice"
)

// DefaultTimeout is kube-scheduler's DynamicResourcesBindingTimeoutDefault
// (pkg/scheduler/apis/config/types_pluginargs.go).
const DefaultTimeout = 600 * time.Second

// Condition reasons the simulated driver writes.
const (
	ReasonReady  = "SimulatedDeviceReady"
	ReasonFailed = "SimulatedBindingFailure"
)

// Errors of Verdict, as kube-scheduler's ErrDeviceBindingFailed and ErrDeviceBindingTimeout.
var (
	ErrFailed  = errors.New("device binding failed")
	ErrTimeout = errors.New("device binding timeout")
)

// Device is what the simulated driver knows about one published device with binding conditions.
type Device struct {
	Conditions        []string
	FailureConditions []string
	Delay             time.Duration
	// Fail is set by a binding-failure fault.
	Fail bool
}

// Lookup finds a simulated device by driver, DRA pool and device name.
type Lookup func(driver, pool, device string) (Device, bool)

// Index returns a Lookup over pools (defaulted). DRA pool names are "<namespace>/<poolName>/<node>"
// (simdevice.PoolNameFor); device names are "<deviceType>-<i>" or "<deviceType>-<i>-part-<j>".
func Index(pools []*simdevice.Pool) Lookup {
	return func(driver, pool, device string) (Device, bool) {
		parts := strings.Split(pool, "/")
		if len(parts) != 3 {
			return Device{}, false
		}
		for _, p := range pools {
			if p.Namespace != parts[0] || p.Spec.PoolName != parts[1] || p.Spec.DriverName != driver {
				continue
			}
			for _, g := range p.Spec.DeviceGroups {
				i, ok := physicalIndex(g.DeviceType, device)
				if !ok || i >= g.Count || len(g.BindingConditions) == 0 {
					continue
				}
				d := Device{Conditions: g.BindingConditions, FailureConditions: g.BindingFailureConditions,
					Delay: time.Duration(g.BindingDelaySeconds) * time.Second}
				name := g.DeviceType + "-" + strconv.Itoa(i)
				for _, f := range p.Spec.Faults {
					if f.Mode == simdevice.FaultBindingFailure && f.Device.StrVal == name && (f.Node == "" || f.Node == parts[2]) {
						d.Fail = true
					}
				}
				return d, true
			}
		}
		return Device{}, false
	}
}

// physicalIndex parses "<deviceType>-<i>" or "<deviceType>-<i>-part-<j>".
func physicalIndex(deviceType, device string) (int, bool) {
	rest, ok := strings.CutPrefix(device, deviceType+"-")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, "-part-")
	i, err := strconv.Atoi(num)
	return i, err == nil && strconv.Itoa(i) == num
}

// Status returns the claim's status.devices with the simulated driver's binding conditions
// written for every allocated device that is due, whether that changed anything, and how long
// until the next device is due (0 when none is waiting). Entries of other drivers and devices
// are kept as they are.
func Status(claim *resourcev1.ResourceClaim, lookup Lookup, now time.Time) ([]resourcev1.AllocatedDeviceStatus, bool, time.Duration) {
	a := claim.Status.Allocation
	if a == nil {
		return claim.Status.Devices, false, 0
	}
	start := now
	if a.AllocationTimestamp != nil {
		start = a.AllocationTimestamp.Time
	}
	out := slices.Clone(claim.Status.Devices)
	changed, wait := false, time.Duration(0)
	for _, r := range a.Devices.Results {
		if len(r.BindingConditions) == 0 {
			continue
		}
		d, ok := lookup(r.Driver, r.Pool, r.Device)
		if !ok {
			continue // not a simulated device: its driver sets the conditions
		}
		if due := start.Add(d.Delay); now.Before(due) {
			if w := due.Sub(now); wait == 0 || w < wait {
				wait = w
			}
			continue
		}
		i := slices.IndexFunc(out, func(s resourcev1.AllocatedDeviceStatus) bool {
			return s.Driver == r.Driver && s.Pool == r.Pool && s.Device == r.Device && ptrEq(s.ShareID, r.ShareID)
		})
		if i < 0 {
			out = append(out, resourcev1.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device, ShareID: shareID(r.ShareID)})
			i = len(out) - 1
		}
		conds := slices.Clone(out[i].Conditions)
		set := func(typ, reason, msg string) {
			if apimeta.IsStatusConditionTrue(conds, typ) {
				return
			}
			apimeta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason,
				Message: msg, LastTransitionTime: metav1.NewTime(now), ObservedGeneration: claim.Generation})
			changed = true
		}
		if d.Fail && len(r.BindingFailureConditions) > 0 {
			set(r.BindingFailureConditions[0], ReasonFailed, "binding-failure fault of the SimulatedDevicePool")
		} else if !d.Fail {
			for _, c := range r.BindingConditions {
				set(c, ReasonReady, fmt.Sprintf("the simulated driver attached the device after %s", d.Delay))
			}
		}
		out[i].Conditions = conds
	}
	return out, changed, wait
}

func shareID(u *k8stypes.UID) *string {
	if u == nil {
		return nil
	}
	c := string(*u)
	return &c
}

func ptrEq(a *string, b *k8stypes.UID) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == string(*b))
}

// Verdict is kube-scheduler's view of an allocated claim's binding conditions: ready when every
// result's binding conditions are True in status.devices; ErrFailed when a binding failure
// condition is True; ErrTimeout when not ready timeout after allocationTimestamp.
func Verdict(claim *resourcev1.ResourceClaim, timeout time.Duration, now time.Time) (bool, error) {
	a := claim.Status.Allocation
	if a == nil {
		return false, nil
	}
	ready := true
	for _, r := range a.Devices.Results {
		if len(r.BindingConditions) == 0 {
			continue
		}
		i := slices.IndexFunc(claim.Status.Devices, func(s resourcev1.AllocatedDeviceStatus) bool {
			return s.Driver == r.Driver && s.Pool == r.Pool && s.Device == r.Device && ptrEq(s.ShareID, r.ShareID)
		})
		if i < 0 {
			ready = false
			continue
		}
		conds := claim.Status.Devices[i].Conditions
		for _, c := range r.BindingFailureConditions {
			if f := apimeta.FindStatusCondition(conds, c); f != nil && f.Status == metav1.ConditionTrue {
				return false, fmt.Errorf("%w: claim=%s, reason=%s, message=%q", ErrFailed, claim.Name, f.Reason, f.Message)
			}
		}
		for _, c := range r.BindingConditions {
			if !apimeta.IsStatusConditionTrue(conds, c) {
				ready = false
			}
		}
	}
	if !ready && a.AllocationTimestamp != nil && hasBindingConditions(a) && a.AllocationTimestamp.Add(timeout).Before(now) {
		return false, fmt.Errorf("%w: claim=%s", ErrTimeout, claim.Name)
	}
	return ready, nil
}

func hasBindingConditions(a *resourcev1.AllocationResult) bool {
	return slices.ContainsFunc(a.Devices.Results, func(r resourcev1.DeviceRequestAllocationResult) bool { return r.BindingConditions != nil })
}
