package claims

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// unreserveGrace is how long the controller leaves a deleted allocation pod's reservedFor
// entry to kube-controller-manager, whose resourceclaim controller drops it within moments of
// the pod's delete event when its informers are live. Writing at once raced that write and
// one of the two conflicted on every hand-off; after an API-server outage its pod informer
// may never see the short-lived pod, and the controller drops the entry once this has passed.
const unreserveGrace = 3 * time.Second

// goneSince remembers, per claim, when a pass first found its allocation pod gone while the
// claim still listed it. It is process memory on purpose: after a restart the wait starts
// again, which only delays a write that kube-controller-manager usually makes first.
type goneSince struct {
	mu    sync.Mutex
	first map[types.UID]time.Time
	now   func() time.Time
}

// goneForgotten is how old a record is dropped at: a claim deleted while a pass that timed it
// was running may have its record written back after the delete's forget.
const goneForgotten = time.Hour

// wait returns how much longer the claim's entry is left to kube-controller-manager: zero when
// the grace has passed since the first call for the claim.
func (g *goneSince) wait(claim types.UID) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if g.now != nil {
		now = g.now()
	}
	if g.first == nil {
		g.first = map[types.UID]time.Time{}
	}
	for uid, t := range g.first {
		if now.Sub(t) > goneForgotten {
			delete(g.first, uid)
		}
	}
	first, ok := g.first[claim]
	if !ok {
		g.first[claim], first = now, now
	}
	return max(0, unreserveGrace-now.Sub(first))
}

// forget drops the claim's record: its entry is gone, its pod is back, or the claim is deleted.
func (g *goneSince) forget(claim types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.first, claim)
}
