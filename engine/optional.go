package engine

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/watchlist"
)

// optionalRecheck is how long the empty watch of a resource the API server does not serve
// lasts: then the informer lists again, and finds the resource if the server was upgraded.
const optionalRecheck = 5 * time.Minute

// optionalSet holds the resources an API server may not serve (DeviceTaintRules before
// Kubernetes 1.37, PodGroups without their API version) or may not let this process read (a
// kubeconfig or chart without the rule), and what to do the first time it refuses one.
type optionalSet struct {
	mu        sync.Mutex
	onMissing map[schema.GroupVersionResource]func(error)
	missing   map[schema.GroupVersionResource]error
}

func (s *optionalSet) isOptional(gvr schema.GroupVersionResource) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.onMissing[gvr]
	return ok
}

// refused reports whether err is the answer of an API server that does not serve the resource
// (404) or does not let the caller read it (403).
func refused(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err)
}

// notServed records the refusal and calls onMissing once per resource.
func (s *optionalSet) notServed(gvr schema.GroupVersionResource, err error) {
	s.mu.Lock()
	_, seen := s.missing[gvr]
	s.missing[gvr] = err
	fn := s.onMissing[gvr]
	s.mu.Unlock()
	if !seen && fn != nil {
		fn(err)
	}
}

// Optional marks gvr as a resource the API server may not serve or this process may not read.
// A 404 or 403 to its list or watch then reads as "no objects": the informer syncs empty (its
// handlers never fire) instead of retrying forever and keeping the process unready. onMissing
// (may be nil) runs the first time, with the API server's error. Call it before Start.
func (i *Informers) Optional(gvr schema.GroupVersionResource, onMissing func(error)) {
	i.optional.mu.Lock()
	defer i.optional.mu.Unlock()
	i.optional.onMissing[gvr] = onMissing
}

// Missing returns the API server's last refusal of an optional resource (a 404 or 403 error),
// nil when it was listed.
func (i *Informers) Missing(gvr schema.GroupVersionResource) error {
	i.optional.mu.Lock()
	defer i.optional.mu.Unlock()
	return i.optional.missing[gvr]
}

// optionalClient answers a 404 or 403 to an optional resource's list or watch with an empty
// result.
type optionalClient struct {
	dynamic.Interface
	set *optionalSet
}

// IsWatchListSemanticsUnSupported passes on what the wrapped client tells client-go's reflector.
func (c optionalClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

func (c optionalClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	r := c.Interface.Resource(gvr)
	if !c.set.isOptional(gvr) {
		return r
	}
	return optionalResource{NamespaceableResourceInterface: r, gvr: gvr, set: c.set}
}

type optionalResource struct {
	dynamic.NamespaceableResourceInterface
	gvr schema.GroupVersionResource
	set *optionalSet
}

// Namespace keeps the 404 handling: informers list and watch through Namespace (all namespaces
// is Namespace("")).
func (r optionalResource) Namespace(ns string) dynamic.ResourceInterface {
	return optionalNamespaced{ResourceInterface: r.NamespaceableResourceInterface.Namespace(ns), gvr: r.gvr, set: r.set}
}

func (r optionalResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return optionalList(ctx, r.NamespaceableResourceInterface, r.gvr, r.set, opts)
}

func (r optionalResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return optionalWatch(ctx, r.NamespaceableResourceInterface, r.gvr, r.set, opts)
}

type optionalNamespaced struct {
	dynamic.ResourceInterface
	gvr schema.GroupVersionResource
	set *optionalSet
}

func (r optionalNamespaced) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return optionalList(ctx, r.ResourceInterface, r.gvr, r.set, opts)
}

func (r optionalNamespaced) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return optionalWatch(ctx, r.ResourceInterface, r.gvr, r.set, opts)
}

func optionalList(ctx context.Context, r dynamic.ResourceInterface, gvr schema.GroupVersionResource, set *optionalSet, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	l, err := r.List(ctx, opts)
	if refused(err) {
		set.notServed(gvr, err)
		l, err = &unstructured.UnstructuredList{}, nil
		l.SetResourceVersion("0")
	}
	return l, err
}

func optionalWatch(ctx context.Context, r dynamic.ResourceInterface, gvr schema.GroupVersionResource, set *optionalSet, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.Watch(ctx, opts)
	if !refused(err) {
		return w, err
	}
	set.notServed(gvr, err)
	return emptyWatch(opts, optionalRecheck), nil
}

// emptyWatch sends nothing and ends after recheck. Asked for the initial events (a
// watch-list), it first sends the bookmark that ends them, as an API server does.
func emptyWatch(opts metav1.ListOptions, recheck time.Duration) watch.Interface {
	w := &emptyWatcher{ch: make(chan watch.Event, 1), stop: make(chan struct{})}
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		b := &unstructured.Unstructured{}
		b.SetResourceVersion("0")
		b.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		w.ch <- watch.Event{Type: watch.Bookmark, Object: b}
	}
	go func() {
		defer close(w.ch)
		t := time.NewTimer(recheck)
		defer t.Stop()
		select {
		case <-t.C:
		case <-w.stop:
		}
	}()
	return w
}

type emptyWatcher struct {
	ch   chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (w *emptyWatcher) ResultChan() <-chan watch.Event { return w.ch }
func (w *emptyWatcher) Stop()                          { w.once.Do(func() { close(w.stop) }) }
