package drivers

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/machines"
)

// enqueues counts keys added to each machine's queue (the engine reports the depth on every add).
type enqueues struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *enqueues) QueueDepth(m string, _ int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[m]++
}
func (e *enqueues) get(m string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[m]
}
func (*enqueues) SyncStarted(string)                        {}
func (*enqueues) SyncFinished(string, time.Duration, error) {}
func (*enqueues) Retry(string, machine.ErrorClass)          {}
func (*enqueues) Terminal(string, machine.ErrorClass)       {}
func (*enqueues) Transition(string, string, string, string) {}

// TestNodeHeartbeatsDoNotEnqueuePools runs the real pool machine over the drivers' real node
// cache (typed, status pruned): a Ready heartbeat on every node — what the node machine writes
// every 5 minutes per node — enqueues no pool, a label change enqueues every pool. The same
// machine without the trigger's fields filter, on the same informers, shows what the filter
// saves: one enqueue of every pool per node update.
func TestNodeHeartbeatsDoNotEnqueuePools(t *testing.T) {
	const nodes, pools = 200, 3
	var objs []runtime.Object
	for i := range nodes {
		n := &unstructured.Unstructured{}
		n.SetAPIVersion("v1")
		n.SetKind("Node")
		n.SetName(fmt.Sprintf("node-%d", i))
		n.SetLabels(map[string]string{"gpu": "a100"})
		_ = unstructured.SetNestedSlice(n.Object, []any{map[string]any{"type": "Ready", "status": "True",
			"lastHeartbeatTime": "2026-01-01T00:00:00Z"}}, "status", "conditions")
		objs = append(objs, n)
	}
	for i := range pools {
		p := &unstructured.Unstructured{}
		p.SetAPIVersion(gvr.SimulatedDevicePools.GroupVersion().String())
		p.SetKind("SimulatedDevicePool")
		p.SetNamespace("ns")
		p.SetName(fmt.Sprintf("pool-%d", i))
		objs = append(objs, p)
	}
	filtered, unfiltered, client := startFilteredAndUnfiltered(t, "pool", gvr.Nodes, func(tr machine.Trigger) bool {
		return len(tr.Fields) == 1 && tr.Fields[0].Text == "metadata.labels"
	}, objs...)
	ctx := t.Context()
	// Initial adds: each pool once for itself, and once per node delivered after the pools
	// were cached (the two informers list independently): count from where they settle.
	waitCount(t, filtered, pools)
	waitCount(t, unfiltered, pools)
	initial := settled(filtered)
	if u := settled(unfiltered); u != initial {
		t.Fatalf("initial enqueues: %d filtered, %d unfiltered", initial, u)
	}

	nodesClient := client.Resource(gvr.Nodes)
	for i := range nodes {
		n, err := nodesClient.Get(ctx, fmt.Sprintf("node-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedSlice(n.Object, []any{map[string]any{"type": "Ready", "status": "True",
			"lastHeartbeatTime": "2026-01-01T00:05:00Z"}}, "status", "conditions")
		if _, err := nodesClient.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The fake watch has a small buffer: let the informer take each event first.
		waitCount(t, unfiltered, initial+(i+1)*pools)
	}
	n, err := nodesClient.Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.SetLabels(map[string]string{"gpu": "h100"})
	if _, err := nodesClient.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Node events are delivered in order: once the unfiltered machine saw the label change,
	// every heartbeat came before it.
	waitCount(t, unfiltered, initial+(nodes+1)*pools)
	waitCount(t, filtered, initial+pools)
	time.Sleep(100 * time.Millisecond)
	if got := filtered.get("pool") - initial; got != pools {
		t.Errorf("filtered: %d pool enqueues for %d heartbeats and 1 label change, want %d (the label change only)", got, nodes, pools)
	}
	t.Logf("%d heartbeats + 1 label change: %d pool enqueues with fields [metadata.labels], %d without",
		nodes, filtered.get("pool")-initial, unfiltered.get("pool")-initial)
}

