package engine

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// passKey carries the values computed during one sync pass (see PassValue).
type passKey struct{}

type pass struct {
	mu     sync.Mutex
	values map[any]passResult
	// cached is the pass's object as the informer caches it (a typed object for a resource
	// cached typed), which PassCached hands out instead of converting it back.
	cached any
}

type passResult struct {
	value any
	err   error
}

func withPass(ctx context.Context, cached any) context.Context {
	return context.WithValue(ctx, passKey{}, &pass{values: map[any]passResult{}, cached: cached})
}

// PassCached returns the pass's object as the informer caches it when that is a *T (the pod
// machine's pods are cached typed): no conversion at all, where PassTyped would convert the
// unstructured form the machine reads back to T. The value is the cache's: callers must not
// change it. ok is false outside a pass or when the cache holds another type.
func PassCached[T any](ctx context.Context) (*T, bool) {
	p, ok := ctx.Value(passKey{}).(*pass)
	if !ok {
		return nil, false
	}
	t, ok := unwrap(p.cached).(*T)
	return t, ok && t != nil
}

// PassValue returns what compute returned the first time it was called for key during the
// current sync pass of one object. The observations and actions of a pass read the same
// object and caches, so a value several of them derive (the pool's publication plan) is
// computed once per pass instead of once per call. Outside a pass it just calls compute.
func PassValue[T any](ctx context.Context, key any, compute func() (T, error)) (T, error) {
	p, ok := ctx.Value(passKey{}).(*pass)
	if !ok {
		return compute()
	}
	p.mu.Lock()
	r, ok := p.values[key]
	p.mu.Unlock()
	if !ok {
		// Computed without the lock, so compute may itself use PassValue.
		r.value, r.err = compute()
		p.mu.Lock()
		if first, ok := p.values[key]; ok {
			r = first
		} else {
			p.values[key] = r
		}
		p.mu.Unlock()
	}
	v, _ := r.value.(T)
	return v, r.err
}

// passTypedKey is PassTyped's key for the pass object as a *T.
type passTypedKey[T any] struct{}

// PassTyped returns the pass's object as the API type T: the cache's own object when the cache
// holds a *T (PassCached), else converted once per pass for every observation and action of
// every driver that reads it. The value is shared: callers must not change it (DeepCopy
// first). ok is false when obj is not a T.
func PassTyped[T any](ctx context.Context, obj *unstructured.Unstructured) (*T, bool) {
	if t, ok := PassCached[T](ctx); ok {
		return t, true
	}
	t, _ := PassValue(ctx, passTypedKey[T]{}, func() (*T, error) {
		t, _ := Typed[T](obj)
		return t, nil
	})
	return t, t != nil
}
