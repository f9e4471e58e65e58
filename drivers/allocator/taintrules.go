package allocator

import (
	resourcev1 "k8s.io/api/resource/v1"
)

// DeviceTaintRules (resource.k8s.io/v1, GA in 1.37) add taints to the devices they select.
// kube-scheduler does not give the rules to the structured allocator: its DRA manager lists
// ResourceSlices "with DeviceTaintRules" (pkg/scheduler/framework/plugins/dynamicresources/
// dra_manager.go ListWithDeviceTaintRules), which the ResourceSlice tracker of
// k8s.io/dynamic-resource-allocation/resourceslice/tracker serves by appending each matching
// rule's taint to the device's taints (tracker.go applyPatches). The allocator then treats
// them like taints published by the driver. applyTaintRules mirrors applyPatches.

// taintRulesLocked returns the rules that take effect, sorted by name (the order in which
// their taints are appended does not change allocation; a fixed one keeps explain stable).
// None do when the allocator ignores device taints or the DRADeviceTaintRules gate is off, as
// in kube-scheduler (the tracker is started with EnableDeviceTaintRules from that gate).
func (a *Allocator) taintRulesLocked() []*resourcev1.DeviceTaintRule {
	if !a.features.DeviceTaints || !a.taintRulesEnabled {
		return nil
	}
	return sortedByName(a.objects.TaintRules(), func(r *resourcev1.DeviceTaintRule) string { return r.Name })
}

// ruleSelects reports whether rule selects the device name of slice, exactly as
// tracker.applyPatches: a rule without selector selects nothing; unset fields match all.
func ruleSelects(rule *resourcev1.DeviceTaintRule, slice *resourcev1.ResourceSlice, device string) bool {
	sel := rule.Spec.DeviceSelector
	switch {
	case sel == nil:
		return false
	case sel.Driver != nil && *sel.Driver != slice.Spec.Driver:
		return false
	case sel.Pool != nil && *sel.Pool != slice.Spec.Pool.Name:
		return false
	case sel.Device != nil && *sel.Device != device:
		return false
	}
	return true
}

// applyTaintRules appends the taint of every rule selecting a device to that device's taints.
// slice must be a private copy (snapshot.typed expands a fresh one).
func applyTaintRules(slice *resourcev1.ResourceSlice, rules []*resourcev1.DeviceTaintRule) {
	for _, rule := range rules {
		for i := range slice.Spec.Devices {
			if ruleSelects(rule, slice, slice.Spec.Devices[i].Name) {
				slice.Spec.Devices[i].Taints = append(slice.Spec.Devices[i].Taints, rule.Spec.Taint)
			}
		}
	}
}

// taintSource names the DeviceTaintRule that put taint on the device, or "" when the driver
// published it.
func (s *snapshot) taintSource(slice *resourcev1.ResourceSlice, device string, taint resourcev1.DeviceTaint) string {
	for _, rule := range s.taintRules {
		t := rule.Spec.Taint
		if ruleSelects(rule, slice, device) && t.Key == taint.Key && t.Value == taint.Value && t.Effect == taint.Effect {
			return rule.Name
		}
	}
	return ""
}
