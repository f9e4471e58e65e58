package simdevice

import (
	"encoding/json"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func strictDoc(spec map[string]any) *unstructured.Unstructured {
	s := map[string]any{"deviceType": "gpu", "deviceCount": int64(2), "targetNodes": []any{"node-a"}}
	for k, v := range spec {
		s[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": "p", "namespace": "ns"},
		"spec":     s,
	}}
}

// TestFromUnstructuredStrict: what the API server rejects while decoding a create request
// (fieldValidation=Strict) is rejected here, each error naming its field.
func TestFromUnstructuredStrict(t *testing.T) {
	if p, errs := FromUnstructuredStrict(strictDoc(nil)); len(errs) > 0 || p == nil || p.Spec.DriverName != DefaultDriverName {
		t.Fatalf("valid document: %v %+v", errs, p)
	}
	cases := map[string]struct {
		spec map[string]any
		want string
	}{
		"unknown field":       {map[string]any{"deviceCont": int64(3)}, `unknown field "spec.deviceCont"`},
		"wrong case":          {map[string]any{"devicecount": int64(3)}, `unknown field "spec.devicecount"`},
		"empty driverName":    {map[string]any{"driverName": ""}, "spec.driverName: Invalid value"},
		"empty poolName":      {map[string]any{"poolName": ""}, "spec.poolName: Invalid value"},
		"empty domain":        {map[string]any{"attributeDomain": ""}, "spec.attributeDomain: Invalid value"},
		"empty profile":       {map[string]any{"profile": ""}, "spec.profile: Invalid value"},
		"float capacity":      {map[string]any{"capacities": map[string]any{"cores": 1.5}}, "spec.capacities[cores]: Invalid value: 1.5"},
		"negative zero":       {map[string]any{"capacities": map[string]any{"cores": "-0"}}, "spec.capacities[cores]: Invalid value"},
		"long quantity":       {map[string]any{"capacities": map[string]any{"m": strings.Repeat("1", 65)}}, "spec.capacities[m]: Too long"},
		"fault no device":     {map[string]any{"faults": []any{map[string]any{"mode": "unhealthy"}}}, "spec.faults[0].device: Required value"},
		"fault empty node":    {map[string]any{"faults": []any{map[string]any{"device": int64(0), "mode": "unhealthy", "node": ""}}}, "spec.faults[0].node: Invalid value"},
		"unknown fault field": {map[string]any{"faults": []any{map[string]any{"device": int64(0), "mode": "unhealthy", "x": "y"}}}, `unknown field "spec.faults[0].x"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := FromUnstructuredStrict(strictDoc(tc.spec))
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if all := strings.Join(msgs, "\n"); !strings.Contains(all, tc.want) {
				t.Errorf("want %q in\n%s", tc.want, all)
			}
		})
	}
	// The lenient decoder the controller uses ignores unknown fields (a newer CRD may add
	// some) but matches names case-sensitively, as the API server does.
	p, err := FromUnstructured(strictDoc(map[string]any{"futureField": true}))
	if err != nil || p.Spec.DeviceCount != 2 {
		t.Errorf("lenient decode: %v %+v", err, p)
	}
	u := strictDoc(map[string]any{"devicecount": int64(3)})
	delete(u.Object["spec"].(map[string]any), "deviceCount")
	if p, err := FromUnstructured(u); err != nil || p.Spec.DeviceCount != 0 {
		t.Errorf("devicecount must not fill deviceCount: %v %+v", err, p)
	}
}

// TestValidateMetadata: the API server's metadata rules for custom resources, positioned.
func TestValidateMetadata(t *testing.T) {
	cases := map[string]struct {
		mut  func(p *Pool)
		want string
	}{
		"uppercase name":      {func(p *Pool) { p.Name, p.Spec.PoolName = "Gpus", "gpus" }, "metadata.name: Invalid value"},
		"long name":           {func(p *Pool) { p.Name, p.Spec.PoolName = strings.Repeat("n", 64), "gpus" }, "metadata.name: Too long"},
		"dotted default pool": {func(p *Pool) { p.Name, p.Spec.PoolName = "a.b", "a.b" }, "metadata.name: Invalid value: \"a.b\": must be a DNS label"},
		"bad label key":       {func(p *Pool) { p.Labels = map[string]string{"bad key": "x"} }, "metadata.labels: Invalid value"},
		"bad label value":     {func(p *Pool) { p.Labels = map[string]string{"k": "a b"} }, "metadata.labels: Invalid value"},
		"bad annotation key":  {func(p *Pool) { p.Annotations = map[string]string{"bad key": "x"} }, "metadata.annotations: Invalid value"},
		"17 selectors": {func(p *Pool) {
			p.Spec.NodeSelector = map[string]string{}
			for i := range 17 {
				p.Spec.NodeSelector[strings.Repeat("k", i+1)] = "v"
			}
		}, "spec.nodeSelector: Too many: 17"},
		"65 targets": {func(p *Pool) {
			p.Spec.TargetNodes = nil
			for i := range 65 {
				p.Spec.TargetNodes = append(p.Spec.TargetNodes, "n"+strings.Repeat("x", i))
			}
		}, "spec.targetNodes: Too many: 65"},
		"257 faults": {func(p *Pool) { p.Spec.Faults = make([]Fault, 257) }, "spec.faults: Too many: 257"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPool(nil)
			tc.mut(p)
			var msgs []string
			for _, e := range p.Validate() {
				msgs = append(msgs, e.Error())
			}
			if all := strings.Join(msgs, "\n"); !strings.Contains(all, tc.want) {
				t.Errorf("want %q in\n%s", tc.want, all)
			}
		})
	}
	p := newPool(nil)
	p.Name, p.Spec.PoolName = "gpus.rack1", "gpus"
	if errs := p.Validate(); errs != nil {
		t.Errorf("a dotted name with an explicit poolName is valid: %v", errs)
	}
}

// TestProfileNames: the names the schema generator counts are the ones a node's devices
// publish (own-domain names qualified with a foreign attributeDomain, built-ins where the
// profile has them).
func TestProfileNames(t *testing.T) {
	for _, prof := range KnownProfiles {
		a, c := ProfileNames(prof)
		_, _, builtins := ProfileShape(prof)
		// One device per node, as ProfileShape builds (the TPU topology depends on the count).
		p := newPool(func(s *PoolSpec) { s.Profile = prof; s.AttributeDomain = "other.example.com"; s.DeviceCount = 1 })
		devs, _ := p.physicalDevices("node-a", 0)
		attrs, caps := map[resourcev1.QualifiedName]bool{}, map[resourcev1.QualifiedName]bool{}
		for _, d := range devs {
			for k := range d.Attributes {
				attrs[k] = true
			}
			for k := range d.Capacity {
				caps[k] = true
			}
		}
		want := len(a)
		if builtins {
			want += 2
		}
		if len(attrs) != want || len(caps) != len(c) {
			t.Errorf("%s: ProfileNames %d+%d (built-ins %v), published %d attributes and %d capacities", prof, len(a), len(c), builtins, len(attrs), len(caps))
		}
		for _, n := range a {
			q := resourcev1.QualifiedName(n)
			if !strings.Contains(n, "/") {
				q = resourcev1.QualifiedName("other.example.com/" + n)
			}
			if !attrs[q] {
				t.Errorf("%s: attribute %s not published", prof, q)
			}
		}
	}
}

// TestDecodeErrorNamesTheField: a value of the wrong type or a malformed quantity is reported
// at its field by both decoders (the JSON decoder's own errors name a Go struct, or nothing).
func TestDecodeErrorNamesTheField(t *testing.T) {
	for spec, want := range map[string]string{
		`{"deviceCount":1.5,"targetNodes":["a"]}`:                      `spec.deviceCount: Invalid value: "number 1.5": must be an integer`,
		`{"deviceCount":2,"targetNodes":"a"}`:                          `spec.targetNodes: Invalid value: "string": must be a list`,
		`{"deviceCount":2,"targetNodes":["a"],"capacities":{"m":"x"}}`: `spec.capacities[m]: Invalid value: "x": must be a non-negative quantity such as "80Gi" or "8e9" (an exponent of at most two digits)`,
		// Kubernetes' pattern matches these; the parser refuses the first (found by
		// FuzzSDPParity) and never returns on the second (found by FuzzFromUnstructured).
		`{"deviceCount":2,"targetNodes":["a"],"capacities":{"m":"1e99999999999999999999"}}`: `spec.capacities[m]: Invalid value: "1e99999999999999999999": must be a non-negative quantity such as "80Gi" or "8e9" (an exponent of at most two digits)`,
		`{"deviceCount":2,"targetNodes":["a"],"capacities":{"m":"1e1111111111111111"}}`:     `spec.capacities[m]: Invalid value: "1e1111111111111111": must be a non-negative quantity such as "80Gi" or "8e9" (an exponent of at most two digits)`,
	} {
		var sp map[string]any
		if err := json.Unmarshal([]byte(spec), &sp); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": Group + "/" + Version, "kind": Kind,
			"metadata": map[string]any{"name": "p", "namespace": "n"}, "spec": sp}}
		if _, errs := FromUnstructuredStrict(u); len(errs) != 1 || errs[0].Error() != want {
			t.Errorf("strict %s: %v, want %q", spec, errs, want)
		}
		if _, err := FromUnstructured(u); err == nil || err.Error() != "simdevice: decode n/p: "+want {
			t.Errorf("lenient %s: %v", spec, err)
		}
	}
}
