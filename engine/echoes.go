package engine

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A pass that writes an object its machine watches as a related object (the node machine
// renewing a Lease) decides on what it wrote at once (runner.decideAgain), so the
// write's echo from the informer is no news to its watcher: Writes remembers such a write
// until the echo, to tell it apart from other changes. The watch may deliver the echo before
// the write's answer: events that arrive while a write is under way are held until the
// answer says whether they were its echo.

// echo is what Writes keeps of a write of a watched object.
type echo struct {
	// obj is the object as the write left it, handed to passes while the cache lags (Object).
	obj map[string]any
	// writing: the write is under way; events meanwhile are held in heard (0: a delete).
	writing bool
	heard   []uint64
	// passOn: the write's echo is news after all: an event older than the write arrived after
	// it (the echo is not the state the writer saw), or the pass that wrote did not finish.
	passOn bool
}

// Writing announces a write of key by the watcher by (a machine's name). An earlier write the
// cache has not shown yet still counts for Lags meanwhile.
func (w *Writes) Writing(gvr schema.GroupVersionResource, key, by string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[writeKey]written{}
	}
	k := writeKey{gvr, key}
	w.m[k] = written{rv: w.m[k].rv, by: by, echo: echo{writing: true}}
}

// WroteObject ends the write Writing announced: it left obj at rv. Object hands obj out while
// the cache lags, Echo tells its echo from other changes. news reports events held meanwhile
// that were not its echo: the caller tells their watchers.
func (w *Writes) WroteObject(gvr schema.GroupVersionResource, key, rv, by string, obj map[string]any) (news bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := writeKey{gvr, key}
	held := w.m[k].heard
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		delete(w.m, k)
		return len(held) > 0 // cannot compare: nothing is an echo
	}
	echoed := false
	for _, h := range held {
		if h == v && !echoed {
			echoed = true
		} else {
			news = true
		}
	}
	if w.m == nil {
		w.m = map[writeKey]written{}
	}
	w.m[k] = written{rv: v, by: by, echo: echo{obj: obj, passOn: news}}
	return news
}

// NotWritten ends a write Writing announced that failed; news reports events held meanwhile.
func (w *Writes) NotWritten(gvr schema.GroupVersionResource, key string) (news bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := writeKey{gvr, key}
	e, ok := w.m[k]
	if !ok || !e.writing {
		return false
	}
	delete(w.m, k)
	return len(e.heard) > 0
}

// Object returns the object as our last write left it while cached (nil when the cache has
// no such object) is older than that write.
func (w *Writes) Object(gvr schema.GroupVersionResource, key string, cached any) (map[string]any, bool) {
	if !w.Lags(gvr, key, cached) {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.m[writeKey{gvr, key}]
	return e.obj, e.obj != nil
}

// Echo reports whether an informer event showing cur (nil for a delete) is no news to the
// watcher by: the echo of its own last write with nothing else in between, whose pass decided
// on that state already, or an event held while its write is under way (WroteObject and
// NotWritten report it if it was news). An event at or past the write ends the memory of it;
// an older one arriving after the write makes the echo news. Other watchers' events are
// always news.
func (w *Writes) Echo(gvr schema.GroupVersionResource, key, by string, cur any) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := writeKey{gvr, key}
	e, ok := w.m[k]
	if !ok || e.by != by || (e.obj == nil && !e.writing) {
		return false
	}
	var have uint64
	if cur != nil {
		if m, err := meta.Accessor(unwrap(cur)); err == nil {
			have, _ = strconv.ParseUint(m.GetResourceVersion(), 10, 64)
		}
	}
	switch {
	case e.writing:
		e.heard = append(e.heard, have)
		w.m[k] = e
		return true
	case cur != nil && have < e.rv:
		e.passOn = true
		w.m[k] = e
		return false
	}
	delete(w.m, k)
	return cur != nil && have == e.rv && !e.passOn
}

// PassOnEcho makes Echo report the echo of our last write of key as news (its writer did not
// finish deciding on it).
func (w *Writes) PassOnEcho(gvr schema.GroupVersionResource, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := writeKey{gvr, key}
	if e, ok := w.m[k]; ok {
		e.passOn = true
		w.m[k] = e
	}
}
