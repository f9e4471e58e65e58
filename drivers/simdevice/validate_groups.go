package simdevice

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateGroups checks spec.deviceGroups and spec.topology with the CRD's rules, plus the
// resource.k8s.io/v1 rules the API server applies to the devices they publish
// (pkg/apis/resource/validation: validateDevice, validateRequestPolicy,
// validateDeviceBindingParameters, counter names).
func (s *PoolSpec) validateGroups(sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, set := range map[string]bool{"deviceType": s.DeviceType != "", "deviceCount": s.DeviceCount != 0,
		"profile": s.Profile != "", "attributes": s.Attributes != nil, "capacities": s.Capacities != nil} {
		if set {
			errs = append(errs, field.Forbidden(sp.Child(name), "with deviceGroups, set "+name+" per group"))
		}
	}
	gp := sp.Child("deviceGroups")
	if len(s.DeviceGroups) == 0 {
		errs = append(errs, field.Required(gp, "at least one device group"))
	}
	errs = append(errs, tooMany(gp, len(s.DeviceGroups), MaxDeviceGroups)...)
	if t := s.Topology; t != nil {
		tp := sp.Child("topology")
		if t.NUMANodes < 1 || t.NUMANodes > MaxNUMANodes {
			errs = append(errs, field.Invalid(tp.Child("numaNodes"), t.NUMANodes, fmt.Sprintf("must be between 1 and %d", MaxNUMANodes)))
		}
		if t.PCIeRootsPerNUMANode < 1 || t.PCIeRootsPerNUMANode > MaxPCIeRootsPerNUMA {
			errs = append(errs, field.Invalid(tp.Child("pcieRootsPerNUMANode"), t.PCIeRootsPerNUMANode, fmt.Sprintf("must be between 1 and %d", MaxPCIeRootsPerNUMA)))
		}
	}
	// The cap on the devices per node, once each group's count and partitions are in range (an
	// out-of-range one is reported on its own).
	inRange := true
	for _, g := range s.DeviceGroups {
		inRange = inRange && g.Count >= 1 && g.Count <= MaxDeviceCount && g.Partitions >= 0 && g.Partitions <= MaxPartitions
	}
	if n := s.DevicesPerNode(); inRange && n > MaxDevicesPerNode {
		errs = append(errs, field.Invalid(gp, n, fmt.Sprintf("the pool would publish %d devices per node (the sum over the groups of count × (1 + partitions)), at most %d are allowed",
			n, MaxDevicesPerNode)))
	}
	seen := map[string]bool{}
	for i := range s.DeviceGroups {
		g, fp := &s.DeviceGroups[i], gp.Index(i)
		errs = append(errs, dnsName(fp.Child("deviceType"), g.DeviceType, maxDeviceTypeLength, true)...)
		if seen[g.DeviceType] {
			errs = append(errs, field.Duplicate(fp.Child("deviceType"), g.DeviceType))
		}
		seen[g.DeviceType] = true
		if g.Count < 1 || g.Count > MaxDeviceCount {
			errs = append(errs, field.Invalid(fp.Child("count"), g.Count, fmt.Sprintf("must be between 1 and %d (devices per node)", MaxDeviceCount)))
		}
		errs = append(errs, tooMany(fp.Child("attributes"), len(g.Attributes), resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)...)
		errs = append(errs, tooMany(fp.Child("capacities"), len(g.Capacities), resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)...)
		errs = append(errs, validateAttributes(fp, g.Attributes, g.Capacities)...)
		if n := s.groupAttributeAndCapacityCount(g); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			errs = append(errs, field.Invalid(fp.Child("attributes"), n, fmt.Sprintf("devices would have %d attributes and capacities (deviceType, index, the group's, topology's pcieRoot and numaNode, a partition's partition and parent), at most %d are allowed",
				n, resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
		}
		if g.Partitions != 0 {
			if g.Partitions < MinPartitions || g.Partitions > MaxPartitions {
				errs = append(errs, field.Invalid(fp.Child("partitions"), g.Partitions, fmt.Sprintf("must be between %d and %d", MinPartitions, MaxPartitions)))
			}
			if g.AllowMultipleAllocations || g.PerDeviceNodeSelection {
				errs = append(errs, field.Forbidden(fp.Child("partitions"), "partitions cannot be combined with allowMultipleAllocations or perDeviceNodeSelection"))
			}
			for name := range g.Capacities {
				// Capacities become counters, whose names are DNS labels.
				if msgs := content.IsDNS1123Label(name); len(msgs) > 0 || name == PartitionsCounter {
					errs = append(errs, field.Invalid(fp.Child("capacities").Key(name), name, "with partitions, capacity names are counter names: DNS labels (lowercase letters, digits and '-'), not \"partitions\""))
				}
			}
		}
		for name, pol := range g.RequestPolicies {
			pp := fp.Child("requestPolicies").Key(name)
			c, ok := g.Capacities[name]
			if !ok {
				errs = append(errs, field.NotFound(pp, name))
				continue
			}
			if !g.AllowMultipleAllocations {
				errs = append(errs, field.Forbidden(pp, "a request policy needs allowMultipleAllocations: true"))
			}
			errs = append(errs, validatePolicy(pp, c, pol)...)
		}
		errs = append(errs, validateConditions(fp, g)...)
		if g.BindingDelaySeconds < 0 || g.BindingDelaySeconds > MaxBindingDelay {
			errs = append(errs, field.Invalid(fp.Child("bindingDelaySeconds"), g.BindingDelaySeconds, fmt.Sprintf("must be between 0 and %d", MaxBindingDelay)))
		}
	}
	return errs
}

// validatePolicy mirrors validateRequestPolicy of resource.k8s.io; with a step, every value must
// be a whole number (stricter than the API, which also divides milli-values, because the CRD's
// CEL can only divide integers).
func validatePolicy(pp *field.Path, capacity resource.Quantity, pol RequestPolicy) field.ErrorList {
	var errs field.ErrorList
	if len(pol.ValidValues) > 0 && pol.ValidRange != nil {
		return field.ErrorList{field.Forbidden(pp, "validValues and validRange are exclusive")}
	}
	if (len(pol.ValidValues) > 0 || pol.ValidRange != nil) && pol.Default == nil {
		return field.ErrorList{field.Required(pp.Child("default"), "required with validValues or validRange")}
	}
	if len(pol.ValidValues) > 0 {
		vp := pp.Child("validValues")
		errs = append(errs, tooMany(vp, len(pol.ValidValues), maxValidValues)...)
		found := false
		for i, v := range pol.ValidValues {
			if i > 0 && pol.ValidValues[i-1].Cmp(v) >= 0 {
				errs = append(errs, field.Invalid(vp.Index(i), v.String(), "values must be sorted in ascending order, without duplicates"))
			}
			if v.Cmp(capacity) > 0 {
				errs = append(errs, field.Invalid(vp.Index(i), v.String(), "must not be larger than the capacity"))
			}
			found = found || v.Cmp(*pol.Default) == 0
		}
		if !found {
			errs = append(errs, field.Invalid(pp.Child("default"), pol.Default.String(), "must be one of validValues"))
		}
	}
	if r := pol.ValidRange; r != nil {
		rp := pp.Child("validRange")
		if r.Min == nil {
			return append(errs, field.Required(rp.Child("min"), "required in validRange"))
		}
		if r.Min.Cmp(capacity) > 0 {
			errs = append(errs, field.Invalid(rp.Child("min"), r.Min.String(), "must not be larger than the capacity"))
		}
		if pol.Default.Cmp(*r.Min) < 0 {
			errs = append(errs, field.Invalid(pp.Child("default"), pol.Default.String(), "must not be less than validRange.min"))
		}
		if r.Max != nil {
			if r.Min.Cmp(*r.Max) > 0 || r.Max.Cmp(capacity) > 0 {
				errs = append(errs, field.Invalid(rp.Child("max"), r.Max.String(), "must be between validRange.min and the capacity"))
			}
			if pol.Default.Cmp(*r.Max) > 0 {
				errs = append(errs, field.Invalid(pp.Child("default"), pol.Default.String(), "must not be more than validRange.max"))
			}
		}
		if r.Step != nil {
			errs = append(errs, validateStep(pp, capacity, *pol.Default, *r)...)
		}
	}
	return errs
}

// validateStep: step > 0, whole numbers, min + step within the capacity, and default and max
// reachable from min in steps (validateRequestPolicyRangeStep).
func validateStep(pp *field.Path, capacity, def resource.Quantity, r PolicyRange) field.ErrorList {
	sp := pp.Child("validRange", "step")
	if r.Step.Sign() <= 0 {
		return field.ErrorList{field.Invalid(sp, r.Step.String(), "must be greater than zero")}
	}
	vals := []*resource.Quantity{&def, r.Min, r.Step}
	if r.Max != nil {
		vals = append(vals, r.Max)
	}
	for _, q := range vals {
		if _, ok := q.AsInt64(); !ok {
			return field.ErrorList{field.Invalid(sp, r.Step.String(), "with step, default, min, max and step must be whole numbers")}
		}
	}
	var errs field.ErrorList
	minV, _ := r.Min.AsInt64()
	step, _ := r.Step.AsInt64()
	if next := resource.NewQuantity(minV+step, resource.DecimalSI); next.Cmp(capacity) > 0 {
		errs = append(errs, field.Invalid(sp, r.Step.String(), "min + step must not be larger than the capacity"))
	}
	for _, v := range []struct {
		name string
		q    *resource.Quantity
	}{{"default", &def}, {"max", r.Max}} {
		if v.q == nil {
			continue
		}
		if n, _ := v.q.AsInt64(); (n-minV)%step != 0 {
			errs = append(errs, field.Invalid(sp, r.Step.String(), v.name+" must be min plus a multiple of step"))
		}
	}
	return errs
}

// validateConditions mirrors validateDeviceBindingParameters: at most 4 of each, condition
// types (qualified names), no duplicates, no overlap.
func validateConditions(fp *field.Path, g *DeviceGroup) field.ErrorList {
	var errs field.ErrorList
	bp, fpp := fp.Child("bindingConditions"), fp.Child("bindingFailureConditions")
	errs = append(errs, tooMany(bp, len(g.BindingConditions), resourcev1.BindingConditionsMaxSize)...)
	errs = append(errs, tooMany(fpp, len(g.BindingFailureConditions), resourcev1.BindingFailureConditionsMaxSize)...)
	seen := map[string]bool{}
	for i, c := range g.BindingConditions {
		errs = append(errs, metav1validation.ValidateLabelName(c, bp.Index(i))...)
		if seen[c] {
			errs = append(errs, field.Duplicate(bp.Index(i), c))
		}
		seen[c] = true
	}
	failed := map[string]bool{}
	for i, c := range g.BindingFailureConditions {
		errs = append(errs, metav1validation.ValidateLabelName(c, fpp.Index(i))...)
		if failed[c] || seen[c] {
			errs = append(errs, field.Duplicate(fpp.Index(i), c))
		}
		failed[c] = true
	}
	if len(g.BindingFailureConditions) > 0 && len(g.BindingConditions) == 0 {
		errs = append(errs, field.Required(bp, "bindingFailureConditions need bindingConditions"))
	}
	if len(g.BindingConditions) > 0 && len(g.BindingFailureConditions) == 0 {
		// The API server rejects such a slice ("bindingFailureConditions are required to use
		// bindingConditions"), which would only show when the pool publishes.
		errs = append(errs, field.Required(fpp, "bindingConditions need bindingFailureConditions"))
	}
	if g.BindingDelaySeconds > 0 && len(g.BindingConditions) == 0 {
		errs = append(errs, field.Required(bp, "bindingDelaySeconds needs bindingConditions"))
	}
	return errs
}

// maxValidValues is resource.k8s.io's CapacityRequestPolicyDiscreteMaxOptions
// (k8s.io/kubernetes pkg/apis/resource/types.go).
const maxValidValues = 10
