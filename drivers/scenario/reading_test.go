package scenario

import (
	"strings"
	"testing"
)

// TestDecodeRefusesWhatYAML11ReadsOtherwise: the schema (YAML 1.2) reads an unquoted `n` or
// `yes` as a string, Kubernetes' decoder (YAML 1.1) as a boolean; Decode refuses the value at
// its position instead of failing later without one (found by FuzzSimulatedNodes: `prefix: n`
// passed vet, then `nodes apply` failed in simnode.Decode). Quoted, the same values pass.
func TestDecodeRefusesWhatYAML11ReadsOtherwise(t *testing.T) {
	nodes := "apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedNodes\nmetadata:\n  name: r\nspec:\n  prefix: %s\n  count: 1\n  labels:\n    gpu: %s\n"
	pod := "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: [{name: c, image: i}]\n"
	for _, c := range []struct{ prefix, label, want string }{
		{"n", `"yes"`, `s.yaml:6:3: spec.prefix: the schema reads "n", Kubernetes YAML (1.1) reads false: quote the value`},
		{"node", "on", `s.yaml:9:5: spec.labels.gpu: the schema reads "on", Kubernetes YAML (1.1) reads true: quote the value`},
	} {
		_, err := Decode("s.yaml", []byte(strings.ReplaceAll(strings.Replace(nodes, "%s", c.prefix, 1), "%s", c.label)+pod), "ns")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("prefix %s, label %s: %v, want %s", c.prefix, c.label, err, c.want)
		}
	}
	objs, err := Decode("s.yaml", []byte(strings.ReplaceAll(strings.Replace(nodes, "%s", `"n"`, 1), "%s", `"yes"`)+pod), "ns")
	if err != nil || len(objs) != 2 {
		t.Fatalf("quoted values: %v", err)
	}
	if objs[0].Obj.GetNamespace() != "" || objs[1].Obj.GetNamespace() != "ns" {
		t.Errorf("namespaces %q %q: want none for the nodes, the default for the pod", objs[0].Obj.GetNamespace(), objs[1].Obj.GetNamespace())
	}
}
