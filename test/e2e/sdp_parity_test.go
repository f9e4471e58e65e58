package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

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
	mismatches, seen := 0, ""
	for i, d := range docs {
		u := &unstructured.Unstructured{Object: d.InNamespace(e.Namespace)}
		var apiMsgs []string
		_, err := api.Create(t.Context(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		switch {
		case err == nil:
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			apiMsgs = append(apiMsgs, apiMessages(err)...)
			seen += strings.Join(apiMsgs, "\n") + "\n"
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

	// The corpus exercises every CEL rule of the CRD and every constrained spec field.
	crd, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "crds", "simulateddevicepool-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(crd, &doc); err != nil {
		t.Fatal(err)
	}
	versions, _ := doc["spec"].(map[string]any)["versions"].([]any)
	root := versions[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	checked := 0
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		rules, _ := s["x-kubernetes-validations"].([]any)
		for _, r := range rules {
			checked++
			if msg := r.(map[string]any)["message"].(string); !strings.Contains(seen, msg) {
				t.Errorf("no corpus document breaks the rule of %s: %q", path, msg)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			p := p.(map[string]any)
			if strings.HasPrefix(path, "spec") || name == "spec" {
				walk(strings.TrimPrefix(path+"."+name, "."), p)
			}
			if path == "spec" {
				checked++
			}
			if path == "spec" && !strings.Contains(seen, "spec."+name) {
				t.Errorf("no corpus document is rejected at spec.%s", name)
			}
		}
		if p, ok := s["additionalProperties"].(map[string]any); ok {
			walk(path+"[*]", p)
		}
		if p, ok := s["items"].(map[string]any); ok {
			walk(path+"[*]", p)
		}
	}
	walk("", root)
	t.Logf("checked that the corpus breaks each of %d CEL rules and spec fields of the CRD", checked)
	if checked < 25 {
		t.Errorf("checked only %d rules and fields of the CRD; did its layout change?", checked)
	}
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
