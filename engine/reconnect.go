package engine

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// reconnectInterval is how often an informer's list or watch is retried while the API server
// cannot be reached.
const reconnectInterval = time.Second

// reconnecting wraps the informers' dynamic client so that a list or watch that cannot reach
// the API server (connection refused or reset) is retried every reconnectInterval inside the
// call, until it gets through or the informer stops. client-go's reflector therefore never sees
// the outage: it would back off exponentially, up to 30 s between attempts, and notice the
// server's return only that much later. Errors the server answers with are returned as they are.
type reconnecting struct {
	dynamic.Interface
}

// IsWatchListSemanticsUnSupported passes on what the wrapped client tells client-go's
// reflector (fake clients do not support watch-list).
func (c reconnecting) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

func (c reconnecting) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return reconnectingResource{c.Interface.Resource(gvr)}
}

type reconnectingResource struct {
	dynamic.NamespaceableResourceInterface
}

func (r reconnectingResource) Namespace(ns string) dynamic.ResourceInterface {
	return reconnectingNamespaced{r.NamespaceableResourceInterface.Namespace(ns)}
}

func (r reconnectingResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return list(ctx, r.NamespaceableResourceInterface, opts)
}

func (r reconnectingResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return watchFor(ctx, r.NamespaceableResourceInterface, opts)
}

type reconnectingNamespaced struct {
	dynamic.ResourceInterface
}

func (r reconnectingNamespaced) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return list(ctx, r.ResourceInterface, opts)
}

func (r reconnectingNamespaced) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return watchFor(ctx, r.ResourceInterface, opts)
}

func list(ctx context.Context, r dynamic.ResourceInterface, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return untilReachable(ctx, func() (*unstructured.UnstructuredList, error) { return r.List(ctx, opts) })
}

func watchFor(ctx context.Context, r dynamic.ResourceInterface, opts metav1.ListOptions) (watch.Interface, error) {
	return untilReachable(ctx, func() (watch.Interface, error) { return r.Watch(ctx, opts) })
}

func untilReachable[T any](ctx context.Context, call func() (T, error)) (T, error) {
	for {
		v, err := call()
		if err == nil || !unreachable(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(reconnectInterval):
		}
	}
}

// reconnectingLW is reconnecting for a typed client's ListerWatcher (see Informers.ListTyped).
type reconnectingLW struct {
	lw cache.ListerWatcher
}

func (r reconnectingLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return r.ListWithContext(context.Background(), opts)
}

func (r reconnectingLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return r.WatchWithContext(context.Background(), opts)
}

func (r reconnectingLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	lw := cache.ToListerWatcherWithContext(r.lw)
	return untilReachable(ctx, func() (runtime.Object, error) { return lw.ListWithContext(ctx, opts) })
}

func (r reconnectingLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	lw := cache.ToListerWatcherWithContext(r.lw)
	return untilReachable(ctx, func() (watch.Interface, error) { return lw.WatchWithContext(ctx, opts) })
}

// IsWatchListSemanticsUnSupported passes on what the wrapped ListerWatcher tells client-go's
// reflector.
func (r reconnectingLW) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(r.lw)
}

// unreachable reports errors of a connection that failed before the server answered.
func unreachable(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}
