package oracle

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/compactslice"
)

// Verdict is one decider's answer for one (claim, template) pair.
type Verdict struct {
	Fits bool
	// Why is the decider's own words: the simulator's node summary, the scheduler's
	// PodScheduled message.
	Why string
}

// Simulate decides every case with the simulator: one allocator per world fed the world's
// nodes, slices, classes and DeviceTaintRules, and per claim the structured allocator run on
// each node alone (allocator.Explain's per-node verdicts, the same allocateOn that Allocate
// uses). The result is indexed like cases, then like the world's templates.
func Simulate(ctx context.Context, cases []Case) [][]Verdict {
	allocs := map[*World]*allocator.Allocator{}
	out := make([][]Verdict, len(cases))
	for i, c := range cases {
		a, ok := allocs[c.World]
		if !ok {
			a = allocator.New(allocator.Options{})
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
