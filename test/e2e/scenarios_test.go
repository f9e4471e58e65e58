package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// outcomeLine is "# outcome: <claim> allocated <node> [device]" or "# outcome: <claim> pending".
var outcomeLine = regexp.MustCompile(`(?m)^# outcome: (\S+) (allocated|pending)(?: (\S+))?(?: (\S+))?$`)

// TestScenarios applies every example scenario to the real API server with a running
// controller and asserts each claim's documented outcome. Claims are applied one at a time in
// file order, as the outcomes assume.
func TestScenarios(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	ctrl := startController(t)
	files, _ := filepath.Glob("../../examples/scenarios/*.yaml")
	if len(files) < 7 {
		t.Fatalf("want at least 7 scenarios, found %d", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			outcomes := outcomeLine.FindAllStringSubmatch(string(src), -1)
			if len(outcomes) == 0 {
				t.Fatalf("%s documents no outcome", f)
			}
			docs := decodeDocs(t, src)
			var claims []*unstructured.Unstructured
			for _, u := range docs {
				if u.GetKind() == "ResourceClaim" {
					claims = append(claims, u)
					continue
				}
				e.Apply(t, "", u)
				if u.GetKind() == "SimulatedDevicePool" {
					e.WaitPoolReady(t, u.GetNamespace(), u.GetName())
				}
			}
			t.Cleanup(func() { e.DeleteDocs(t, docs) })
			for _, c := range claims {
				e.Apply(t, "", c)
				want := outcomeFor(outcomes, c.GetName())
				if want == nil {
					t.Fatalf("claim %s has no outcome line", c.GetName())
				}
				e.checkOutcome(t, c.GetNamespace(), c.GetName(), want[2], want[3], want[4])
			}
			if n := ctrl.Metric(t, "draforge_controller_terminal_errors_total"); n != 0 {
				t.Errorf("terminal errors: %v", n)
			}
		})
	}
}

func outcomeFor(outcomes [][]string, claim string) []string {
	for _, o := range outcomes {
		if o[1] == claim {
			return o
		}
	}
	return nil
}

// checkOutcome waits for an allocation on node (and device, when given), or for a claim to
// stay unallocated while the controller has had time to try it.
func (e *env) checkOutcome(t *testing.T, ns, name, kind, node, device string) {
	t.Helper()
	if kind == "pending" {
		time.Sleep(2 * time.Second)
		c, err := e.Kube.ResourceV1().ResourceClaims(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation != nil {
			t.Errorf("claim %s/%s: want pending, got %s", ns, name, describeAllocation(c))
		}
		return
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		c, err := e.Kube.ResourceV1().ResourceClaims(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := describeAllocation(c)
		want := "allocated " + node
		if device != "" {
			return strings.HasPrefix(got, want+" ") && slices.Contains(strings.Fields(got)[2:], device), got
		}
		return strings.HasPrefix(got, want+" "), fmt.Sprintf("claim %s/%s: want %s, got %s", ns, name, want, got)
	})
}

// describeAllocation renders "allocated <node> <device>..." or "pending".
func describeAllocation(c *resourcev1.ResourceClaim) string {
	a := c.Status.Allocation
	if a == nil {
		return "pending"
	}
	node := "?"
	if ns := a.NodeSelector; ns != nil && len(ns.NodeSelectorTerms) > 0 {
		for _, f := range ns.NodeSelectorTerms[0].MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				node = f.Values[0]
			}
		}
	}
	var devs []string
	for _, r := range a.Devices.Results {
		devs = append(devs, r.Device)
	}
	return "allocated " + node + " " + strings.Join(devs, " ")
}
