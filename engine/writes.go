package engine

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Writes is the process's one memory of its own writes that the informers' caches have not
// shown yet: per object, the resourceVersion a write returned (0 for a delete). A pass that
// decided on an older cached object would repeat the write, so the machines (their status and
// object writes) and the drivers (the slices a pool publishes) ask Lags before deciding. Like
// client-go's MutationCache it compares resourceVersions as integers, as kube-apiserver with
// etcd issues them; a version that is not a number is never waited for.
type Writes struct {
	mu sync.Mutex
	m  map[writeKey]written
}

type writeKey struct {
	gvr schema.GroupVersionResource
	key string
}

type written struct {
	rv uint64
	// by groups writes for LaggingBy (a pool's UID: the slices one pool's passes wrote).
	by string
	// The rest is for writes of objects other passes watch (echoes.go).
	echo
}

// Wrote records a write of the object with key (cache key: "namespace/name" or name) of gvr
// that returned rv; rv "" records a delete. by tags the write for LaggingBy ("" for none).
func (w *Writes) Wrote(gvr schema.GroupVersionResource, key, rv, by string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if rv != "" && err != nil {
		return // not a number: cannot compare, do not wait
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[writeKey]written{}
	}
	w.m[writeKey{gvr, key}] = written{rv: v, by: by}
}

// Lags reports whether cached (nil when the cache has no such object) is older than our last
// write of it. Once the cache has caught up, the write is forgotten.
func (w *Writes) Lags(gvr schema.GroupVersionResource, key string, cached any) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := writeKey{gvr, key}
	e, ok := w.m[k]
	if !ok || (e.writing && e.rv == 0) {
		return false // nothing written yet
	}
	var caught bool
	switch {
	case cached == nil:
		caught = e.rv == 0
	case e.rv == 0:
		caught = false // deleted, still cached
	default:
		caught = true
		if m, err := meta.Accessor(unwrap(cached)); err == nil {
			have, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
			caught = err != nil || have >= e.rv
		}
	}
	if caught && e.obj == nil && !e.writing {
		// A written object (echoes.go) is forgotten by its echo, which the informer hands
		// its watchers after its cache shows it.
		delete(w.m, k)
	}
	return !caught
}

// LaggingBy returns the key of an object written with tag by that the cache, read through get,
// has not caught up with.
func (w *Writes) LaggingBy(gvr schema.GroupVersionResource, by string, get func(key string) any) (string, bool) {
	w.mu.Lock()
	var keys []string
	for k, e := range w.m {
		if k.gvr == gvr && e.by == by {
			keys = append(keys, k.key)
		}
	}
	w.mu.Unlock()
	for _, key := range keys {
		if w.Lags(gvr, key, get(key)) {
			return key, true
		}
	}
	return "", false
}

// Forget drops the memory of a write of key (the object is gone from the machine's view).
func (w *Writes) Forget(gvr schema.GroupVersionResource, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, writeKey{gvr, key})
}
