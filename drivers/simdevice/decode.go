package simdevice

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// FromUnstructured decodes a SimulatedDevicePool and fills in defaults (driverName, poolName,
// attributeDomain). It checks apiVersion and kind but does not validate the spec; call Validate.
// Field names match case-sensitively, as the API server matches them. Unknown fields are
// ignored: objects read from the API server have none (it prunes them), and a newer CRD may
// add fields an older controller does not know.
func FromUnstructured(u *unstructured.Unstructured) (*Pool, error) {
	p, errs := decode(u, false)
	if len(errs) > 0 {
		return nil, fmt.Errorf("simdevice: %w", errs[0])
	}
	return p, nil
}

// FromUnstructuredStrict decodes a document the way the API server reads a create request
// with fieldValidation=Strict (kubectl's default): null fields are dropped (the API server
// prunes nulls it does not declare nullable), and unknown and duplicate fields, values of the
// wrong JSON type and fields present but empty where the CRD has a default or an enum are
// errors, each positioned at its field (*field.Error, or a strict decoding error naming the
// field). The pool is returned defaulted when it decoded; call Validate for the spec rules.
func FromUnstructuredStrict(u *unstructured.Unstructured) (*Pool, []error) {
	return decode(u, true)
}

func decode(u *unstructured.Unstructured, strict bool) (*Pool, []error) {
	if u == nil || u.Object == nil {
		return nil, []error{fmt.Errorf("nil object")}
	}
	if gv, k := u.GetAPIVersion(), u.GetKind(); gv != Group+"/"+Version || k != Kind {
		return nil, []error{fmt.Errorf("expected %s/%s %s, got %q %q", Group, Version, Kind, gv, k)}
	}
	obj := u.Object
	if strict {
		// The API server drops null object fields the schema does not declare nullable
		// (none of ours) before it validates, so a null field is a missing one.
		obj = withoutNulls(obj)
	}
	safe, unsafe := withSafeQuantities(obj)
	raw, err := json.Marshal(safe)
	if err != nil {
		return nil, []error{fmt.Errorf("encode %s: %w", u.GetName(), err)}
	}
	p := &Pool{}
	if !strict {
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, p); err != nil {
			return nil, []error{fmt.Errorf("decode %s/%s: %w", u.GetNamespace(), u.GetName(), locate(obj, raw, err)[0])}
		}
		if len(unsafe) > 0 {
			return nil, []error{fmt.Errorf("decode %s/%s: %w", u.GetNamespace(), u.GetName(), unsafe[0])}
		}
		p.Default()
		return p, nil
	}
	strictErrs, err := sigsjson.UnmarshalStrict(raw, p)
	if err != nil {
		return nil, locate(obj, raw, err)
	}
	if errs := append(strictErrs, rawSpecErrors(obj)...); len(errs) > 0 {
		return nil, errs
	}
	p.Default()
	return p, nil
}

// locate names the field of a decoding error: the JSON decoder names a field of the wrong type
// the Go way ("Go struct field PoolSpec.spec.deviceCount of type int") and a malformed quantity
// not at all (resource.Quantity's own error). The field errors of rawSpecErrors (quantities,
// empty fields) and of the standard decoder's type error (its full field path) replace it; err
// stays only when neither names anything.
func locate(obj map[string]any, raw []byte, err error) []error {
	errs := rawSpecErrors(obj)
	var te *json.UnmarshalTypeError
	if errors.As(json.Unmarshal(raw, &Pool{}), &te) && te.Field != "" {
		errs = append(errs, field.TypeInvalid(field.NewPath(te.Field), te.Value, "must be "+jsonKind(te.Type)))
	}
	if len(errs) == 0 {
		return []error{err}
	}
	return errs
}

// jsonKind names the JSON kind a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "an object"
}

// rawSpecErrors finds what decoding into Go types cannot see: a defaulted, enumerated or
// patterned field present but empty (the CRD default applies only to a missing field, and ""
// matches neither an enum nor a name pattern), a missing fault device (its zero value is index
// 0) or campaign seed, and capacities written as something other than an integer or a quantity string of at
// most 64 characters (resource.Quantity also accepts JSON floats, "-0" and longer strings).
func rawSpecErrors(obj map[string]any) []error {
	spec, _ := obj["spec"].(map[string]any)
	sp := field.NewPath("spec")
	var errs []error
	for _, name := range []string{"driverName", "poolName", "attributeDomain", "profile"} {
		if v, ok := spec[name]; ok && v == "" {
			errs = append(errs, field.Invalid(sp.Child(name), "", "must not be empty: leave the field out for its default"))
		}
	}
	eachQuantity(spec, func(fp *field.Path, v any, _ func(any)) {
		errs = append(errs, rawQuantity(fp, v)...)
	})
	faults, _ := spec["faults"].([]any)
	for i, f := range faults {
		f, _ := f.(map[string]any)
		fp := sp.Child("faults").Index(i)
		if _, ok := f["device"]; !ok && f != nil {
			errs = append(errs, field.Required(fp.Child("device"), "a device index or name <deviceType>-<index>"))
		}
		if v, ok := f["node"]; ok && v == "" {
			errs = append(errs, field.Invalid(fp.Child("node"), "", "must not be empty: leave the field out for every targeted node"))
		}
	}
	// A campaign's seed is required: its zero value is a seed like any other.
	campaigns, _ := spec["faultCampaigns"].([]any)
	for i, c := range campaigns {
		if c, _ := c.(map[string]any); c != nil {
			if _, ok := c["seed"]; !ok {
				errs = append(errs, field.Required(sp.Child("faultCampaigns").Index(i).Child("seed"), "the seed of the campaign's draws"))
			}
		}
	}
	return errs
}

