package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/draforge/draforge/drivers/scenario"
	"github.com/draforge/draforge/drivers/simnode"
)

// TestNodesCountCap: --count above simnode.MaxNodes (10,000) is refused naming the flag and the
// cap, before any client is built; the cap is the schema's (10,000 passes its check, 10,001
// does not) and the help states it.
func TestNodesCountCap(t *testing.T) {
	for _, sub := range []string{"apply", "delete"} {
		for _, c := range []struct{ count, want string }{
			{"10001", "--count 10001: at most 10000 nodes per command"},
			{"-3", "--count -3: must be positive"},
		} {
			root := newRoot("draforge")
			root.SetOut(&bytes.Buffer{})
			root.SetErr(&bytes.Buffer{})
			// An unreachable kubeconfig path: the command must fail before reading it.
			root.SetArgs([]string{"nodes", sub, "--prefix", "n", "--count", c.count, "--kubeconfig", "/nonexistent/kubeconfig"})
			if err := root.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("nodes %s --count %s: %v, want %q", sub, c.count, err, c.want)
			}
		}
	}

	ok := nodeFlags{prefix: "n", count: simnode.MaxNodes}
	specs, err := ok.specs(nil, nil)
	if err != nil || len(specs) != 1 || specs[0].Count != simnode.MaxNodes {
		t.Fatalf("--count %d: %v %v", simnode.MaxNodes, specs, err)
	}
	// The schema agrees on the bound: one more fails its check too.
	doc := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata: {name: x}\nspec: {prefix: n, count: %d}\n", simnode.APIVersion, simnode.Kind, simnode.MaxNodes+1)
	if _, err := scenario.Decode("doc.yaml", []byte(doc), ""); err == nil || !strings.Contains(err.Error(), "<=10000") {
		t.Errorf("schema accepts count %d: %v", simnode.MaxNodes+1, err)
	}

	var help bytes.Buffer
	root := newRoot("draforge")
	root.SetOut(&help)
	root.SetArgs([]string{"nodes", "apply", "--help"})
	if err := root.Execute(); err != nil || !strings.Contains(help.String(), "at most 10000 per command") {
		t.Errorf("help lacks the cap (%v):\n%s", err, help.String())
	}
}
