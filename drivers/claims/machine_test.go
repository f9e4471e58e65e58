package claims_test

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/machines"
)

// The claim machine (machines/claim.cue) decides the allocation pod handoff in CUE; these tests
// run it through engine.Decide with the driver's facts and the related pod faked.

type facts struct {
	obs map[string]bool
	pod map[string]any // the related allocationPod, nil when absent
}

func (f facts) Observe(name string) (engine.Fact, error) { return engine.Holds(f.obs[name]), nil }
func (f facts) Related(name string) map[string]any {
	if name == "allocationPod" {
		return f.pod
	}
	return nil
}

func claimMachine(t *testing.T) *machine.Machine {
	t.Helper()
	names, err := drivers.Names()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := machines.Load(names)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == "claim" {
			return m
		}
	}
	t.Fatal("no claim machine")
	return nil
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
	} {
		st := engine.Decide(m, engine.Input{Object: claimObject(tc.allocated), Facts: facts{obs: tc.obs, pod: tc.pod}, Now: time.Now()})
		if st.Err != nil || st.From != tc.from || st.Event != tc.ev || st.To != tc.to || !slices.Equal(actions(st), tc.actions) {
			t.Errorf("%s: %s -%s-> %s %v (err %v); want %s -%s-> %s %v", tc.name, st.From, st.Event, st.To, actions(st), st.Err, tc.from, tc.ev, tc.to, tc.actions)
		}
	}
}
