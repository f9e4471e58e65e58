package explain

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/draforge/draforge/cmd/draforge/internal/inventory"
	it "github.com/draforge/draforge/cmd/draforge/internal/inventory/inventorytest"
	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/simdevice"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var update = flag.Bool("update", false, "rewrite golden files")

func render(t *testing.T, s *inventory.Snapshot, ns, name string) (*Result, string) {
	t.Helper()
	r, err := Explain(t.Context(), s, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, r); err != nil {
		t.Fatal(err)
	}
	return r, b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		_ = os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden:\n%s", name, got)
	}
}

func TestPendingClaimFits(t *testing.T) {
	r, out := render(t, it.Healthy(), "demo", "waiting")
	if !r.Explanation.Allocatable || r.Explanation.Node != "node-a" {
		t.Fatalf("expected allocatable on node-a: %+v", r.Explanation)
	}
	// gpu-0 on node-a is taken by demo/used.
	if !strings.Contains(out, "AlreadyAllocated: allocated to claim demo/used") {
		t.Errorf("no AlreadyAllocated reason:\n%s", out)
	}
	golden(t, "pending-fits.txt", out)
}

func TestMissingClass(t *testing.T) {
	s := it.Healthy()
	s.Claims = append(s.Claims, it.Claim("demo", "lost", "no-such-class"))
	s.Sort()
	r, out := render(t, s, "demo", "lost")
	if r.ReasonCounts[allocator.ReasonClassNotFound] != 1 {
		t.Errorf("reason counts %v", r.ReasonCounts)
	}
	for _, want := range []string{"ClassNotFound", `create DeviceClass "no-such-class"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	golden(t, "missing-class.txt", out)
}

func TestUnhealthyDevices(t *testing.T) {
	s := it.Healthy()
	p := s.Pools[0]
	p.Spec.Faults = []simdevice.Fault{{Device: intOrStr("gpu-1"), Mode: simdevice.FaultUnhealthy}}
	s.Slices = it.Slices(p, s.Nodes)
	c := it.Claim("demo", "two", "gpu")
	c.Spec.Devices.Requests[0].Exactly.Count = 2
	s.Claims = append(s.Claims, c)
	s.Sort()
	r, out := render(t, s, "demo", "two")
	if r.Explanation.Allocatable || r.ReasonCounts[allocator.ReasonTainted] != 2 {
		t.Fatalf("want not allocatable with 2 tainted: %v\n%s", r.ReasonCounts, out)
	}
	if !strings.Contains(out, "toleration") {
		t.Errorf("no toleration remedy:\n%s", out)
	}
}

func TestAllocatedClaimSaysWhereAndWhat(t *testing.T) {
	_, out := render(t, it.Healthy(), "demo", "used")
	want := "allocated on node node-a: gpu=sim.draforge.oaslananka/demo/gpus/node-a/gpu-0 (reserved for pods/worker)"
	if !strings.Contains(out, want) {
		t.Errorf("want %q in:\n%s", want, out)
	}
	golden(t, "allocated.txt", out)
}

func TestNotFound(t *testing.T) {
	_, err := Explain(t.Context(), it.Healthy(), "demo", "nope")
	if !IsNotFound(err) || err.Error() != `ResourceClaim "nope" not found in namespace "demo"` {
		t.Fatalf("got %v", err)
	}
}

func intOrStr(s string) intstr.IntOrString { return intstr.FromString(s) }
