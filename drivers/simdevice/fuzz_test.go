package simdevice

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzFromUnstructured feeds arbitrary JSON objects through FromUnstructured(Strict), Validate and,
// for valid pools, DesiredSlices. Nothing may panic, and every slice built from a pool that
// passed Validate must satisfy the API's slice rules. Seeds live in testdata/fuzz.
func FuzzFromUnstructured(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"draforge.oaslananka/v1alpha1","kind":"SimulatedDevicePool","metadata":{"name":"p","namespace":"n"},"spec":{"deviceType":"gpu","deviceCount":2,"targetNodes":["node-a"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]any
		if json.Unmarshal(data, &obj) != nil || obj == nil {
			return
		}
		// The strict decoder (the parity corpus's Go side) must not accept more than the
		// lenient one the controller uses.
		strict, strictErrs := FromUnstructuredStrict(&unstructured.Unstructured{Object: obj})
		p, err := FromUnstructured(&unstructured.Unstructured{Object: obj})
		if err != nil {
			if len(strictErrs) == 0 {
				t.Fatalf("strict decoding accepted what lenient decoding rejects: %v", err)
			}
			return
		}
		if len(strictErrs) == 0 && strict == nil {
			t.Fatal("strict decoding returned neither a pool nor errors")
		}
		if errs := p.Validate(); len(errs) > 0 {
			if _, err := DesiredSlices(p, testNodes()); err == nil {
				t.Fatal("DesiredSlices accepted a pool that Validate rejects")
			}
			return
		}
		slices, err := DesiredSlices(p, testNodes())
		if err != nil {
			t.Fatalf("valid pool rejected: %v", err)
		}
		for _, s := range slices {
			checkSliceValid(t, s)
		}
	})
}
