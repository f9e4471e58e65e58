package e2e

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/test/sdpparity"
)

// TestSDPSchemaParity runs the SimulatedDevicePool corpus (test/sdpparity: every example,
// test/scenarios/invalid/sdp-*.yaml and the targeted cases of test/scenarios/sdp) through the
// three definitions of its schema: the real kube-apiserver with the CRD of deploy/crds (a
// server-side dry-run create with fieldValidation=Strict, what `kubectl create` sends), the CUE
// schema and the Go validator. Each document must get the same verdict from all three and the
// one the corpus expects; every mismatch is printed with each side's messages.
func TestSDPSchemaParity(t *testing.T) {
	e := newEnv(t)
	installCRDs(t, e)
	docs, err := sdpparity.Load(repoRoot())
	if err != nil {
		t.Fatal(err)
	}
	schema, err := sdpparity.Schema()
	if err != nil {
		t.Fatal(err)
	}
	api := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace)
	mismatches := 0
	for _, d := range docs {
		u := &unstructured.Unstructured{Object: d.InNamespace(e.Namespace)}
		var apiMsgs []string
		_, err := api.Create(t.Context(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		switch {
		case err == nil:
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			apiMsgs = append(apiMsgs, apiMessages(err)...)
		default:
			t.Fatalf("%s: dry-run create: %v", d.Name, err) // not a verdict: the cluster failed
		}
		if m := sdpparity.Mismatch(d, sdpparity.Side{Name: "api-server", Msgs: apiMsgs},
			sdpparity.Side{Name: "cue", Msgs: d.CUE(schema)}, sdpparity.Side{Name: "go", Msgs: d.Go()}); m != "" {
			mismatches++
			t.Error(m)
		}
	}
	t.Logf("%d documents, %d mismatches", len(docs), mismatches)
}

// apiMessages lists an API error's causes (field: message), or its message.
func apiMessages(err error) []string {
	var out []string
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			out = append(out, strings.TrimSpace(c.Field+": "+c.Message))
		}
	}
	if len(out) == 0 {
		out = append(out, err.Error())
	}
	return out
}
