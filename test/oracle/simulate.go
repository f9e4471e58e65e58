package oracle

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/compactslice"
)

// Verdict is one decider's answer for one (claim, template) pair.
type Verdict struct {
	Fits bool
	// Undecided: kube-scheduler said nothing about the pair within the deadline, so the pair
	// proves nothing either way.
	Undecided bool
	// Why is the decider's own words: the simulator's node summary, the scheduler's
	// PodScheduled message.
	Why string
}

// Simulate decides every case with the simulator: one allocator per world (built with opts)
// fed the world's nodes, slices, classes and DeviceTaintRules, and per claim the structured
// allocator run on each node alone (allocator.Explain's per-node verdicts, the same allocateOn
// that Allocate uses). The result is indexed like cases, then like the world's templates.
func Simulate(ctx context.Context, cases []Case, opts allocator.Options) [][]Verdict {
	allocs := map[*World]*allocator.Allocator{}
	out := make([][]Verdict, len(cases))
	for i, c := range cases {
		a, ok := allocs[c.World]
		if !ok {
			a = allocator.New(opts)
			for _, cl := range c.World.Classes {
				a.UpsertClass(cl)
			}
			for _, r := range c.World.Rules {
				a.UpsertTaintRule(r)
			}
			for _, t := range c.World.Templates {
				a.UpsertNode(t.Node)
				for _, s := range t.Slices {
					a.UpsertSlice(compactslice.From(s))
				}
				if len(t.Allocated) > 0 {
					a.UpsertClaim(BusyClaim(t.Node.Name, t.Node.Name, t.Allocated, func(pool string) string { return pool }))
				}
			}
			allocs[c.World] = a
		}
		claim := c.Claim.DeepCopy()
		claim.Namespace, claim.UID = "oracle", types.UID("oracle-"+c.ID)
		ex := a.Explain(ctx, claim)
		byNode := map[string]Verdict{}
		for _, n := range ex.Nodes {
			byNode[n.Node] = Verdict{Fits: n.Fits, Why: n.Summary}
		}
		out[i] = make([]Verdict, len(c.World.Templates))
		for j, t := range c.World.Templates {
			v, ok := byNode[t.Node.Name]
			if !ok {
				v = Verdict{Why: ex.Summary}
			}
			out[i][j] = v
		}
	}
	return out
}

// BusyClaim is an allocated claim holding a template's Allocated devices on node, with pool
// names mapped by pool (the cluster copy renames pools per node).
func BusyClaim(name, node string, results []resourcev1.DeviceRequestAllocationResult, pool func(string) string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "busy-" + name, Namespace: "oracle", UID: types.UID("busy-" + name)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "any-gpu", AllocationMode: resourcev1.DeviceAllocationModeAll}}}}},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}},
	}
	for _, r := range results {
		r = *r.DeepCopy()
		r.Pool = pool(r.Pool)
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	return c
}

// Mutations are the simulator broken on purpose, each in one thing kube-scheduler checks: the
// oracle must see every one of them disagree, or it proves nothing about that thing.
func Mutations() map[string]allocator.Options {
	noTaints := allocator.DefaultFeatures
	noTaints.DeviceTaints = false
	noCounters := allocator.DefaultFeatures
	noCounters.PartitionableDevices = false
	return map[string]allocator.Options{
		// Device taints (in slices and from DeviceTaintRules) ignored.
		"taints ignored": {Features: &noTaints, IgnoreDeviceTaintRules: true},
		// Devices that consume counters (MIG partitions, shared counter sets) unknown.
		"counters unknown": {Features: &noCounters},
	}
}

// disagreements counts the cases whose feasible nodes differ between sim and sched (pairs
// kube-scheduler did not decide left out), calling report for each.
func disagreements(cases []Case, sim, sched [][]Verdict, report func(c Case, i int)) int {
	n := 0
	for i, c := range cases {
		for j := range c.World.Templates {
			if !sched[i][j].Undecided && sim[i][j].Fits != sched[i][j].Fits {
				n++
				report(c, i)
				break
			}
		}
	}
	return n
}
