package oracle

import (
	"context"
	"reflect"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/allocator"
)

// The corpus is a function of its seed and exercises every feature the issue lists.
func TestRandomCorpus(t *testing.T) {
	a, b := RandomClaims(42, 300), RandomClaims(42, 300)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different claims")
	}
	if reflect.DeepEqual(a, RandomClaims(43, 300)) {
		t.Fatal("different seeds gave the same claims")
	}
	seen := map[string]int{}
	for _, c := range a {
		for _, r := range c.Spec.Devices.Requests {
			if r.FirstAvailable != nil {
				seen["firstAvailable"]++
			}
			if e := r.Exactly; e != nil {
				if e.AllocationMode == resourcev1.DeviceAllocationModeAll {
					seen["All"]++
				}
				if e.AdminAccess != nil {
					seen["adminAccess"]++
				}
				if e.Capacity != nil {
					seen["capacity"]++
				}
				if len(e.Tolerations) > 0 {
					seen["tolerations"]++
				}
				if len(e.Selectors) > 0 {
					seen["selectors"]++
				}
				if e.Count > 1 {
					seen["count>1"]++
				}
			}
		}
		for _, k := range c.Spec.Devices.Constraints {
			if k.MatchAttribute != nil {
				seen["matchAttribute"]++
			}
			if k.DistinctAttribute != nil {
				seen["distinctAttribute"]++
			}
		}
	}
	for _, f := range []string{"firstAvailable", "All", "adminAccess", "capacity", "tolerations", "selectors", "count>1", "matchAttribute", "distinctAttribute"} {
		if seen[f] < 3 {
			t.Errorf("only %d claims use %s: %v", seen[f], f, seen)
		}
	}
}

// The simulator's side alone: the random world is neither all-fit nor none-fit, and the busy
// templates fit less than their idle twins.
func TestSimulateRandomWorld(t *testing.T) {
	w, cases := randomCases(100)
	v := Simulate(context.Background(), cases, allocator.Options{})
	fits := map[string]int{}
	for i := range cases {
		for j, tpl := range w.Templates {
			if v[i][j].Fits {
				fits[tpl.Node.Name]++
			}
		}
	}
	if fits["a100x4-busy"] >= fits["a100x4"] || fits["mig-busy"] >= fits["mig"] || fits["nic-busy"] >= fits["nic"] {
		t.Errorf("busy templates should fit fewer claims: %v", fits)
	}
	if fits["h100x8"] == 0 || fits["h100x8"] == len(cases) {
		t.Errorf("degenerate: %v", fits)
	}
}

// Each mutation the oracle must catch changes the simulator's own verdicts on the random
// world (no cluster): a mutation that changed nothing would pass the oracle vacuously.
func TestMutationsChangeTheSimulator(t *testing.T) {
	_, cases := randomCases(100)
	base := Simulate(context.Background(), cases, allocator.Options{})
	for name, opts := range Mutations() {
		if n := disagreements(cases, Simulate(context.Background(), cases, opts), base, func(Case, int) {}); n == 0 {
			t.Errorf("mutation %q changes no verdict", name)
		} else {
			t.Logf("mutation %q changes the verdicts on %d of %d claims", name, n, len(cases))
		}
	}
}

// randomCases are n claims of seed 42 on the random world.
func randomCases(n int) (*World, []Case) {
	w := RandomWorld()
	var cases []Case
	for _, c := range RandomClaims(42, n) {
		cases = append(cases, Case{ID: c.Name, World: w, Claim: c})
	}
	return w, cases
}
