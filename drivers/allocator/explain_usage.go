package allocator

import (
	"fmt"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Reasons for shared resources, mirroring the structured allocator's checks
// (k8s.io/dynamic-resource-allocation/structured/internal/incubating: checkAvailableCounters
// for partitionable devices, CmpRequestOverCapacity in consumable_capacity.go for consumable
// capacity). They explain a verdict the allocator itself makes; the allocator stays the
// authority on whether the claim fits.
const (
	ReasonCountersExhausted = "CountersExhausted"
	ReasonCapacityMissing   = "CapacityMissing"
	ReasonCapacityExhausted = "CapacityExhausted"
	ReasonRequestPolicy     = "RequestPolicy"
)

// counterKey names one counter of one counter set of a pool.
type counterKey struct {
	pool           poolID
	set, counterID string
}

// counterUse is the counters the pools' shared counter sets offer and what allocated devices
// consume of them.
type counterUse struct {
	total, used map[counterKey]resource.Quantity
	// users lists the allocated devices consuming from a counter set (for the message).
	users map[counterKey][]string
}

func (a *Allocator) counterUse(snap *snapshot, devices []device) counterUse {
	u := counterUse{total: map[counterKey]resource.Quantity{}, used: map[counterKey]resource.Quantity{}, users: map[counterKey][]string{}}
	if !a.features.PartitionableDevices {
		return u
	}
	for _, s := range snap.allTyped() {
		for _, cs := range s.Spec.SharedCounters {
			for name, c := range cs.Counters {
				u.total[counterKey{poolID{s.Spec.Driver, s.Spec.Pool.Name}, cs.Name, name}] = c.Value
			}
		}
	}
	for _, d := range devices {
		if !snap.state.AllocatedDevices.Has(d.id) {
			continue
		}
		for _, cc := range d.dev.ConsumesCounters {
			for name, c := range cc.Counters {
				k := counterKey{poolID{d.slice.Spec.Driver, d.slice.Spec.Pool.Name}, cc.CounterSet, name}
				q := u.used[k]
				q.Add(c.Value)
				u.used[k] = q
				u.users[k] = append(u.users[k], d.dev.Name)
			}
		}
	}
	return u
}

// countersReason tells whether the counters d consumes are exhausted by allocated devices.
func (u counterUse) countersReason(d device) []Reason {
	var out []Reason
	for _, cc := range d.dev.ConsumesCounters {
		names := make([]string, 0, len(cc.Counters))
		for name := range cc.Counters {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			k := counterKey{poolID{d.slice.Spec.Driver, d.slice.Spec.Pool.Name}, cc.CounterSet, name}
			total, ok := u.total[k]
			need := cc.Counters[name].Value
			if !ok {
				out = append(out, Reason{ReasonCountersExhausted, fmt.Sprintf("counter set %s of pool %s has no counter %s", cc.CounterSet, k.pool.pool, name)})
				continue
			}
			left := total.DeepCopy()
			left.Sub(u.used[k])
			if left.Cmp(need) < 0 {
				out = append(out, Reason{ReasonCountersExhausted, fmt.Sprintf("counter set %s: %s needs %s, %s of %s left (used by %s)",
					cc.CounterSet, name, need.String(), left.String(), total.String(), strings.Join(u.users[k], ", "))})
			}
		}
	}
	return out
}

// capacityReasons compares a request's capacity requests with a device's capacity: a missing
// capacity, a request outside the capacity's requestPolicy, or not enough left on a shared
// device. Values are compared as requested; the allocator additionally rounds a request up to
// the policy's step or next valid value.
func (a *Allocator) capacityReasons(snap *snapshot, v requestView, d device) []Reason {
	if v.capacity == nil || len(v.capacity.Requests) == 0 || !a.features.ConsumableCapacity {
		return nil
	}
	names := make([]string, 0, len(v.capacity.Requests))
	for name := range v.capacity.Requests {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var out []Reason
	for _, n := range names {
		name := resourcev1.QualifiedName(n)
		want := v.capacity.Requests[name]
		c, ok := d.dev.Capacity[name]
		if !ok {
			out = append(out, Reason{ReasonCapacityMissing, fmt.Sprintf("the device has no capacity %q", name)})
			continue
		}
		if p := c.RequestPolicy; p != nil {
			switch {
			case p.ValidRange != nil && p.ValidRange.Max != nil && want.Cmp(*p.ValidRange.Max) > 0:
				out = append(out, Reason{ReasonRequestPolicy, fmt.Sprintf("capacity %s: %s exceeds requestPolicy.validRange.max %s", name, want.String(), p.ValidRange.Max.String())})
				continue
			case len(p.ValidValues) > 0 && want.Cmp(p.ValidValues[len(p.ValidValues)-1]) > 0:
				out = append(out, Reason{ReasonRequestPolicy, fmt.Sprintf("capacity %s: %s exceeds the largest of requestPolicy.validValues (%s)", name, want.String(), p.ValidValues[len(p.ValidValues)-1].String())})
				continue
			}
		}
		left := c.Value.DeepCopy()
		if ptr.Deref(d.dev.AllowMultipleAllocations, false) {
			used := snap.consumed[d.id][name]
			left.Sub(used)
		}
		if want.Cmp(left) > 0 {
			out = append(out, Reason{ReasonCapacityExhausted, fmt.Sprintf("capacity %s: requests %s, %s of %s left", name, want.String(), left.String(), c.Value.String())})
		}
	}
	return out
}

// reasonRemedies adds, for the reasons of one device matching v's selectors, a remedy naming
// the field to change. Messages do not name single devices, so they stay few at any scale.
func reasonRemedies(snap *snapshot, v requestView, d device, reasons []Reason, add func(string, ...any)) {
	for _, r := range reasons {
		switch r.Code {
		case ReasonTainted:
			for _, t := range d.dev.Taints {
				if t.Effect != resourcev1.DeviceTaintEffectNoSchedule && t.Effect != resourcev1.DeviceTaintEffectNoExecute {
					continue
				}
				if !strings.Contains(r.Message, fmt.Sprintf("taint %s=%s:%s ", t.Key, t.Value, t.Effect)) {
					continue
				}
				if rule := snap.taintSource(d.slice, d.dev.Name, t); rule != "" {
					add("add a toleration to request %s (%s.tolerations: key %q, effect %s) or delete DeviceTaintRule %s", v.name, v.path, t.Key, t.Effect, rule)
				} else {
					add("add a toleration to request %s (%s.tolerations: key %q, effect %s); driver %s publishes the taint in its ResourceSlices (spec.devices[].taints)", v.name, v.path, t.Key, t.Effect, d.slice.Spec.Driver)
				}
			}
		case ReasonCountersExhausted:
			add("request %s: devices of pool %s/%s share counters with allocated devices (a whole device and its partitions exclude each other): deallocate those claims or select a smaller partition (%s.selectors)", v.name, d.slice.Spec.Driver, d.slice.Spec.Pool.Name, v.path)
		case ReasonCapacityMissing:
			add("request %s: %s.capacity.requests names a capacity some matching devices do not publish: use the name the driver publishes (spec.devices[].capacity)", v.name, v.path)
		case ReasonCapacityExhausted:
			add("request %s: lower %s.capacity.requests or free capacity on shared devices (deallocate claims sharing them)", v.name, v.path)
		case ReasonRequestPolicy:
			add("request %s: keep %s.capacity.requests within the device's capacity requestPolicy (validRange or validValues)", v.name, v.path)
		case ReasonPoolIncomplete:
			add("pool %s/%s has fewer ResourceSlices than spec.pool.resourceSliceCount (%d): publish the missing slices or correct resourceSliceCount", d.slice.Spec.Driver, d.slice.Spec.Pool.Name, d.slice.Spec.Pool.ResourceSliceCount)
		case ReasonBindingConditions:
			add("devices with binding conditions need the DRADeviceBindingConditions and DRAResourceClaimDeviceStatus feature gates (controller --feature-gates)")
		case ReasonWrongNode:
			add("devices of pool %s/%s are not reachable from any observed Node: create the Node or fix the slice's spec.nodeName/nodeSelector", d.slice.Spec.Driver, d.slice.Spec.Pool.Name)
		}
	}
}