// startFilteredAndUnfiltered runs the drivers' real informers over objs with two copies of the
// default machine name: as shipped (its trigger on res must pass shipped) and with that
// trigger's fields filter removed. It returns what each enqueued and the client to change
// objects with; the informers stop with the test.
func startFilteredAndUnfiltered(t *testing.T, name string, res schema.GroupVersionResource, shipped func(machine.Trigger) bool, objs ...runtime.Object) (filtered, unfiltered *enqueues, client *dynamicfake.FakeDynamicClient) {
	t.Helper()
	client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvr.SimulatedDevicePools: "SimulatedDevicePoolList", gvr.ResourceSlices: "ResourceSliceList", gvr.DeviceClasses: "DeviceClassList",
		gvr.ResourceClaims: "ResourceClaimList", gvr.Nodes: "NodeList", gvr.Pods: "PodList",
		gvr.CustomResourceDefinitions: "CustomResourceDefinitionList", gvr.Leases: "LeaseList", gvr.DeviceTaintRules: "DeviceTaintRuleList",
		gvr.ComputeDomains: "ComputeDomainList",
	}, objs...)
	inf := engine.NewInformers(client)
	reg := engine.NewRegistry()
	if _, err := Register(reg, Deps{Dynamic: client, Informers: inf, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	only := func(unfiltered bool) []*machine.Machine {
		ms, err := machines.Load(reg.Names())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Name != name {
				continue
			}
			for i, tr := range m.Triggers {
				if tr.Resource == res {
					if !shipped(tr) {
						t.Fatalf("%s trigger on %s: %+v", name, res.Resource, tr)
					}
					if unfiltered {
						m.Triggers[i].Fields = nil
					}
				}
			}
			return []*machine.Machine{m}
		}
		t.Fatalf("no %s machine", name)
		return nil
	}
	filtered, unfiltered = &enqueues{n: map[string]int{}}, &enqueues{n: map[string]int{}}
	for _, e := range []struct {
		obs *enqueues
		ms  []*machine.Machine
	}{{filtered, only(false)}, {unfiltered, only(true)}} {
		if _, err := engine.New(engine.Options{Dynamic: client, Informers: inf, Registry: reg, Machines: e.ms,
			Observer: e.obs, Log: zerolog.Nop()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := inf.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return filtered, unfiltered, client
}

// settled returns the pool enqueues once they stopped changing for 200ms.
func settled(e *enqueues) int {
	for last := -1; ; time.Sleep(200 * time.Millisecond) {
		n := e.get("pool")
		if n == last {
			return n
		}
		last = n
	}
}

func waitCount(t *testing.T, e *enqueues, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.get("pool") < want {
		if time.Now().After(deadline) {
			t.Fatalf("pool enqueues %d, want %d", e.get("pool"), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPodProgressDoesNotEnqueueClaims runs the real claim machine over the drivers' real pod
// cache: a pod's status progress (phase, Ready, container states — what the pod machine writes
// for every pod) enqueues no claim, a pod's binding (spec.nodeName) enqueues the standalone
// claim it names, and a claim generated for a pod from a template (named only in
// status.resourceClaimStatuses, controlled by the pod) is never enqueued for a pod event. The
// same machine without the trigger's fields filter shows what the filter saves.
func TestPodProgressDoesNotEnqueueClaims(t *testing.T) {
	const updates = 20
	pod := func(name string, claims []any, statuses []any) *unstructured.Unstructured {
		p := &unstructured.Unstructured{}
		p.SetAPIVersion("v1")
		p.SetKind("Pod")
		p.SetNamespace("ns")
		p.SetName(name)
		p.SetUID(types.UID("uid-" + name))
		_ = unstructured.SetNestedSlice(p.Object, claims, "spec", "resourceClaims")
		_ = unstructured.SetNestedField(p.Object, "Pending", "status", "phase")
		if statuses != nil {
			_ = unstructured.SetNestedSlice(p.Object, statuses, "status", "resourceClaimStatuses")
		}
		return p
	}
	standalone := pod("uses-shared", []any{map[string]any{"name": "gpu", "resourceClaimName": "shared"}}, nil)
	templated := pod("uses-template", []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": "tpl"}},
		[]any{map[string]any{"name": "gpu", "resourceClaimName": "uses-template-gpu-x7k2p"}})
	filtered, unfiltered, client := startFilteredAndUnfiltered(t, "claim", gvr.Pods, func(tr machine.Trigger) bool {
		return len(tr.Fields) > 0
	}, standalone, templated)
	ctx := t.Context()
	// Initial adds: the standalone claim only; the template claim is not the claim machine's.
	waitFor(t, filtered, "claim", 1)
	waitFor(t, unfiltered, "claim", 1)

	pods := client.Resource(gvr.Pods).Namespace("ns")
	progress := func(name string, i int) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(p.Object, "Running", "status", "phase")
		_ = unstructured.SetNestedSlice(p.Object, []any{map[string]any{"type": "Ready", "status": "True",
			"lastTransitionTime": fmt.Sprintf("2026-01-01T00:00:%02dZ", i)}}, "status", "conditions")
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range updates {
		progress("uses-template", i)
		progress("uses-shared", i)
		// The fake watch has a small buffer: let the informer take each event first.
		waitFor(t, unfiltered, "claim", 1+i+1)
	}
	p, err := pods.Get(ctx, "uses-shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(p.Object, "node-1", "spec", "nodeName")
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pod events are delivered in order: once the unfiltered machine saw the binding, every
	// status update came before it.
	waitFor(t, unfiltered, "claim", 1+updates+1)
	waitFor(t, filtered, "claim", 2)
	time.Sleep(100 * time.Millisecond)
	if got := filtered.get("claim"); got != 2 {
		t.Errorf("filtered: %d claim enqueues for 2 pod adds, %d status updates of each and 1 binding, want 2 (the standalone claim's add and binding)", got, updates)
	}
	if got := unfiltered.get("claim"); got != 1+updates+1 {
		t.Errorf("unfiltered: %d claim enqueues, want %d (the template claim is never mapped)", got, 1+updates+1)
	}
	t.Logf("%d status updates of 2 pods + 1 binding: %d claim enqueues with the fields filter, %d without",
		updates, filtered.get("claim"), unfiltered.get("claim"))
}

func waitFor(t *testing.T, e *enqueues, m string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.get(m) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s enqueues %d, want %d", m, e.get(m), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
