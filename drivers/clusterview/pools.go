package clusterview

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// Pools is the decoded SimulatedDevicePools by "<namespace>/<name>". A pool whose spec does
// not decode is absent: it publishes nothing, so no device of it can be allocated.
type Pools struct {
	mu    sync.RWMutex
	pools map[string]*simdevice.Pool
}

// NewPools returns an empty index; FeedPools keeps one up to date from the informers.
func NewPools() *Pools { return &Pools{pools: map[string]*simdevice.Pool{}} }

// FeedPools returns an index fed by inf's SimulatedDevicePool events. Feeds run before the
// machines are notified, so a pass triggered by a pool event sees the decoded pool.
func FeedPools(inf *engine.Informers) *Pools {
	p := NewPools()
	engine.Feed(inf, gvr.SimulatedDevicePools, p.Upsert, p.Delete)
	return p
}

// Upsert decodes and records a pool (or forgets it when its spec does not decode).
func (p *Pools) Upsert(u *unstructured.Unstructured) {
	key := u.GetNamespace() + "/" + u.GetName()
	pool, err := simdevice.FromUnstructured(u)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		delete(p.pools, key)
		return
	}
	p.pools[key] = pool
}

// Delete forgets a pool.
func (p *Pools) Delete(u *unstructured.Unstructured) {
	p.mu.Lock()
	delete(p.pools, u.GetNamespace()+"/"+u.GetName())
	p.mu.Unlock()
}

// Get returns the decoded pool "<namespace>/<name>"; callers must not change it.
func (p *Pools) Get(key string) (*simdevice.Pool, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	pool, ok := p.pools[key]
	return pool, ok
}

// List returns every decoded pool; callers must not change them.
func (p *Pools) List() []*simdevice.Pool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]*simdevice.Pool, 0, len(p.pools))
	for _, pool := range p.pools {
		out = append(out, pool)
	}
	return out
}
