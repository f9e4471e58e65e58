package explain

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/inventory"
	it "github.com/draforge/draforge/drivers/inventory/inventorytest"
	"github.com/draforge/draforge/drivers/simdevice"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite golden files")

func render(t *testing.T, s *inventory.Snapshot, ns, name string) (*Result, string) {
	t.Helper()
	return renderOpts(t, s, ns, name, false)
}

func renderOpts(t *testing.T, s *inventory.Snapshot, ns, name string, devices bool) (*Result, string) {
	t.Helper()
	r, err := Explain(t.Context(), s, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, r, RenderOptions{Devices: devices}); err != nil {
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
	// gpu-0 on node-a is taken by demo/used: counted in the summary, named only with --devices.
	if !strings.Contains(out, "excluded: AlreadyAllocated=1") || strings.Contains(out, "gpu-0") {
		t.Errorf("summary should count, not list, the excluded device:\n%s", out)
	}
	golden(t, "pending-fits.txt", out)
	_, out = renderOpts(t, it.Healthy(), "demo", "waiting", true)
	if !strings.Contains(out, "AlreadyAllocated: allocated to claim demo/used") {
		t.Errorf("no AlreadyAllocated reason with --devices:\n%s", out)
	}
	golden(t, "pending-fits-devices.txt", out)
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

// At 200 nodes × 8 devices of two drivers the summary stays a few lines: devices of the other
// driver are counted, nodes are grouped by their blocking reason.
func TestSummaryScales(t *testing.T) {
	s := &inventory.Snapshot{Classes: []*resourcev1.DeviceClass{it.Class("gpu")}}
	for i := range 200 {
		s.Nodes = append(s.Nodes, it.Node(fmt.Sprintf("node-%03d", i)))
	}
	// More nodes than targetNodes may list: select them by label.
	p := it.Pool("demo", "gpus", 8)
	p.Spec.NodeSelector = map[string]string{"draforge.test/scale": "yes"}
	for _, n := range s.Nodes {
		n.Labels["draforge.test/scale"] = "yes"
	}
	s.Pools = []*simdevice.Pool{p}
	s.Slices = it.Slices(p, s.Nodes)
	for _, sl := range it.Slices(p, s.Nodes) { // the same devices, published by another driver
		sl.Name = "other-" + sl.Name
		sl.Spec.Driver = "other.example.com"
		s.Slices = append(s.Slices, sl)
	}
	c := it.Claim("demo", "nine", "gpu")
	c.Spec.Devices.Requests[0].Exactly.Count = 9
	s.Claims = []*resourcev1.ResourceClaim{c}
	s.Sort()
	r, out := render(t, s, "demo", "nine")
	if r.Explanation.Allocatable {
		t.Fatal("9 devices on one node of 8 must not fit")
	}
	for _, want := range []string{
		"gpu (class gpu, ExactCount 9): 1600 matching, 1600 available",
		"excluded: ClassSelectorFalse=1600",
		"Nodes: 0 of 200 fit the whole claim",
		"does not fit (200): gpu: 8 of 9 devices available",
		"node-000, node-001, node-002 and 197 more",
		"lower spec.devices.requests[0].exactly.count",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if lines := strings.Count(out, "\n"); lines > 25 {
		t.Errorf("summary has %d lines, want a few:\n%s", lines, out)
	}
	golden(t, "summary-200-nodes.txt", out)
}

// A DeviceTaintRule is named in the device's reason and in the remedy.
func TestTaintRuleExplained(t *testing.T) {
	s := it.Healthy()
	s.TaintRules = []*resourcev1.DeviceTaintRule{{
		ObjectMeta: metav1.ObjectMeta{Name: "drain-node-b"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(simdevice.DefaultDriverName), Pool: ptr.To(s.Slices[1].Spec.Pool.Name)},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/drain", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}}
	c := it.Claim("demo", "two", "gpu")
	c.Spec.Devices.Requests[0].Exactly.Count = 2
	s.Claims = append(s.Claims, c)
	s.Sort()
	r, out := renderOpts(t, s, "demo", "two", true)
	if r.Explanation.Allocatable {
		t.Fatalf("node-a has one free device, node-b's are tainted: must not fit\n%s", out)
	}
	for _, want := range []string{
		"Tainted: taint example.com/drain=:NoSchedule (from DeviceTaintRule drain-node-b) is not tolerated",
		`add a toleration to request gpu (spec.devices.requests[0].exactly.tolerations: key "example.com/drain", effect NoSchedule) or delete DeviceTaintRule drain-node-b`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	golden(t, "taint-rule.txt", out)
}

// An NVIDIA health taint says what happened (the XID and its meaning); an ignored XID (effect
// None) keeps no claim off its device.
func TestNvidiaHealthTaintExplained(t *testing.T) {
	s := it.Healthy()
	p := s.Pools[0]
	p.Spec.Profile = simdevice.ProfileNvidiaGPU
	p.Spec.Faults = []simdevice.Fault{
		{Device: intOrStr("gpu-1"), Mode: simdevice.FaultXID, XID: ptr.To[int64](79)},
		{Device: intOrStr("gpu-0"), Node: "node-b", Mode: simdevice.FaultXID, XID: ptr.To[int64](13)},
	}
	s.Slices = it.Slices(p, s.Nodes)
	two := it.Claim("demo", "two", "gpu")
	two.Spec.Devices.Requests[0].Exactly.Count = 2
	s.Claims = append(s.Claims, two)
	s.Sort()
	r, out := renderOpts(t, s, "demo", "two", true)
	if r.Explanation.Allocatable || r.ReasonCounts[allocator.ReasonTainted] != 2 {
		t.Fatalf("want not allocatable with 2 tainted: %v\n%s", r.ReasonCounts, out)
	}
	want := "Tainted: taint gpu.nvidia.com/xid=79:NoSchedule (published by the driver: NVIDIA driver health event: XID 79 (GPU has fallen off the bus), a critical error) is not tolerated"
	if !strings.Contains(out, want) || !strings.Contains(out, `key "gpu.nvidia.com/xid", effect NoSchedule`) {
		t.Errorf("output lacks %q or the toleration remedy:\n%s", want, out)
	}
	// demo/waiting (one GPU) fits: node-b's gpu-0 has only the informational XID 13.
	if r, out := renderOpts(t, s, "demo", "waiting", true); !r.Explanation.Allocatable || !strings.Contains(out, "node-b/gpu-0: available") {
		t.Errorf("XID 13 (effect None) must not block:\n%s", out)
	}
}