// eachQuantity calls f with every quantity field of a spec, its path and a setter.
func eachQuantity(spec map[string]any, f func(fp *field.Path, v any, set func(any))) {
	sp := field.NewPath("spec")
	inMap := func(m map[string]any, mp *field.Path) {
		for name, v := range m {
			f(mp.Key(name), v, func(x any) { m[name] = x })
		}
	}
	caps, _ := spec["capacities"].(map[string]any)
	inMap(caps, sp.Child("capacities"))
	groups, _ := spec["deviceGroups"].([]any)
	for i, g := range groups {
		g, _ := g.(map[string]any)
		gp := sp.Child("deviceGroups").Index(i)
		caps, _ := g["capacities"].(map[string]any)
		inMap(caps, gp.Child("capacities"))
		pols, _ := g["requestPolicies"].(map[string]any)
		for name, p := range pols {
			p, _ := p.(map[string]any)
			pp := gp.Child("requestPolicies").Key(name)
			if v, ok := p["default"]; ok {
				f(pp.Child("default"), v, func(x any) { p["default"] = x })
			}
			vals, _ := p["validValues"].([]any)
			for j, v := range vals {
				f(pp.Child("validValues").Index(j), v, func(x any) { vals[j] = x })
			}
			r, _ := p["validRange"].(map[string]any)
			for _, k := range []string{"min", "max", "step"} {
				if v, ok := r[k]; ok {
					f(pp.Child("validRange").Child(k), v, func(x any) { r[k] = x })
				}
			}
		}
	}
}

// withSafeQuantities returns a copy of obj whose quantity strings outside QuantityPattern are
// "0", and the errors of those strings. resource.Quantity's decoder must not see them: on
// "1e1111111111111111" resource.ParseQuantity computes 10 to that power and never returns,
// and a CRD installed by an older version admits it.
func withSafeQuantities(obj map[string]any) (map[string]any, []error) {
	unsafe := func(v any) bool {
		q, ok := v.(string)
		return ok && (len(q) > maxQuantityLength || !quantityRE.MatchString(q))
	}
	var errs []error
	spec, _ := obj["spec"].(map[string]any)
	eachQuantity(spec, func(fp *field.Path, v any, _ func(any)) {
		if unsafe(v) {
			errs = append(errs, rawQuantity(fp, v)...)
		}
	})
	if len(errs) == 0 {
		return obj, nil
	}
	safe := copyTree(obj).(map[string]any)
	spec, _ = safe["spec"].(map[string]any)
	eachQuantity(spec, func(_ *field.Path, v any, set func(any)) {
		if unsafe(v) {
			set("0")
		}
	})
	return safe, errs
}

// copyTree copies the maps and lists of a JSON-like value; other values are shared.
func copyTree(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = copyTree(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = copyTree(x)
		}
		return out
	}
	return v
}

// rawQuantity checks a quantity as the CRD's int-or-string with the quantity pattern does:
// an integer or a quantity string of at most 64 characters (resource.Quantity also accepts JSON
// floats, "-0" and longer strings).
func rawQuantity(fp *field.Path, v any) []error {
	switch q := v.(type) {
	case int64:
		if q < 0 {
			return []error{field.Invalid(fp, q, "must not be negative")}
		}
	case float64:
		if q != float64(int64(q)) {
			return []error{field.Invalid(fp, q, "must be an integer or a quantity string such as \"80Gi\"")}
		}
	case string:
		if len(q) > maxQuantityLength {
			return []error{field.TooLong(fp, q, maxQuantityLength)}
		} else if !quantityRE.MatchString(q) {
			return []error{field.Invalid(fp, q, "must be a non-negative quantity such as \"80Gi\" or \"8e9\" (an exponent of at most two digits)")}
		} else if _, err := resource.ParseQuantity(q); err != nil {
			// Not expected: the pattern admits only what the parser takes (FuzzSDPParity
			// would show a gap as a CUE/Go mismatch).
			return []error{field.Invalid(fp, q, "must be a quantity Kubernetes can parse: "+err.Error())}
		}
	default:
		return []error{field.Invalid(fp, v, "must be an integer or a quantity string such as \"80Gi\"")}
	}
	return nil
}

// withoutNulls copies obj without its null-valued object fields, at every depth (list items
// stay), as apiextensions-apiserver's pruning of non-nullable nulls does.
func withoutNulls(obj map[string]any) map[string]any {
	var clean func(v any) any
	clean = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, x := range v {
				if x != nil {
					out[k] = clean(x)
				}
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				out[i] = clean(x)
			}
			return out
		}
		return v
	}
	return clean(obj).(map[string]any)
}

// Default fills in the fields the CRD (or the controller) defaults.
func (p *Pool) Default() {
	if p.Spec.DriverName == "" {
		p.Spec.DriverName = DefaultDriverName
	}
	if p.Spec.PoolName == "" {
		p.Spec.PoolName = p.Name
	}
	if p.Spec.AttributeDomain == "" {
		p.Spec.AttributeDomain = p.Spec.DriverName
	}
}
