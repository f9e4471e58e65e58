package claims_test

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/enginetest"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/machines/machinestest"
)

// The claim machine (machines/claim.cue) decides the allocation pod handoff in CUE; these tests
// run it through engine.Decide with the driver's facts and the related pod faked.

func claimMachine(t *testing.T) *machine.Machine {
	t.Helper()
	names, err := drivers.Names()
	if err != nil {
		t.Fatal(err)
	}
	return machinestest.Machine(t, names, "claim")
}

// facts are the observations that hold and the related allocationPod (nil when absent).
func facts(obs map[string]bool, pod map[string]any) *enginetest.Facts {
	f := &enginetest.Facts{Observations: map[string]engine.Fact{}, Objects: map[string]map[string]any{"allocationPod": pod}}
	for n, b := range obs {
		f.Observations[n] = engine.Holds(b)
	}
	return f
}

func claimObject(allocated bool) *unstructured.Unstructured {
	o := map[string]any{"metadata": map[string]any{"name": "c", "namespace": "ns", "uid": "u",
		"finalizers": []any{"resource.kubernetes.io/delete-protection"}}}
	if allocated {
		o["status"] = map[string]any{"allocation": map[string]any{"devices": map[string]any{}}}
	}
	return &unstructured.Unstructured{Object: o}
}

func pod(deleting bool) map[string]any {
	md := map[string]any{"name": "draforge-alloc-u", "namespace": "ns"}
	if deleting {
		md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	}
	return map[string]any{"metadata": md}
}

func actions(st engine.Step) []string {
	if st.Transition == nil {
		return nil
	}
	var out []string
	for _, a := range st.Transition.Actions {
		switch {
		case a.Driver != "":
			out = append(out, a.Driver)
		case a.Finalizer != nil && a.Finalizer.Remove != "":
			out = append(out, "remove "+a.Finalizer.Remove)
		default:
			out = append(out, a.String())
		}
	}
	return out
}

func TestClaimMachineAllocationPodHandoff(t *testing.T) {
	m := claimMachine(t)
	for _, tc := range []struct {
		name      string
		allocated bool
		pod       map[string]any
		obs       map[string]bool
		from, ev  string
		to        string
		actions   []string
	}{
		{"simulator allocates", false, nil, map[string]bool{"claimNeedsSimulatedAllocation": true}, "pending", "allocate", "allocated", []string{"allocateClaim"}},
		{"kube-scheduler: make the allocation pod", false, nil, map[string]bool{"claimNeedsAllocationPod": true}, "pending", "schedule", "scheduling", []string{"createAllocationPod"}},
		{"used by a pod kube-scheduler schedules", false, nil, nil, "pending", "", "pending", nil},
		{"pod waits for kube-scheduler", false, pod(false), map[string]bool{"claimNeedsAllocationPod": true}, "scheduling", "wait", "scheduling", []string{"awaitAllocationPod"}},
		{"claim no longer needs the pod", false, pod(false), nil, "scheduling", "cancel", "pending", []string{"deleteAllocationPod"}},
		{"pod evicted before the handoff", false, pod(true), map[string]bool{"claimNeedsAllocationPod": true}, "scheduling", "podGone", "scheduling", nil},
		{"allocated for the bound pod: take over", true, pod(false), map[string]bool{"claimReservedForAllocationPod": true}, "handoff", "handOver", "allocated",
			[]string{"remove resource.kubernetes.io/delete-protection", "completeAllocation"}},
		{"binding conditions first", true, pod(false), map[string]bool{"claimAwaitsBindingConditions": true, "claimReservedForAllocationPod": true}, "handoff", "bind", "handoff", []string{"setBindingConditions"}},
		{"allocated, pod not bound yet", true, pod(false), nil, "handoff", "", "handoff", nil},
		{"taken over", true, nil, map[string]bool{"claimReservedForAllocationPod": true}, "allocated", "", "allocated", nil},
		{"still reserved for the gone pod", true, nil, map[string]bool{"claimReservedForGoneAllocationPod": true}, "allocated", "unreserve", "allocated", []string{"unreserveAllocationPod"}},
	} {
		st := engine.Decide(m, engine.Input{Object: claimObject(tc.allocated), Facts: facts(tc.obs, tc.pod), Now: time.Now()})
		if st.Err != nil || st.From != tc.from || st.Event != tc.ev || st.To != tc.to || !slices.Equal(actions(st), tc.actions) {
			t.Errorf("%s: %s -%s-> %s %v (err %v); want %s -%s-> %s %v", tc.name, st.From, st.Event, st.To, actions(st), st.Err, tc.from, tc.ev, tc.to, tc.actions)
		}
	}
}

// TestClaimMachineSelectsClaimsItActsOn: the claim machine passes over standalone claims and,
// of the claims generated for pods (kube-scheduler's), only those whose allocation has devices
// with binding conditions, which the simulated driver sets.
func TestClaimMachineSelectsClaimsItActsOn(t *testing.T) {
	m := claimMachine(t)
	owner := func(apiVersion, kind string, controller bool) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "name": "p", "uid": "pu", "controller": controller}
	}
	withOwners := func(o *unstructured.Unstructured, refs ...map[string]any) *unstructured.Unstructured {
		var l []any
		for _, r := range refs {
			l = append(l, r)
		}
		o.Object["metadata"].(map[string]any)["ownerReferences"] = l
		return o
	}
	withResults := func(o *unstructured.Unstructured, results ...map[string]any) *unstructured.Unstructured {
		var l []any
		for _, r := range results {
			l = append(l, r)
		}
		o.Object["status"] = map[string]any{"allocation": map[string]any{"devices": map[string]any{"results": l}}}
		return o
	}
	plain := map[string]any{"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0"}
	bound := map[string]any{"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-1",
		"bindingConditions": []any{"Attached"}}
	for _, tc := range []struct {
		name  string
		claim *unstructured.Unstructured
		want  bool
	}{
		{"standalone pending", claimObject(false), true},
		{"standalone allocated", withResults(claimObject(false), plain), true},
		{"owned by a Job, not controlled by a pod", withOwners(claimObject(false), owner("batch/v1", "Job", true), owner("v1", "Pod", false)), true},
		{"a pod's, pending", withOwners(claimObject(false), owner("v1", "Pod", true)), false},
		{"a pod's, allocated", withResults(withOwners(claimObject(false), owner("v1", "Pod", true)), plain), false},
		{"a pod's, allocated with binding conditions", withResults(withOwners(claimObject(false), owner("v1", "Pod", true)), plain, bound), true},
	} {
		if got := engine.Selects(m, tc.claim.Object); got != tc.want {
			t.Errorf("%s: selected %v, want %v", tc.name, got, tc.want)
		}
	}
}
