package simdevice

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// FuzzFromUnstructured feeds arbitrary JSON objects through FromUnstructured(Strict), Validate and,
// for valid pools, DesiredSlices. Nothing may panic, and every slice built from a pool that
// passed Validate must satisfy the API's slice rules. Seeds: every SimulatedDevicePool of the
// parity corpus (test/sdpparity's files) as JSON, plus testdata/fuzz.
func FuzzFromUnstructured(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"draforge.oaslananka/v1alpha1","kind":"SimulatedDevicePool","metadata":{"name":"p","namespace":"n"},"spec":{"deviceType":"gpu","deviceCount":2,"targetNodes":["node-a"]}}`))
	n := 0
	for _, glob := range []string{"../../examples/scenarios/*.yaml", "../../test/scenarios/invalid/sdp-*.yaml", "../../test/scenarios/sdp/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(src), 4096)
			for {
				var obj map[string]any
				if err := dec.Decode(&obj); err != nil {
					if !errors.Is(err, io.EOF) {
						f.Fatalf("%s: %v", file, err)
					}
					break
				}
				if obj["kind"] == Kind {
					b, _ := json.Marshal(obj)
					f.Add(b)
					n++
				}
			}
		}
	}
	if n < 100 {
		f.Fatalf("%d corpus documents, want at least 100", n)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]any
		if json.Unmarshal(data, &obj) != nil || obj == nil {
			return
		}
		// The strict decoder (the parity corpus's Go side) must not accept more than the
		// lenient one the controller uses.
		strict, strictErrs := FromUnstructuredStrict(&unstructured.Unstructured{Object: obj})
		checkLocated(t, strictErrs)
		if strict != nil {
			checkLocated(t, strict.Validate())
		}
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

// checkLocated: every error names its field: a *field.Error, the strict decoder's
// unknown/duplicate field, or a wrong apiVersion/kind (the fields it names).
func checkLocated(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		var fe *field.Error
		if errors.As(err, &fe) && fe.Field != "" {
			continue
		}
		if m := err.Error(); strings.HasPrefix(m, `unknown field "`) || strings.HasPrefix(m, `duplicate field "`) || strings.HasPrefix(m, "expected "+Group) {
			continue
		}
		t.Fatalf("error without its field: %q", err)
	}
}
