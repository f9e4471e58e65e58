package e2e

import (
	"context"
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

	"github.com/draforge/draforge/drivers/simdevice"
)

// outcomeLine is "# outcome: <claim> allocated <node> [device]" or "# outcome: <claim> pending".
var outcomeLine = regexp.MustCompile(`(?m)^# outcome: (\S+) (allocated|pending)(?: (\S+))?(?: (\S+))?$`)

// TestScenarios applies every example scenario to the real API server with a running
// controller and asserts each claim's documented outcome. Claims are applied one at a time in
// file order, as the outcomes assume.
func TestScenarios(t *testing.T) {
	e := newEnv(t)
	e.setup(t)
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
				e.apply(t, "", u)
				if u.GetKind() == "SimulatedDevicePool" {
					e.waitPoolReady(t, u.GetNamespace(), u.GetName())
				}
			}
			t.Cleanup(func() { e.deleteDocs(t, docs) })
			for _, c := range claims {
				e.apply(t, "", c)
				want := outcomeFor(outcomes, c.GetName())
				if want == nil {
					t.Fatalf("claim %s has no outcome line", c.GetName())
				}
				e.checkOutcome(t, c.GetNamespace(), c.GetName(), want[2], want[3], want[4])
			}
			if n := ctrl.metric(t, "draforge_controller_terminal_errors_total"); n != 0 {
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

// waitPoolReady waits for Ready=True for the pool's current generation.
func (e *env) waitPoolReady(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var pool *unstructured.Unstructured
	eventually(t, 30*time.Second, func() (bool, string) {
		u, err := e.Dynamic.Resource(simdevice.GVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pool = u
		return conditionIs(u, "Ready", "True"), fmt.Sprintf("pool %s/%s conditions %v", ns, name, u.Object["status"])
	})
	return pool
}

func conditionIs(u *unstructured.Unstructured, typ, status string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		if m["type"] == typ && m["status"] == status && g == u.GetGeneration() {
			return true
		}
	}
	return false
}

// deleteDocs deletes claims, then pools (waiting for their finalizer to clean up), then the rest.
func (e *env) deleteDocs(t *testing.T, docs []*unstructured.Unstructured) {
	// Runs in t.Cleanup, where t.Context() is already cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	order := []string{"ResourceClaim", "SimulatedDevicePool", "DeviceClass"}
	for _, kind := range order {
		for _, u := range docs {
			if u.GetKind() != kind {
				continue
			}
			var err error
			switch kind {
			case "ResourceClaim":
				err = e.Kube.ResourceV1().ResourceClaims(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			case "SimulatedDevicePool":
				err = e.Dynamic.Resource(simdevice.GVR).Namespace(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			case "DeviceClass":
				err = e.Kube.ResourceV1().DeviceClasses().Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			}
			if ignoreNotFound(err) != nil {
				t.Errorf("delete %s %s: %v", kind, u.GetName(), err)
			}
			if kind == "SimulatedDevicePool" {
				e.waitPoolGone(ctx, t, u.GetNamespace(), u.GetName())
			}
		}
	}
}

// waitPoolGone waits until the pool and every slice labelled with its name are deleted.
func (e *env) waitPoolGone(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Dynamic.Resource(simdevice.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if ignoreNotFound(err) != nil || err == nil {
			return false, fmt.Sprintf("pool %s/%s still exists (%v)", ns, name, err)
		}
		left, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			LabelSelector: simdevice.LabelSDPNamespace + "=" + ns + "," + simdevice.LabelSDPName + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		return len(left.Items) == 0, fmt.Sprintf("%d slices left", len(left.Items))
	})
}
