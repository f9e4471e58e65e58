package machinegraph

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/machines"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestEmbeddedMachinesGolden(t *testing.T) {
	names, err := drivers.Names()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := machines.Load(names)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, m := range ms {
		if err := Mermaid(&b, m); err != nil {
			t.Fatal(err)
		}
	}
	const path = "testdata/machines.mmd"
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("differs from golden:\n%s", b.Bytes())
	}
	for _, s := range []string{"stateDiagram-v2", "[*] --> pending", "terminal_error --> [*]", "class terminal_error terminal", "pending --> allocated : allocate / allocateClaim"} {
		if !bytes.Contains(b.Bytes(), []byte(s)) {
			t.Errorf("output lacks %q", s)
		}
	}
}
