package engine

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/util/workqueue"

	"github.com/draforge/draforge/engine/machine"
)

type terminalCounter struct {
	nopObserver
	n int
}

func (c *terminalCounter) Terminal(string, machine.ErrorClass) { c.n++ }

// TestNotFoundOfGoneObjectIsNotTerminal: a pass that ends in NotFound because its object was
// deleted meanwhile (the cache was behind) is over, not a terminal error; a NotFound while the
// object still exists (say, a missing object an action needs) stays terminal.
func TestNotFoundOfGoneObjectIsNotTerminal(t *testing.T) {
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	node := func(uid string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": "n1", "uid": uid}}}
	}
	notFound := Step{Outcome: Terminal, Class: machine.NotFound, From: "ready",
		Err: apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "n1")}
	for _, tc := range []struct {
		name     string
		server   []runtime.Object // what the API server holds
		class    machine.ErrorClass
		terminal bool
	}{
		{"deleted during the pass", nil, machine.NotFound, false},
		{"re-created under the same name", []runtime.Object{node("u2")}, machine.NotFound, false},
		{"still there", []runtime.Object{node("u1")}, machine.NotFound, true},
		{"another terminal class", nil, machine.Forbidden, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRunner(t, renewMachine, NewRegistry(), time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC))
			obs := &terminalCounter{}
			r.e.o.Observer = obs
			r.e.o.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{nodes: "NodeList"}, tc.server...)
			r.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
			defer r.queue.ShutDown()
			st := notFound
			st.Class = tc.class
			r.handle(context.Background(), "n1", st, node("u1"))
			_, marked := r.terminal.Load("n1")
			if (obs.n == 1) != tc.terminal || marked != tc.terminal {
				t.Errorf("terminal errors counted %d, marked %v; want terminal %v", obs.n, marked, tc.terminal)
			}
		})
	}
}
