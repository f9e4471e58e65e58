package replay

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/faultcampaign"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/drivers/trace"
)

func gpuPool(profile simdevice.Profile, faults ...simdevice.Fault) *simdevice.Pool {
	return pooltest.Pool("ns", "gpus", "uid", simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 4, Profile: profile,
		TargetNodes: []string{"node-a", "node-b"}, Faults: faults})
}

func timing(source string, at time.Duration, clear *time.Duration, recoverAfter time.Duration) trace.FaultTiming {
	return trace.FaultTiming{Source: source, Pool: "gpus", PoolNamespace: "ns", At: at, Clear: clear, RecoverAfter: recoverAfter}
}

// ScheduleFaults: one record per listed device and per device a campaign hits, events sorted
// by time with clears first at one time.
func TestScheduleFaults(t *testing.T) {
	m := time.Minute
	tr := &trace.Trace{
		Faults: []trace.Fault{
			{FaultTiming: timing("spec.faults.0", 2*m, at(5*m), 0), Devices: []intstr.IntOrString{intstr.FromInt32(0), intstr.FromString("gpu-1")}, Mode: simdevice.FaultXID, XID: ptr.To[int64](79)},
			{FaultTiming: timing("spec.faults.1", 5*m, nil, 0), Node: "node-b", Devices: []intstr.IntOrString{intstr.FromInt32(3)}, Mode: simdevice.FaultUnhealthy},
		},
		Campaigns: []trace.FaultCampaign{{FaultTiming: timing("spec.faultCampaigns.0", m, nil, 30*time.Second),
			Campaign: faultcampaign.Campaign{Seed: 3, Mode: simdevice.FaultECC, Fraction: 1, Start: m}}},
	}
	recs, events, err := ScheduleFaults(tr, map[string]PoolTargets{"ns/gpus": {Nodes: []string{"node-b", "node-a"}, DeviceCount: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3+8 {
		t.Fatalf("%d records, want 2 + 1 listed and 8 of the campaign (fraction 1 of 2 × 4)", len(recs))
	}
	if r := recs[1]; r.Source != "spec.faults.0" || r.Device != "gpu-1" || r.Node != "" || r.Due != 2*m || *r.ClearDue != 5*m || r.Pool != "ns/gpus" || r.Describe() != "xid (XID 79)" {
		t.Errorf("record 1 %+v", r)
	}
	if r := recs[3]; r.Source != "spec.faultCampaigns.0" || r.Node != "node-a" || r.Device != "0" || r.Due != m || *r.ClearDue != m+30*time.Second {
		t.Errorf("record 3 (the campaign's first) %+v", r)
	}
	for i := 1; i < len(events); i++ {
		if events[i].At < events[i-1].At {
			t.Fatalf("events out of order: %+v", events)
		}
	}
	// At 5m fault 0's two clears come before fault 1 is set.
	var at5 []FaultEvent
	for _, ev := range events {
		if ev.At == 5*m {
			at5 = append(at5, ev)
		}
	}
	if len(at5) != 3 || !at5[0].Clear || !at5[1].Clear || at5[2].Clear || at5[2].Record != 2 {
		t.Errorf("events at 5m %+v", at5)
	}
	if _, _, err := ScheduleFaults(tr, nil); err == nil || !strings.Contains(err.Error(), "spec.faultCampaigns.0: no SimulatedDevicePool ns/gpus") {
		t.Errorf("a campaign without its pool: %v", err)
	}
}

// The replay's faults replace the pool's own on the same device and put them back when
// cleared; faults on other devices are never touched.
func TestEditKeepsThePoolsOwnFaults(t *testing.T) {
	own := simdevice.Fault{Device: intstr.FromInt32(1), Node: "node-a", Mode: simdevice.FaultUnhealthy}
	other := simdevice.Fault{Device: intstr.FromString("gpu-3"), Mode: simdevice.FaultCapacityExhausted}
	p := gpuPool("", own, other)
	recs := []FaultRecord{
		{Source: "spec.faults.0", Pool: "ns/gpus", Node: "node-a", Device: "gpu-1", Mode: simdevice.FaultDisappear},
		{Source: "spec.faults.1", Pool: "ns/gpus", Node: "node-a", Device: "2", Mode: simdevice.FaultUnhealthy},
	}
	s := newPoolState()
	steps, next, err := s.edit(p, []FaultEvent{{Record: 0}, {Record: 1}}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.active) != 0 {
		t.Error("edit changed the state it was given")
	}
	got := steps[1]
	if len(got) != 3 || got[0] != other || got[1].Mode != simdevice.FaultDisappear || got[2].Device.String() != "2" {
		t.Fatalf("after setting: %+v", got)
	}
	p.Spec.Faults = got
	steps, next, err = next.edit(p, []FaultEvent{{Clear: true, Record: 0}, {Clear: true, Record: 1}}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if got := steps[1]; len(got) != 2 || got[0] != other || got[1] != own {
		t.Errorf("after clearing: %+v, want the pool's own two faults", got)
	}
	if len(next.active) != 0 || len(next.shadowed) != 0 {
		t.Errorf("state after clearing %+v", next)
	}
	// A fault someone changed since is theirs: clearing the replay's leaves it.
	p.Spec.Faults = nil
	_, st, _ := newPoolState().edit(p, []FaultEvent{{Record: 1}}, recs)
	p.Spec.Faults = []simdevice.Fault{{Device: intstr.FromInt32(2), Node: "node-a", Mode: simdevice.FaultCapacityExhausted}}
	if steps, _, _ := st.edit(p, []FaultEvent{{Clear: true, Record: 1}}, recs); len(steps[0]) != 1 || steps[0][0].Mode != simdevice.FaultCapacityExhausted {
		t.Errorf("a fault changed since was removed: %+v", steps[0])
	}
	// Restore clears what is still set.
	if ev := next.restore(); len(ev) != 0 {
		t.Errorf("restore after clearing: %+v", ev)
	}
	if ev := st.restore(); len(ev) != 1 || !ev[0].Clear || ev[0].Record != 1 {
		t.Errorf("restore: %+v", ev)
	}
}

// CheckFaults refuses, before the replay, a device the pool lacks and a driver-shaped mode its
// profile does not publish, naming the trace's entry.
func TestCheckFaults(t *testing.T) {
	recs := []FaultRecord{{Source: "spec.faults.0", Pool: "ns/gpus", Device: "gpu-9", Mode: simdevice.FaultUnhealthy}}
	pools := map[string]*simdevice.Pool{"ns/gpus": gpuPool("")}
	if err := CheckFaults(recs, []FaultEvent{{Record: 0}}, pools); err == nil || !strings.Contains(err.Error(), "spec.faults.0: SimulatedDevicePool ns/gpus has no device gpu-9") {
		t.Errorf("a missing device: %v", err)
	}
	recs[0].Device, recs[0].Mode, recs[0].XID = "0", simdevice.FaultXID, ptr.To[int64](79)
	if err := CheckFaults(recs, []FaultEvent{{Record: 0}}, pools); err == nil || !strings.Contains(err.Error(), "spec.faults.0 (setting xid (XID 79) on every node 0") {
		t.Errorf("an XID on a pool without the NVIDIA profile: %v", err)
	}
	pools["ns/gpus"] = gpuPool(simdevice.ProfileNvidiaGPU)
	if err := CheckFaults(recs, []FaultEvent{{Record: 0}, {At: time.Minute, Clear: true, Record: 0}}, pools); err != nil {
		t.Errorf("an XID on an nvidia-gpu pool: %v", err)
	}
	if err := CheckFaults(recs, []FaultEvent{{Record: 0}}, map[string]*simdevice.Pool{}); err == nil {
		t.Error("a fault of a pool that does not exist")
	}
}

// The devices a fault changes are read from what the pool publishes: an XID taints its GPU
// NoSchedule, gpu-lost every GPU of the node, disappear removes the device.
func TestChangedDevices(t *testing.T) {
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}}
	p := gpuPool(simdevice.ProfileNvidiaGPU)
	f := &faultRunner{nodes: nodes}
	for _, tc := range []struct {
		fault              simdevice.Fault
		devices            int
		taint, effect, dev string
	}{
		{simdevice.Fault{Device: intstr.FromInt32(1), Node: "node-a", Mode: simdevice.FaultXID, XID: ptr.To[int64](79)}, 1, "gpu.nvidia.com/xid=79:NoSchedule", "NoSchedule", "gpu-1"},
		{simdevice.Fault{Device: intstr.FromInt32(1), Mode: simdevice.FaultXID, XID: ptr.To[int64](13)}, 2, "gpu.nvidia.com/xid=13:None", "None", "gpu-1"},
		{simdevice.Fault{Device: intstr.FromInt32(0), Node: "node-b", Mode: simdevice.FaultGPULost}, 4, "gpu.nvidia.com/gpu-lost:NoSchedule", "NoSchedule", "gpu-0"},
		{simdevice.Fault{Device: intstr.FromInt32(2), Node: "node-b", Mode: simdevice.FaultDisappear}, 1, "", EffectRemoved, "gpu-2"},
	} {
		ch := f.changes(p, nil, []simdevice.Fault{tc.fault}, tc.fault.Node)
		var r FaultRecord
		r.describeChange(ch)
		if r.Devices != tc.devices || r.Taint != tc.taint || r.Effect != tc.effect || len(ch) == 0 || ch[0].device != tc.dev {
			t.Errorf("%+v: %d devices, taint %q effect %q, changed %+v", tc.fault, r.Devices, r.Taint, r.Effect, ch)
		}
	}
}

// recordWithFaults: a NoSchedule XID at 60s on the GPU job a holds, cleared at 120s; b arrives
// at 70s and starts at 125s, after the clear; c never starts.
func recordWithFaults() *Record {
	r := record()
	s := time.Second
	r.Simulated = 200 * s
	r.Jobs[1].Arrival, r.Jobs[1].Started = 70*s, at(125*s)
	r.Faults = []FaultRecord{
		{Source: "spec.faults.0", Pool: "ns/gpus", Device: "0", Mode: simdevice.FaultXID, XID: ptr.To[int64](79), Due: 60 * s, ClearDue: at(120 * s),
			Applied: at(61 * s), Cleared: at(121 * s), Taint: "gpu.nvidia.com/xid=79:NoSchedule", Effect: "NoSchedule", Devices: 2,
			Hits: []FaultHit{{Job: "ns/a", Node: "node-a", Device: "gpu-0"}}},
		{Source: "spec.faults.1", Pool: "ns/gpus", Device: "1", Mode: simdevice.FaultECC, Due: 900 * s},
		{Source: "spec.faults.2", Pool: "ns/gpus", Device: "9", Mode: simdevice.FaultUnhealthy, Due: 10 * s, Error: "no device"},
	}
	r.Samples = []Sample{
		{T: 0, Pending: 1},
		{T: 61 * s, Unavailable: 2, Faults: 1, Pending: 1},
		{T: 121 * s, Pending: 1},
		{T: 200 * s},
	}
	return r
}

func TestSummarizeFaults(t *testing.T) {
	if Summarize(record()).Faults != nil {
		t.Error("a replay without faults has a fault summary")
	}
	f := Summarize(recordWithFaults()).Faults
	if f == nil || f.Faults != 3 || f.Applied != 1 || f.Cleared != 1 || f.Failed != 1 || f.NotApplied != 1 || f.PeakUnavailable != 2 ||
		f.ByMode["xid (XID 79)"] != 1 || f.ByEffect["NoSchedule"] != 1 {
		t.Fatalf("fault summary %+v", f)
	}
	if len(f.Hit) != 1 || f.Hit[0].Job != "ns/a" || f.Hit[0].Outcome != "finished" || !strings.Contains(f.Hit[0].Expected, "keeps running: NoSchedule") || f.Hit[0].At != 61*time.Second {
		t.Errorf("hit %+v", f.Hit)
	}
	// b waited 70s–125s, 51s of it while 2 devices were unavailable (61s–121s); d (arrived at
	// 30s, never started) waited through all of it: 60s.
	if len(f.Delayed) != 2 || f.Delayed[0].Job != "ns/d" || f.Delayed[0].Unavailable != 60*time.Second || f.Delayed[0].Started ||
		f.Delayed[1].Job != "ns/b" || f.Delayed[1].Unavailable != 51*time.Second || f.Delayed[1].Wait != 55*time.Second {
		t.Errorf("delayed %+v", f.Delayed)
	}
	if expected("NoExecute") != "evicted: NoExecute evicts pods using the device" {
		t.Error(expected("NoExecute"))
	}
	c := Compare(record(), recordWithFaults())
	if c.Faults == nil || c.Faults[0] != (FaultCounts{}) || c.Faults[1] != (FaultCounts{Applied: 1, Cleared: 1, JobsHit: 1, Delayed: 2}) {
		t.Errorf("compare faults %+v", c.Faults)
	}
	if Compare(record(), record()).Faults != nil {
		t.Error("two runs without faults compare fault counts")
	}
}

func TestFaultReport(t *testing.T) {
	r := recordWithFaults()
	var b bytes.Buffer
	if err := WriteFaultsCSV(&b, r); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(rows) != 4 || rows[1][4] != "xid" || rows[1][5] != "79" || rows[1][7] != "61.0" || rows[1][9] != "121.0" || rows[1][11] != "NoSchedule" || rows[1][13] != "ns/a" || rows[3][14] != "no device" {
		t.Errorf("faults.csv %v %v", rows, err)
	}
	b.Reset()
	if err := WriteHTML(&b, record(), r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`id="faults"`, "gpu.nvidia.com/xid=79:NoSchedule", "keeps running: NoSchedule", "ns/a", "Devices unavailable", "jobs holding a faulted device", "1 could not be written", "t+1m1s", "ns/b"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Count(page, `id="faults"`) != 1 {
		t.Error("the run without faults has a faults section")
	}
	dir := t.TempDir()
	if err := WriteFiles(dir, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadRecord(dir + "/record.json")
	if err != nil || len(back.Faults) != 3 || *back.Faults[0].Applied != 61*time.Second || back.Faults[0].Hits[0].Job != "ns/a" {
		t.Errorf("record.json read back: %+v %v", back, err)
	}
}

// The jobs a fault hits are those whose claims hold a changed device and had not ended.
func TestHits(t *testing.T) {
	claims := cache.NewStore(cache.MetaNamespaceKeyFunc)
	claim := func(name, job, device string) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{trace.LabelJob: job}},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "devices", Driver: "d", Pool: "p", Device: device}}}}}}
	}
	for _, c := range []*resourcev1.ResourceClaim{claim("a-0", "a", "gpu-0"), claim("b-0", "b", "gpu-1"), claim("c-0", "c", "gpu-0"), {ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}}} {
		_ = claims.Add(c)
	}
	jobs := map[string]*JobRecord{"ns/a": {}, "ns/b": {}, "ns/c": {Finished: at(10 * time.Second)}}
	ch := []changedDevice{{key: deviceKey("d", "p", "gpu-0"), node: "n", device: "gpu-0"}}
	got := hits(ch, heldBy(claims), jobs, 20*time.Second)
	if len(got) != 1 || got[0] != (FaultHit{Job: "ns/a", Node: "n", Device: "gpu-0"}) {
		t.Errorf("hits %+v, want only a (c ended before the fault, b holds another device)", got)
	}
}
