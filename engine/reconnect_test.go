package engine

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// serveAt serves handler on addr from now until the test ends.
func serveAt(t *testing.T, addr string, handler http.HandlerFunc) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func clientFor(t *testing.T, addr string) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(&rest.Config{Host: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return reconnecting{c}
}

func podList(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]}`))
}

// TestListWaitsForTheServer: a list made while nothing listens returns once the server is up,
// as do namespaced lists.
func TestListWaitsForTheServer(t *testing.T) {
	addr := freeAddr(t)
	c := clientFor(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		rv  string
		err error
	}
	done := make(chan result, 2)
	for _, ns := range []string{"", "ns"} {
		go func() {
			l, err := c.Resource(podsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				done <- result{err: err}
				return
			}
			done <- result{rv: l.GetResourceVersion()}
		}()
	}
	select {
	case r := <-done:
		t.Fatalf("list returned before the server was up: %+v", r)
	case <-time.After(2 * reconnectInterval):
	}
	serveAt(t, addr, podList)
	for range 2 {
		if r := <-done; r.err != nil || r.rv != "7" {
			t.Fatalf("list after the server came up: %+v", r)
		}
	}
}

// TestServerErrorsAreNotRetried: an answer from the server, even an error, is returned at once.
func TestServerErrorsAreNotRetried(t *testing.T) {
	addr := freeAddr(t)
	serveAt(t, addr, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"Forbidden","code":403}`))
	})
	start := time.Now()
	_, err := clientFor(t, addr).Resource(podsGVR).List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || time.Since(start) > reconnectInterval {
		t.Fatalf("got %v after %s, want Forbidden at once", err, time.Since(start))
	}
	_, err = clientFor(t, addr).Resource(podsGVR).Watch(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("watch: got %v, want Forbidden", err)
	}
}

// TestWaitEndsWithTheContext: an informer that stops is not kept waiting.
func TestWaitEndsWithTheContext(t *testing.T) {
	c := clientFor(t, freeAddr(t))
	ctx, cancel := context.WithTimeout(context.Background(), reconnectInterval/2)
	defer cancel()
	start := time.Now()
	if _, err := c.Resource(podsGVR).Watch(ctx, metav1.ListOptions{}); err == nil || !unreachable(err) {
		t.Fatalf("got %v, want the connection error", err)
	}
	if time.Since(start) > 2*reconnectInterval {
		t.Fatalf("returned after %s", time.Since(start))
	}
}
