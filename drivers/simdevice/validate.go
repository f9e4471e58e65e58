package simdevice

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SemverPattern is the semantic-versioning 2.0.0 grammar, used for "version" attributes here,
// in the CRD and in the CUE schema.
const SemverPattern = `^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`

var semverRE = regexp.MustCompile(SemverPattern)

// QuantityPattern is the grammar of a non-negative Kubernetes quantity string, as the CRD's
// quantities and the CUE schema's #Quantity write it (drivers/simdevice/schemagen writes it
// into both). It is Kubernetes' quantity pattern with the decimal exponent bounded to an
// integer of one or two digits: Kubernetes' own pattern admits "1e1.5" and exponents beyond
// int32, which resource.ParseQuantity refuses or, for "1e1111111111111111", computes 10 to
// that power and never returns. 10^99 is beyond any device's capacity.
const QuantityPattern = `^(\+)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$`

var quantityRE = regexp.MustCompile(QuantityPattern)

// Limits of the CRD schema (deploy/crds), which the CUE schema repeats.
const (
	// maxDeviceTypeLength leaves room for "-127" in a 63-character device name.
	maxDeviceTypeLength = 59
	maxLabelValueLength = 63
	maxNodeSelector     = 16
	maxTargetNodes      = 64
	maxFaults           = 256
	maxQuantityLength   = 64
)

