package pools

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/enginetest"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/machines/machinestest"
)

// The pool machine (machines/pool.cue) decides with CUE what used to be Go: Degraded from the
// CRD's schema annotation, the invalid message, the blocked publication. These tests run it
// through engine.Decide with the driver's facts faked.

var poolNames = machine.Names{
	Actions: []string{"deletePoolSlices", "removeFinalizer", "publishPoolSlices", "recordPoolStatus", "allocateClaim",
		"setBindingConditions", "deallocateClaim", "prepareClaims", "unprepareClaims",
		"createAllocationPod", "awaitAllocationPod", "completeAllocation", "deleteAllocationPod", "unreserveAllocationPod"},
	Observations: []string{"poolSpecInvalid", "poolSlicesOutOfDate", "claimNeedsSimulatedAllocation",
		"claimAwaitsBindingConditions", "claimBindingFailed", "claimNeedsAllocationPod", "claimReservedForAllocationPod", "claimReservedForGoneAllocationPod",
		"podOnSimulatedNode", "podClaimsReserved", "podDeviceHealth", "podDeviceHealthChanged", "podNetwork",
		"computeDomainSimulated", "computeDomainStatusStale", "gpuFabricDetached"},
	Mappers: []string{"podClaims", "pendingClaims", "claimPods", "slicePods", "claimComputeDomains", "computeDomainPods", "poolCliqueNodes"},
}

// facts are the observations and the related CRD (nil when absent).
func facts(obs map[string]engine.Fact, crd map[string]any) *enginetest.Facts {
	return &enginetest.Facts{Observations: obs, Objects: map[string]map[string]any{"crd": crd}}
}

func crd(version string) map[string]any {
	md := map[string]any{"name": gvr.SimulatedDevicePoolCRD}
	if version != "" {
		md["annotations"] = map[string]any{SchemaAnnotation: version}
	}
	return map[string]any{"metadata": md}
}

func poolMachine(t *testing.T) *machine.Machine {
	t.Helper()
	return machinestest.Machine(t, poolNames, "pool")
}

func poolObject(conds ...map[string]any) *unstructured.Unstructured {
	var list []any
	for _, c := range conds {
		c["observedGeneration"] = int64(1)
		list = append(list, c)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "p", "namespace": "ns", "uid": "u", "generation": int64(1)},
		"status":   map[string]any{"conditions": list},
	}}
}

func condition(st engine.Step, typ string) engine.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return engine.Condition{}
}

func TestPoolMachineDegradedFromCRD(t *testing.T) {
	m := poolMachine(t)
	synced := poolObject(map[string]any{"type": "Synced", "status": "True", "reason": "Published"})
	for _, tc := range []struct {
		crd            map[string]any
		status, reason string
		message        string
	}{
		{crd(fmt.Sprint(SchemaVersion)), "False", ReasonSchemaCurrent,
			fmt.Sprintf("the installed CRD %s has schema version %d (this controller needs %d)", gvr.SimulatedDevicePoolCRD, SchemaVersion, SchemaVersion)},
		{crd(fmt.Sprint(SchemaVersion + 1)), "False", ReasonSchemaCurrent,
			fmt.Sprintf("the installed CRD %s has schema version %d (this controller needs %d)", gvr.SimulatedDevicePoolCRD, SchemaVersion+1, SchemaVersion)},
		{crd(fmt.Sprint(SchemaVersion - 1)), "True", ReasonSchemaPredates,
			fmt.Sprintf("the installed CRD %s has schema version %d, this controller needs %d: apply the CRDs of this release (deploy/crds)", gvr.SimulatedDevicePoolCRD, SchemaVersion-1, SchemaVersion)},
		{crd(""), "True", ReasonSchemaPredates,
			fmt.Sprintf("the installed CRD %s has schema version 0, this controller needs %d: apply the CRDs of this release (deploy/crds)", gvr.SimulatedDevicePoolCRD, SchemaVersion)},
		{nil, "True", ReasonSchemaPredates,
			fmt.Sprintf("the installed CRD %s has schema version 0, this controller needs %d: apply the CRDs of this release (deploy/crds)", gvr.SimulatedDevicePoolCRD, SchemaVersion)},
	} {
		st := engine.Decide(m, engine.Input{Object: synced, Facts: facts(nil, tc.crd), Now: time.Now()})
		d := condition(st, ConditionDegraded)
		if st.From != "synced" || st.Transition != nil || d.Status != tc.status || d.Reason != tc.reason || d.Message != tc.message {
			t.Errorf("crd %v: state %s event %q Degraded %+v\nwant %s %s %q", tc.crd, st.From, st.Event, d, tc.status, tc.reason, tc.message)
		}
		if r := condition(st, "Ready"); r.Status != "True" || r.Reason != "Published" {
			t.Errorf("Ready changed with the CRD: %+v", r)
		}
	}
}

