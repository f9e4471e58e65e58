// Command crdcheck validates a CRD with the API server's own code (apiextensions validation,
// structural schema, CEL compilation and cost estimation) and then validates the
// SimulatedDevicePool documents of multi-document YAML files against it, CEL rules included.
// It is a separate module so the main go.mod does not depend on k8s.io/apiextensions-apiserver.
//
//	cd hack/crdcheck && go run . ../../deploy/crds/simulateddevicepool-crd.yaml ../../examples/scenarios/*.yaml
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

func main() {
	raw, err := os.ReadFile(os.Args[1])
	must(err)
	var v1crd apiextv1.CustomResourceDefinition
	must(yaml.UnmarshalStrict(raw, &v1crd))
	scheme := runtime.NewScheme()
	must(apiextv1.AddToScheme(scheme))
	must(apiextensions.AddToScheme(scheme))
	scheme.Default(&v1crd)
	var crd apiextensions.CustomResourceDefinition
	must(scheme.Convert(&v1crd, &crd, nil))
	errs := validation.ValidateCustomResourceDefinition(context.Background(), &crd)
	for _, e := range errs {
		fmt.Println("CRD:", e)
	}
	if len(errs) > 0 {
		os.Exit(1)
	}
	fmt.Println("CRD valid")
	ss, err := structuralschema.NewStructural(crd.Spec.Validation.OpenAPIV3Schema)
	must(err)
	sv, _, err := apiservervalidation.NewSchemaValidator(crd.Spec.Validation.OpenAPIV3Schema)
	must(err)
	celv := cel.NewValidator(ss, true, celconfig.PerCallLimit)
	failed := false
	// remaining args: YAML files with SDP documents (multi-doc), validated as CRs
	for _, f := range os.Args[2:] {
		data, err := os.ReadFile(f)
		must(err)
		for i, doc := range strings.Split(string(data), "\n---") {
			var obj map[string]interface{}
			js, err := yaml.YAMLToJSON([]byte(doc))
			must(err)
			must(utiljson.Unmarshal(js, &obj))
			if obj == nil || obj["kind"] != "SimulatedDevicePool" {
				continue
			}
			structuraldefaulting.Default(obj, ss)
			var es field.ErrorList
			es = append(es, apiservervalidation.ValidateCustomResource(nil, obj, sv)...)
			ce, _ := celv.Validate(context.Background(), nil, ss, obj, nil, celconfig.RuntimeCELCostBudget)
			es = append(es, ce...)
			md := obj["metadata"].(map[string]interface{})
			fmt.Printf("%s doc %d %v: %d errors\n", f, i, md["name"], len(es))
			for _, e := range es {
				fmt.Println("   ", e)
			}
			failed = failed || len(es) > 0
		}
	}
	if failed {
		os.Exit(1)
	}
}

func must(err error) {
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
}
