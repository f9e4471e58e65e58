package engine

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/engine/machine"
)

// notServing answers every request for a resource of group resource.k8s.io with 404, as an API
// server that does not serve it does (DeviceTaintRules before Kubernetes 1.37).
func notServing(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/apis/resource.k8s.io/") {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
		return
	}
	http.Error(w, "unexpected", http.StatusInternalServerError)
}

// notServingClient is a client of a server that serves no resource.k8s.io resource.
func notServingClient(t *testing.T) dynamic.Interface {
	t.Helper()
	addr := freeAddr(t)
	serveAt(t, addr, notServing)
	c, err := dynamic.NewForConfig(&rest.Config{Host: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refusingClient is a client of a server that answers every request with one API status
// (reason and code), as one without a resource (404) or without the rule to read it (403).
func refusingClient(t *testing.T, reason string, code int) dynamic.Interface {
	t.Helper()
	addr := freeAddr(t)
	serveAt(t, addr, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code), code)
	})
	c, err := dynamic.NewForConfig(&rest.Config{Host: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOptionalResourceNotServedSyncsEmpty(t *testing.T) {
	c := notServingClient(t)
	rules := schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"}
	inf := NewInformers(c)
	var missing atomic.Int32
	inf.Optional(rules, func(error) { missing.Add(1) })
	var events atomic.Int32
	inf.Notify(rules, cache.ResourceEventHandlerFuncs{AddFunc: func(any) { events.Add(1) }})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := inf.Start(ctx); err != nil {
		t.Fatalf("an optional resource the server does not serve must sync empty: %v", err)
	}
	if !inf.Synced() || inf.Count() != 0 || events.Load() != 0 {
		t.Errorf("synced %v, %d objects, %d events", inf.Synced(), inf.Count(), events.Load())
	}
	time.Sleep(200 * time.Millisecond) // the watch has been made by now
	if n := missing.Load(); n != 1 {
		t.Errorf("onMissing ran %d times, want once", n)
	}
}

// A 403 (a kubeconfig or chart without the rule) reads as none too, and Missing says which.
func TestOptionalResourceForbiddenSyncsEmpty(t *testing.T) {
	c := refusingClient(t, "Forbidden", http.StatusForbidden)
	groups := schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}
	inf := NewInformers(c)
	var got atomic.Value
	inf.Optional(groups, func(err error) { got.Store(err) })
	inf.For(groups)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := inf.Start(ctx); err != nil {
		t.Fatalf("an optional resource the caller may not read must sync empty: %v", err)
	}
	if err := inf.Missing(groups); !apierrors.IsForbidden(err) {
		t.Errorf("Missing = %v, want the 403", err)
	}
	if err, _ := got.Load().(error); !apierrors.IsForbidden(err) {
		t.Errorf("onMissing got %v", err)
	}
}

// TestRequiredResourceNotServedNeverSyncs: without Optional the 404 is an error the informer
// retries, so the caches never sync (what Optional exists to avoid).
func TestRequiredResourceNotServedNeverSyncs(t *testing.T) {
	c := notServingClient(t)
	inf := NewInformers(c)
	inf.For(schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := inf.Start(ctx); err == nil {
		t.Fatal("a required resource the server does not serve synced")
	}
}

func TestEmptyWatchEndsInitialEventsAndCloses(t *testing.T) {
	yes := true
	w := emptyWatch(metav1.ListOptions{SendInitialEvents: &yes}, 50*time.Millisecond)
	ev, ok := <-w.ResultChan()
	if !ok || ev.Type != "BOOKMARK" {
		t.Fatalf("first event %v %v, want the bookmark ending the initial events", ev, ok)
	}
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Fatal("an empty watch sent an event")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the empty watch did not end after its recheck time")
	}
	w.Stop()
	w.Stop() // idempotent
}

// optionalMachine is a machine over a CRD the test server does not serve.
const optionalMachine = `package machines

machine: domain: {
	resource: {group: "resource.nvidia.com", version: "v1beta1", resource: "computedomains"}
	namespaced: true
	%s
	states: {
		running: {}
		failed: terminal: true
	}
	initial: "running"
	terminalState: "failed"
}
`

// TestOptionalMachineSyncsWithoutItsCRD: a machine marked optional over a resource the API
// server does not serve (NVIDIA's ComputeDomain CRD not installed) leaves the informers synced
// and empty, so a process running it (serve, the controller) gets ready; the same machine not
// marked optional keeps them unsynced.
func TestOptionalMachineSyncsWithoutItsCRD(t *testing.T) {
	c := refusingClient(t, "NotFound", http.StatusNotFound)
	for _, tc := range []struct {
		field string
		sync  bool
	}{{"optional: true", true}, {"", false}} {
		ms, err := machine.Load(fstest.MapFS{"m.cue": {Data: []byte(fmt.Sprintf(optionalMachine, tc.field))}}, machine.Names{})
		if err != nil {
			t.Fatal(err)
		}
		if ms[0].Optional != tc.sync {
			t.Fatalf("%q: loaded Optional %v", tc.field, ms[0].Optional)
		}
		inf := NewInformers(c)
		if _, err := NewReader(inf, ms); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		err = inf.Start(ctx)
		cancel()
		if synced := err == nil && inf.Synced(); synced != tc.sync {
			t.Errorf("%q: synced %v (%v), want %v", tc.field, synced, err, tc.sync)
		}
	}
}
