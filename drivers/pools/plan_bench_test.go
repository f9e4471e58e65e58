package pools

import (
	"fmt"
	"testing"
)

// BenchmarkFirstPlan is a new pool's first pass over 1,000 nodes x 8 devices: the work between
// the pool's watch event and the first slice create (`benchreport -only scale-publish` showed
// 0.16-0.22 s there at 1,000 nodes and 0.74 s at 5,000).
func BenchmarkFirstPlan(b *testing.B) {
	d := cachedDriver(&testing.T{})
	for i := range 1000 {
		if err := d.nodes.GetStore().Add(labelledNode(fmt.Sprintf("node-%04d", i), "a")); err != nil {
			b.Fatal(err)
		}
	}
	pool := selectorPool(1)
	pool.Object["spec"].(map[string]any)["deviceCount"] = int64(8)
	b.ReportAllocs()
	for b.Loop() {
		p, err := d.makePlan(pool)
		if err != nil || len(p.Create) != 1000 {
			b.Fatalf("plan: %v, %d creates", err, len(p.Create))
		}
	}
}
