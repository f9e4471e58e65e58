package simdevice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	cueyaml "cuelang.org/go/encoding/yaml"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/compactslice"
)

// scenario is one examples/scenarios file, decoded.
type scenario struct {
	file     string
	pools    []*Pool
	classes  []*resourcev1.DeviceClass
	claims   []*resourcev1.ResourceClaim
	outcomes map[string]string // namespace/claim -> "allocated node-a [device]" | "pending"
}

var outcomeRE = regexp.MustCompile(`(?m)^# outcome: (\S+) (.+)$`)

func loadScenario(t *testing.T, file string) *scenario {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := &scenario{file: filepath.Base(file), outcomes: map[string]string{}}
	for _, m := range outcomeRE.FindAllStringSubmatch(string(src), -1) {
		if m[1] == "pod" || m[1] == "job" || m[1] == "deployment" || m[1] == "podgroup" || m[1] == "computedomain" {
			continue // workload outcomes need kube-scheduler: e2e TestScenarios checks them
		}
		sc.outcomes[m[1]] = strings.TrimSpace(m[2])
	}
	ctx := cuecontext.New()
	dec := cueyaml.NewDecoder(file, bytes.NewReader(src))
	for {
		expr, err := dec.Extract()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := ctx.BuildExpr(expr).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var u unstructured.Unstructured
		if err := json.Unmarshal(raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		decode := func(into any) {
			if err := json.Unmarshal(raw, into); err != nil {
				t.Fatalf("%s: %v", u.GetName(), err)
			}
		}
		switch u.GetKind() {
		case Kind:
			p, err := FromUnstructured(&u)
			if err != nil {
				t.Fatal(err)
			}
			p.UID = k8stypes.UID("uid-" + p.Namespace + "-" + p.Name)
			sc.pools = append(sc.pools, p)
		case "DeviceClass":
			c := &resourcev1.DeviceClass{}
			decode(c)
			sc.classes = append(sc.classes, c)
		case "ResourceClaim":
			c := &resourcev1.ResourceClaim{}
			decode(c)
			c.UID = k8stypes.UID("uid-" + c.Namespace + "-" + c.Name)
			defaultClaim(c)
			sc.claims = append(sc.claims, c)
		}
	}
	return sc
}

// defaultClaim applies the API server's defaults that the allocator relies on.
func defaultClaim(c *resourcev1.ResourceClaim) {
	mode := func(m *resourcev1.DeviceAllocationMode, count *int64) {
		if *m == "" {
			*m = resourcev1.DeviceAllocationModeExactCount
		}
		if *m == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
	}
	for i := range c.Spec.Devices.Requests {
		r := &c.Spec.Devices.Requests[i]
		if r.Exactly != nil {
			mode(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			mode(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
		}
	}
}

// allocateAll allocates claims in order with DRAForge's allocator (drivers/allocator: the
// scheduler's structured allocator with kube-scheduler's default features, trying nodes by name
// and accounting devices, consumed capacity and counters of earlier allocations) and returns
// namespace/claim -> outcome in the "# outcome:" format.
func allocateAll(t *testing.T, pools []*Pool, classes []*resourcev1.DeviceClass, claims []*resourcev1.ResourceClaim) map[string]string {
	t.Helper()
	nodes := testNodes()
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	alloc := allocator.New(allocator.Options{})
	for _, n := range nodes {
		alloc.UpsertNode(n)
	}
	for _, c := range classes {
		alloc.UpsertClass(c)
	}
	seenPools, seenSlices := map[string]string{}, map[string]bool{}
	for _, p := range pools {
		if errs := p.Validate(); errs != nil {
			t.Fatalf("%s: %v", p.Name, errs)
		}
		s, err := DesiredSlices(p, nodes)
		if err != nil {
			t.Fatal(err)
		}
		for _, sl := range s {
			checkSliceValid(t, sl)
			sl.Spec.Pool.Generation = 1 // the publisher's job
			key := sl.Spec.Driver + "/" + sl.Spec.Pool.Name
			if owner, ok := seenPools[key]; ok && owner != p.Namespace+"/"+p.Name {
				t.Errorf("pool %s published by both %s and %s/%s", key, owner, p.Namespace, p.Name)
			}
			seenPools[key] = p.Namespace + "/" + p.Name
			if seenSlices[sl.Name] {
				t.Errorf("slice name %s used twice", sl.Name)
			}
			seenSlices[sl.Name] = true
			alloc.UpsertSlice(compactslice.From(sl))
		}
	}
	out := map[string]string{}
	for _, claim := range claims {
		key := claim.Namespace + "/" + claim.Name
		res, err := alloc.Allocate(context.Background(), claim)
		var unsat *allocator.Unsatisfiable
		switch {
		case errors.As(err, &unsat):
			out[key] = "pending"
			continue
		case err != nil:
			t.Fatalf("claim %s: %v", key, err)
		}
		node := res.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0]
		var devs []string
		for _, r := range res.Devices.Results {
			devs = append(devs, r.Device)
		}
		out[key] = "allocated " + node + " " + strings.Join(devs, ",")
	}
	return out
}

// matches compares an allocation with a "# outcome:" line: "pending", "allocated <node>" or
// "allocated <node> <device>" (the device is one of those allocated); <node> may list
// alternatives as node-a|node-b.
func matches(got, want string) bool {
	if want == "pending" || got == "pending" {
		return got == want
	}
	g, w := strings.Fields(got), strings.Fields(want)
	if len(w) < 2 || len(g) < 3 || !slices.Contains(strings.Split(w[1], "|"), g[1]) {
		return false
	}
	return len(w) < 3 || slices.Contains(strings.Split(g[2], ","), w[2])
}

// TestScenarioOutcomes runs every example scenario through DesiredSlices and the real DRA
// allocator and checks the "# outcome:" lines of its header, first per file and then with
// all files applied together (they must not share pools or steal each other's devices).
func TestScenarioOutcomes(t *testing.T) {
	files, _ := filepath.Glob("../../examples/scenarios/*.yaml")
	if len(files) < 9 {
		t.Fatalf("want >= 9 scenarios, found %d", len(files))
	}
	var pools []*Pool
	var classes []*resourcev1.DeviceClass
	var claims []*resourcev1.ResourceClaim
	want := map[string]string{}
	for _, f := range files {
		sc := loadScenario(t, f)
		t.Run(sc.file, func(t *testing.T) {
			if len(sc.outcomes) == 0 && len(sc.claims) == 0 {
				t.Skip("workload outcomes only (checked by e2e TestScenarios)")
			}
			if len(sc.outcomes) != len(sc.claims) {
				t.Fatalf("every claim needs an '# outcome:' line (%d outcomes, %d claims)", len(sc.outcomes), len(sc.claims))
			}
			got := allocateAll(t, sc.pools, sc.classes, sc.claims)
			for claim, w := range sc.outcomes {
				claim = sc.claims[0].Namespace + "/" + claim
				if !matches(got[claim], w) {
					t.Errorf("claim %s: got %q, want %q", claim, got[claim], w)
				}
			}
		})
		pools, classes, claims = append(pools, sc.pools...), append(classes, sc.classes...), append(claims, sc.claims...)
		for c, w := range sc.outcomes {
			want[sc.claims[0].Namespace+"/"+c] = w
		}
	}
	t.Run("all-together", func(t *testing.T) {
		got := allocateAll(t, pools, classes, claims)
		for claim, w := range want {
			if !matches(got[claim], w) {
				t.Errorf("%s: got %q, want %q", claim, got[claim], w)
			}
		}
	})
}

// branchOutcomes allocates the scenario's claims in order, as TestScenarios applies them, on
// every node a claim fits at its turn, and returns per namespace/claim every outcome of every
// branch: the nodes it was allocated on (with the devices of each) and whether it stayed
// pending in some branch. kube-scheduler picks among the feasible nodes by score (the load of
// the nodes, other pods), so an example's outcome line must name every node of its claim.
func branchOutcomes(t *testing.T, sc *scenario) (nodes map[string]map[string][]string, pending map[string]bool) {
	t.Helper()
	all := testNodes()
	var sl []*resourcev1.ResourceSlice
	for _, p := range sc.pools {
		s, err := DesiredSlices(p, all)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range s {
			x.Spec.Pool.Generation = 1
		}
		sl = append(sl, s...)
	}
	nodes, pending = map[string]map[string][]string{}, map[string]bool{}
	var walk func(i int, done []*resourcev1.ResourceClaim)
	walk = func(i int, done []*resourcev1.ResourceClaim) {
		if i == len(sc.claims) {
			return
		}
		claim := sc.claims[i]
		key := claim.Namespace + "/" + claim.Name
		fits := false
		for _, n := range all {
			alloc := allocator.New(allocator.Options{})
			alloc.UpsertNode(n)
			for _, c := range sc.classes {
				alloc.UpsertClass(c)
			}
			for _, s := range sl {
				alloc.UpsertSlice(compactslice.From(s))
			}
			for _, c := range done {
				alloc.UpsertClaim(c)
			}
			res, err := alloc.Allocate(context.Background(), claim)
			var unsat *allocator.Unsatisfiable
			if errors.As(err, &unsat) {
				continue
			}
			if err != nil {
				t.Fatalf("claim %s: %v", key, err)
			}
			fits = true
			var devs []string
			for _, r := range res.Devices.Results {
				devs = append(devs, r.Device)
			}
			if nodes[key] == nil {
				nodes[key] = map[string][]string{}
			}
			nodes[key][n.Name] = append(nodes[key][n.Name], strings.Join(devs, ","))
			c := claim.DeepCopy()
			c.Status.Allocation = res
			walk(i+1, append(slices.Clone(done), c))
		}
		if !fits {
			pending[key] = true
			walk(i+1, done)
		}
	}
	walk(0, nil)
	return nodes, pending
}

// TestScenarioOutcomesNameEveryFeasibleNode: with --allocator kube-scheduler (the default)
// kube-scheduler decides standalone claims too, choosing among the nodes a claim fits by score,
// so each "# outcome:" line names exactly the nodes its claim can get at its turn, whatever the
// earlier claims got, and a device only when every such allocation includes it.
func TestScenarioOutcomesNameEveryFeasibleNode(t *testing.T) {
	files, _ := filepath.Glob("../../examples/scenarios/*.yaml")
	for _, f := range files {
		sc := loadScenario(t, f)
		if len(sc.claims) == 0 {
			continue
		}
		t.Run(sc.file, func(t *testing.T) {
			nodes, pending := branchOutcomes(t, sc)
			for _, claim := range sc.claims {
				key := claim.Namespace + "/" + claim.Name
				w := strings.Fields(sc.outcomes[claim.Name])
				switch {
				case pending[key] && nodes[key] != nil:
					t.Errorf("claim %s: pending or allocated depending on the node of an earlier claim (%v)", key, nodes[key])
					continue
				case pending[key]:
					if len(w) != 1 || w[0] != "pending" {
						t.Errorf("claim %s: never fits, outcome says %q", key, sc.outcomes[claim.Name])
					}
					continue
				}
				var feasible []string
				for n := range nodes[key] {
					feasible = append(feasible, n)
				}
				slices.Sort(feasible)
				if len(w) < 2 || w[0] != "allocated" {
					t.Errorf("claim %s: fits on %v, outcome says %q", key, feasible, sc.outcomes[claim.Name])
					continue
				}
				listed := strings.Split(w[1], "|")
				slices.Sort(listed)
				if !slices.Equal(listed, feasible) {
					t.Errorf("claim %s: outcome names %s, kube-scheduler may pick any of %s", key, w[1], strings.Join(feasible, "|"))
				}
				if len(w) > 2 {
					for n, allocs := range nodes[key] {
						for _, devs := range allocs {
							if !slices.Contains(strings.Split(devs, ","), w[2]) {
								t.Errorf("claim %s: outcome names device %s, an allocation on %s holds %s", key, w[2], n, devs)
							}
						}
					}
				}
			}
		})
	}
}
