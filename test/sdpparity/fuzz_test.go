package sdpparity

import (
	"regexp"
	"testing"

	cueyaml "cuelang.org/go/encoding/yaml"
	"k8s.io/apimachinery/pkg/util/validation"
)

// goLocated is how a Go validator message names its place: a field path, the strict
// decoder's unknown/duplicate field naming one, or the apiVersion and kind it expected.
var goLocated = regexp.MustCompile(`^((metadata|spec)[.\[]|(apiVersion|kind|metadata|spec): |(unknown|duplicate) field "|expected draforge\.oaslananka/v1alpha1 SimulatedDevicePool, got )`)

// FuzzSDPParity feeds SimulatedDevicePool documents to the CUE schema and the Go validator.
// Seeds: every document of the parity corpus, each alone (plus testdata/fuzz). Invariants: no
// panic; both give the same verdict unless the difference is a documented exception
// (Exception); every Go message names the field at fault. (The CUE side's file:line:col is
// FuzzScenarioFile's check, on the path `scenario vet` takes; the API server's verdict needs a
// cluster: test/e2e's TestSDPSchemaParity.)
func FuzzSDPParity(f *testing.F) {
	docs, err := Load("../..")
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range docs {
		src, err := cueyaml.Encode(d.cue)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	schema, err := Schema()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		docs, err := Parse("fuzz.yaml", src)
		if err != nil {
			return // not YAML, or not objects: FuzzScenarioFile checks those rejections
		}
		for _, d := range docs {
			cueMsgs, goMsgs := d.CUE(schema), d.Go()
			// The Go side checks the document in the namespace of the request (Doc.Go, as the
			// API server would); the CUE side checks the one it names. Only a valid one is the
			// same to both.
			md, _ := d.Object["metadata"].(map[string]any)
			ns, isString := md["namespace"].(string)
			sameNamespace := md["namespace"] == nil || isString && len(validation.IsDNS1123Label(ns)) == 0
			if m := Mismatch(d, Side{"cue", cueMsgs}, Side{"go", goMsgs}); m != "" && sameNamespace && !Exception(d.Object, cueMsgs, goMsgs) {
				t.Fatal(m)
			}
			for _, m := range goMsgs {
				if !goLocated.MatchString(m) {
					t.Fatalf("%s: Go message without a field: %q", d.Name, m)
				}
			}
		}
	})
}
