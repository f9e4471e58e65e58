package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"sync"
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
// schema (the real `go tool cue vet -c -d '#Document' ./schemas` command on each document, and
// the same evaluation through the CUE API that draforge scenario vet uses) and the Go validator.
// Each document must get the same verdict from all and the one the corpus expects; every
// mismatch is printed with each side's messages.
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
	cueBin := cueBinary(t)
	api := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace)
	// The cue command starts in about 0.2s: run it for all documents at once, 4 at a time.
	vet, vetErrs := make([][]string, len(docs)), make([]error, len(docs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	for i, d := range docs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			vet[i], vetErrs[i] = d.CUEVet(t.Context(), cueBin, repoRoot())
		})
	}
	wg.Wait()
	if err := errors.Join(vetErrs...); err != nil {
		t.Fatal(err)
	}
	mismatches := 0
	for i, d := range docs {
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
			sdpparity.Side{Name: "cue vet", Msgs: vet[i]}, sdpparity.Side{Name: "cue api", Msgs: d.CUE(schema)},
			sdpparity.Side{Name: "go", Msgs: d.Go()}); m != "" {
			mismatches++
			t.Error(m)
		}
	}
	t.Logf("%d documents, %d mismatches", len(docs), mismatches)
}

// cueBinary is the cue command pinned in go.mod (`go tool cue`), built once by the go command.
func cueBinary(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "tool", "-n", "cue")
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool -n cue: %v", err)
	}
	return strings.TrimSpace(string(out))
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