// Validate checks the (defaulted) pool with the same rules as the CRD schema and its CEL
// validations, plus the DRA limits the API server would enforce on the resulting slices.
// It returns nil when the pool is valid; the errors are *field.Error.
func (p *Pool) Validate() []error {
	// The API server's checks of a custom resource's metadata (name a DNS subdomain, labels,
	// annotations...), plus the CRD's: the name is the label value sdp-name.
	md := field.NewPath("metadata")
	errs := apimachineryvalidation.ValidateObjectMeta(&p.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, md)
	if len(p.Name) > maxLabelValueLength {
		errs = append(errs, field.TooLong(md.Child("name"), p.Name, maxLabelValueLength))
	}
	s, sp := &p.Spec, field.NewPath("spec")
	errs = append(errs, dnsName(sp.Child("driverName"), s.DriverName, resourcev1.DriverNameMaxLength, false)...)
	errs = append(errs, dnsName(sp.Child("attributeDomain"), s.AttributeDomain, resourcev1.DeviceMaxDomainLength, false)...)
	if s.PoolName == p.Name && len(content.IsDNS1123Label(p.Name)) > 0 {
		// Defaulted from metadata.name (or equal to it): report it there.
		errs = append(errs, field.Invalid(md.Child("name"), p.Name, "must be a DNS label (lowercase letters, digits and '-') when spec.poolName is not set, as it is the default pool name"))
	} else {
		errs = append(errs, dnsName(sp.Child("poolName"), s.PoolName, maxLabelValueLength, true)...)
	}
	if s.DeviceGroups != nil {
		errs = append(errs, s.validateGroups(sp)...)
	} else {
		if s.DeviceCount < 1 || s.DeviceCount > MaxDeviceCount {
			errs = append(errs, field.Invalid(sp.Child("deviceCount"), s.DeviceCount, fmt.Sprintf("must be between 1 and %d (devices per node)", MaxDeviceCount)))
		}
		errs = append(errs, dnsName(sp.Child("deviceType"), s.DeviceType, maxDeviceTypeLength, true)...)
		if n := s.DevicesPerNode(); s.DeviceCount <= MaxDeviceCount && n > MaxDevicesPerNode {
			errs = append(errs, field.Invalid(sp.Child("deviceCount"), s.DeviceCount, fmt.Sprintf("the pool would publish %d devices per node (%d per physical device with profile %q), at most %d are allowed",
				n, DevicesPerPhysical(s.Profile), s.Profile, MaxDevicesPerNode)))
		}
		if s.Topology != nil {
			errs = append(errs, field.Forbidden(sp.Child("topology"), "topology places the devices of spec.deviceGroups: set deviceGroups"))
		}
		if profiles[s.Profile].wholeNode && s.DeviceCount > 1 {
			errs = append(errs, field.Invalid(sp.Child("deviceCount"), s.DeviceCount, fmt.Sprintf("profile %q publishes one device for the whole node: deviceCount must be 1", s.Profile)))
		}
	}
	if s.Profile != "" && !slices.Contains(KnownProfiles, s.Profile) {
		errs = append(errs, field.NotSupported(sp.Child("profile"), s.Profile, KnownProfiles))
	}

	errs = append(errs, tooMany(sp.Child("nodeSelector"), len(s.NodeSelector), maxNodeSelector)...)
	errs = append(errs, tooMany(sp.Child("targetNodes"), len(s.TargetNodes), maxTargetNodes)...)
	errs = append(errs, tooMany(sp.Child("attributes"), len(s.Attributes), resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)...)
	errs = append(errs, tooMany(sp.Child("capacities"), len(s.Capacities), resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)...)
	errs = append(errs, tooMany(sp.Child("faults"), len(s.Faults), maxFaults)...)
	if len(s.NodeSelector) == 0 && len(s.TargetNodes) == 0 {
		errs = append(errs, field.Required(sp, "at least one of spec.nodeSelector or spec.targetNodes must be set"))
	}
	for k, v := range s.NodeSelector {
		for _, msg := range content.IsLabelKey(k) {
			errs = append(errs, field.Invalid(sp.Child("nodeSelector").Key(k), k, msg))
		}
		for _, msg := range content.IsLabelValue(v) {
			errs = append(errs, field.Invalid(sp.Child("nodeSelector").Key(k), v, msg))
		}
	}
	seen := map[string]bool{}
	for i, n := range s.TargetNodes {
		errs = append(errs, dnsName(sp.Child("targetNodes").Index(i), n, 253, false)...)
		if seen[n] {
			errs = append(errs, field.Duplicate(sp.Child("targetNodes").Index(i), n))
		}
		seen[n] = true
	}

	errs = append(errs, validateAttributes(sp, s.Attributes, s.Capacities)...)
	if n := attributeAndCapacityCount(s); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		errs = append(errs, field.Invalid(sp.Child("attributes"), n, fmt.Sprintf("devices would have %d attributes and capacities (built-in, profile and spec), at most %d are allowed",
			n, resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
	}

	for i, f := range s.Faults {
		fp := sp.Child("faults").Index(i)
		if !slices.Contains(FaultModes, f.Mode) {
			errs = append(errs, field.NotSupported(fp.Child("mode"), f.Mode, FaultModes))
		}
		errs = append(errs, s.validateDriverFault(fp, f)...)
		if f.Node != "" {
			errs = append(errs, dnsName(fp.Child("node"), f.Node, 253, false)...)
		}
		if _, err := s.faultTarget(f.Device); err != nil {
			errs = append(errs, field.Invalid(fp.Child("device"), f.Device.String(), err.Error()))
		}
	}

	errs = append(errs, s.validateCampaigns(sp)...)

	out := make([]error, 0, len(errs))
	for _, e := range errs {
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// validateDriverFault checks the fields of driver-shaped faults: xid only (and required) with
// mode xid, within 1..MaxXID, and a profile whose driver publishes such events.
func (s *PoolSpec) validateDriverFault(fp *field.Path, f Fault) field.ErrorList {
	var errs field.ErrorList
	switch {
	case f.Mode == FaultXID && f.XID == nil:
		errs = append(errs, field.Required(fp.Child("xid"), "the XID code of the error (e.g. 79), required with mode xid"))
	case f.Mode == FaultXID && (*f.XID < 1 || *f.XID > MaxXID):
		errs = append(errs, field.Invalid(fp.Child("xid"), *f.XID, fmt.Sprintf("must be between 1 and %d", MaxXID)))
	case f.Mode != FaultXID && f.XID != nil:
		errs = append(errs, field.Forbidden(fp.Child("xid"), "only with mode xid (ecc is XID 48, nvlink XID 74)"))
	}
	if why := faultRefused(s.Profile, f.Mode); why != "" {
		errs = append(errs, field.Invalid(fp.Child("mode"), f.Mode, why))
	}
	return errs
}

// faultTarget resolves a fault's device reference to a physical device: an index or
// "<deviceType>-<index>" of the implicit group, or "<deviceType>-<index>" of a device group.
func (s *PoolSpec) faultTarget(d intstr.IntOrString) (physicalRef, error) {
	if len(s.DeviceGroups) == 0 {
		i, err := deviceIndex(d, s.DeviceType, s.DeviceCount, true)
		return physicalRef{group: -1, index: i}, err
	}
	if d.Type != intstr.String {
		return physicalRef{}, fmt.Errorf("with deviceGroups, a fault names a device <deviceType>-<index>")
	}
	for gi, g := range s.DeviceGroups {
		if strings.HasPrefix(d.StrVal, g.DeviceType+"-") {
			if i, err := deviceIndex(d, g.DeviceType, g.Count, false); err == nil {
				return physicalRef{group: gi, index: i}, nil
			}
		}
	}
	return physicalRef{}, fmt.Errorf("must name a device <deviceType>-<index> of a device group, with index below its count")
}

// FaultGroup returns the device group (nil for a pool without deviceGroups) and index a valid
// fault names.
func (s *PoolSpec) FaultGroup(d intstr.IntOrString) (*DeviceGroup, int, error) {
	ref, err := s.faultTarget(d)
	if err != nil || ref.group < 0 {
		return nil, ref.index, err
	}
	return &s.DeviceGroups[ref.group], ref.index, nil
}

func deviceIndex(d intstr.IntOrString, deviceType string, count int, allowInt bool) (int, error) {
	i := int(d.IntVal)
	if d.Type == intstr.String {
		num, ok := strings.CutPrefix(d.StrVal, deviceType+"-")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || num != strconv.Itoa(n) {
			return 0, fmt.Errorf("must be a device index or a device name %q", deviceType+"-<index>")
		}
		i = n
	} else if !allowInt {
		return 0, fmt.Errorf("must be a device name %q", deviceType+"-<index>")
	}
	if i < 0 || i >= count {
		return 0, fmt.Errorf("device index must be in [0, deviceCount)")
	}
	return i, nil
}

func validateAttributes(sp *field.Path, attributes map[string]AttributeValue, capacities map[string]resource.Quantity) field.ErrorList {
	var errs field.ErrorList
	for name, v := range attributes {
		fp := sp.Child("attributes").Key(name)
		errs = append(errs, identifier(fp, name)...)
		errs = append(errs, validateAttribute(fp, v)...)
	}
	for name, q := range capacities {
		fp := sp.Child("capacities").Key(name)
		errs = append(errs, identifier(fp, name)...)
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(fp, q.String(), "must not be negative"))
		}
	}
	return errs
}

func validateAttribute(fp *field.Path, v AttributeValue) field.ErrorList {
	set := 0
	for _, b := range []bool{v.String != nil, v.Int != nil, v.Bool != nil, v.Version != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		return field.ErrorList{field.Invalid(fp, set, "exactly one of string, int, bool or version must be set")}
	}
	var errs field.ErrorList
	if v.String != nil && len(*v.String) > resourcev1.DeviceAttributeMaxValueLength {
		errs = append(errs, field.TooLong(fp.Child("string"), "", resourcev1.DeviceAttributeMaxValueLength))
	}
	if v.Version != nil {
		if len(*v.Version) > resourcev1.DeviceAttributeMaxValueLength {
			errs = append(errs, field.TooLong(fp.Child("version"), "", resourcev1.DeviceAttributeMaxValueLength))
		} else if !semverRE.MatchString(*v.Version) {
			errs = append(errs, field.Invalid(fp.Child("version"), *v.Version, "must be a semantic version such as 1.2.3"))
		}
	}
	return errs
}

func tooMany(fp *field.Path, n, limit int) field.ErrorList {
	if n > limit {
		return field.ErrorList{field.TooMany(fp, n, limit)}
	}
	return nil
}

func identifier(fp *field.Path, name string) field.ErrorList {
	var errs field.ErrorList
	if len(name) > resourcev1.DeviceMaxIDLength {
		errs = append(errs, field.TooLong(fp, name, resourcev1.DeviceMaxIDLength))
	}
	for _, msg := range content.IsCIdentifier(name) {
		errs = append(errs, field.Invalid(fp, name, msg))
	}
	return errs
}

// dnsName checks a DNS-1123 label (label=true) or subdomain with a maximum length.
func dnsName(fp *field.Path, v string, maxLen int, label bool) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(fp, "")}
	}
	var errs field.ErrorList
	if len(v) > maxLen {
		errs = append(errs, field.TooLong(fp, v, maxLen))
	}
	msgs := content.IsDNS1123Subdomain(v)
	if label {
		msgs = content.IsDNS1123Label(v)
	}
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fp, v, msg))
	}
	return errs
}