func TestPoolMachineInvalidAndBlocked(t *testing.T) {
	m := poolMachine(t)
	f := facts(map[string]engine.Fact{"poolSpecInvalid": {Holds: true, Message: "spec.devices: too many"}}, crd("1"))
	in := engine.Input{Object: poolObject(), Facts: f, Now: time.Now()}
	st := engine.Decide(m, in)
	if st.Event != "invalid" || st.To != "invalid" || condition(st, "Ready").Message != "spec.devices: too many" || condition(st, "Synced").Reason != "InvalidSpec" {
		t.Errorf("invalid spec: %s -> %s on %q, conditions %+v", st.From, st.To, st.Event, st.Conditions)
	}
	// Still invalid with another problem: no transition, the message follows the observation.
	f.Observations["poolSpecInvalid"] = engine.Fact{Holds: true, Message: "spec.poolName: taken"}
	st = engine.Decide(m, engine.Input{Object: poolObject(map[string]any{"type": "Ready", "status": "False", "reason": "InvalidSpec"}), Facts: f, Now: time.Now()})
	if st.From != "invalid" || st.Transition != nil || condition(st, "Ready").Message != "spec.poolName: taken" {
		t.Errorf("still invalid: %s on %q, conditions %+v", st.From, st.Event, st.Conditions)
	}
	// A blocked publication goes to blocked, its message from the outcome.
	f.Observations = map[string]engine.Fact{"poolSlicesOutOfDate": {Holds: true}}
	in.Facts = f
	st = engine.Decide(m, in)
	if st.Event != "publish" {
		t.Fatalf("out of date pending pool: event %q", st.Event)
	}
	st = engine.BlockedStep(m, st, &engine.BlockedError{Reason: "PoolNameTaken", Message: "slice s held"}, in)
	if st.To != "blocked" || st.Outcome != engine.Done || condition(st, "Ready").Reason != "PoolNameTaken" || condition(st, "Ready").Message != "slice s held" {
		t.Errorf("blocked: to %s outcome %s conditions %+v", st.To, st.Outcome, st.Conditions)
	}
	if st.RequeueAfter != 10*time.Second {
		t.Errorf("blocked requeue %s", st.RequeueAfter)
	}
}

// TestPoolMachineSpellsSchemaVersion keeps the version pool.cue compares with equal to
// SchemaVersion, the one deploy/crds carries.
func TestPoolMachineSpellsSchemaVersion(t *testing.T) {
	m := poolMachine(t)
	deg := m.States["synced"].Conditions[2]
	if deg.When == nil || deg.When.Annotation != SchemaAnnotation || *deg.When.AtLeast != SchemaVersion || deg.Reason != ReasonSchemaCurrent {
		t.Errorf("pool.cue Degraded rule %+v does not compare with schema version %d", deg, SchemaVersion)
	}
	if rel := m.Related["crd"]; rel.Resource != gvr.CustomResourceDefinitions {
		t.Errorf("related crd %+v", rel)
	}
	if name, err := m.Related["crd"].NameT.RenderString(nil); err != nil || name != gvr.SimulatedDevicePoolCRD {
		t.Errorf("related crd name %q (%v), want %s", name, err, gvr.SimulatedDevicePoolCRD)
	}
}
