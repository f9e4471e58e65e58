package resourcegraph

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/draforge/draforge/drivers/inventory"
	it "github.com/draforge/draforge/drivers/inventory/inventorytest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\n%s", name, got)
	}
}

func fixture() *inventory.Snapshot {
	s := it.Healthy()
	// A claim naming a missing class.
	s.Claims = append(s.Claims, it.Claim("other", "lost", "no-such-class"))
	return s.Sort()
}

func TestGoldens(t *testing.T) {
	g := Build(fixture())
	var dot, mmd bytes.Buffer
	if err := g.DOT(&dot); err != nil {
		t.Fatal(err)
	}
	if err := g.Mermaid(&mmd); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "graph.dot", dot.Bytes())
	golden(t, "graph.mmd", mmd.Bytes())
	golden(t, "graph.json", append(js, '\n'))
}

func TestDeterministic(t *testing.T) {
	a, _ := json.Marshal(Build(fixture()))
	for range 20 {
		s := fixture()
		// Reverse every list: the output must not depend on input order.
		for i, j := 0, len(s.Slices)-1; i < j; i, j = i+1, j-1 {
			s.Slices[i], s.Slices[j] = s.Slices[j], s.Slices[i]
		}
		for i, j := 0, len(s.Claims)-1; i < j; i, j = i+1, j-1 {
			s.Claims[i], s.Claims[j] = s.Claims[j], s.Claims[i]
		}
		b, _ := json.Marshal(Build(s))
		if !bytes.Equal(a, b) {
			t.Fatal("graph depends on input order")
		}
	}
}

func TestNamespaceScope(t *testing.T) {
	s := fixture()
	s.Namespace = "other"
	s.Pools, s.Pods = nil, nil
	var claims []string
	for _, c := range s.Claims {
		if c.Namespace == "other" {
			claims = append(claims, c.Name)
		}
	}
	s.Claims = s.Claims[len(s.Claims)-1:]
	g := Build(s)
	kinds := map[string]int{}
	for _, n := range g.Nodes {
		kinds[n.Kind]++
	}
	if kinds[KindResourcePool] != 0 || kinds[KindNode] != 0 || kinds[KindResourceClaim] != 1 || kinds[KindDeviceClass] != 1 {
		t.Fatalf("scoped graph has %v (claims %v)", kinds, claims)
	}
	for _, n := range g.Nodes {
		if n.Kind == KindDeviceClass && !n.Missing {
			t.Errorf("missing class not marked: %+v", n)
		}
	}
}
