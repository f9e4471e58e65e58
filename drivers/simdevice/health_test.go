package simdevice

import (
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// deviceTaints maps "node/device" to the taints published on it.
func deviceTaints(t *testing.T, p *Pool) map[string][]resourcev1.DeviceTaint {
	t.Helper()
	out := map[string][]resourcev1.DeviceTaint{}
	for _, s := range mustSlices(t, p) {
		for _, d := range s.Spec.Devices {
			out[*s.Spec.NodeName+"/"+d.Name] = d.Taints
		}
	}
	return out
}

func nvidiaPool(faults ...Fault) *Pool {
	return newPool(func(s *PoolSpec) {
		s.Profile = ProfileNvidiaGPU
		s.DeviceCount = 3
		s.TargetNodes = []string{"node-a", "node-b"}
		s.Faults = faults
	})
}

func taint(key, value string, effect resourcev1.DeviceTaintEffect) []resourcev1.DeviceTaint {
	return []resourcev1.DeviceTaint{{Key: key, Value: value, Effect: effect}}
}

func sameTaints(a, b []resourcev1.DeviceTaint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value || a[i].Effect != b[i].Effect {
			return false
		}
	}
	return true
}

// TestDriverFaultTaints: each driver-shaped mode publishes the taint the NVIDIA driver's
// healthEventToTaint makes, on the devices its health monitor would name.
func TestDriverFaultTaints(t *testing.T) {
	none, noSchedule := resourcev1.DeviceTaintEffectNone, resourcev1.DeviceTaintEffectNoSchedule
	cases := map[string]struct {
		faults []Fault
		want   map[string][]resourcev1.DeviceTaint // unlisted devices have no taints
	}{
		"xid on one node": {
			[]Fault{{Device: intstr.FromInt32(1), Node: "node-a", Mode: FaultXID, XID: ptr.To[int64](79)}},
			map[string][]resourcev1.DeviceTaint{"node-a/gpu-1": taint(TaintNvidiaXID, "79", noSchedule)},
		},
		"ignored xid is informational": {
			[]Fault{{Device: intstr.FromString("gpu-0"), Mode: FaultXID, XID: ptr.To[int64](13)}},
			map[string][]resourcev1.DeviceTaint{"node-a/gpu-0": taint(TaintNvidiaXID, "13", none), "node-b/gpu-0": taint(TaintNvidiaXID, "13", none)},
		},
		"ecc is xid 48, nvlink xid 74": {
			[]Fault{{Device: intstr.FromInt32(0), Node: "node-b", Mode: FaultECC}, {Device: intstr.FromInt32(2), Node: "node-b", Mode: FaultNVLink}},
			map[string][]resourcev1.DeviceTaint{"node-b/gpu-0": taint(TaintNvidiaXID, "48", noSchedule), "node-b/gpu-2": taint(TaintNvidiaXID, "74", noSchedule)},
		},
		"a later xid overwrites the key": {
			[]Fault{{Device: intstr.FromInt32(0), Node: "node-a", Mode: FaultECC}, {Device: intstr.FromInt32(0), Node: "node-a", Mode: FaultXID, XID: ptr.To[int64](43)}},
			map[string][]resourcev1.DeviceTaint{"node-a/gpu-0": taint(TaintNvidiaXID, "43", none)},
		},
		"gpu lost taints every device of the node": {
			[]Fault{{Device: intstr.FromInt32(2), Node: "node-b", Mode: FaultGPULost}},
			map[string][]resourcev1.DeviceTaint{
				"node-b/gpu-0": taint(TaintNvidiaGPULost, "", noSchedule), "node-b/gpu-1": taint(TaintNvidiaGPULost, "", noSchedule),
				"node-b/gpu-2": taint(TaintNvidiaGPULost, "", noSchedule),
			},
		},
		"unmonitored": {
			[]Fault{{Device: intstr.FromInt32(1), Node: "node-a", Mode: FaultUnmonitored}},
			map[string][]resourcev1.DeviceTaint{"node-a/gpu-1": taint(TaintNvidiaUnmonitored, "", none)},
		},
		"keys add up, DRAForge's modes still work": {
			[]Fault{
				{Device: intstr.FromInt32(0), Node: "node-a", Mode: FaultUnhealthy},
				{Device: intstr.FromInt32(0), Node: "node-a", Mode: FaultXID, XID: ptr.To[int64](79)},
				{Device: intstr.FromInt32(1), Node: "node-a", Mode: FaultDisappear},
			},
			map[string][]resourcev1.DeviceTaint{"node-a/gpu-0": {
				{Key: TaintUnhealthy, Value: "true", Effect: noSchedule}, {Key: TaintNvidiaXID, Value: "79", Effect: noSchedule}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := deviceTaints(t, nvidiaPool(tc.faults...))
			for dev, ts := range got {
				if !sameTaints(ts, tc.want[dev]) {
					t.Errorf("%s: taints %+v, want %+v", dev, ts, tc.want[dev])
				}
			}
			for dev := range tc.want {
				if _, ok := got[dev]; !ok {
					t.Errorf("%s not published", dev)
				}
			}
		})
	}
	// Recovery is removing the fault: the taint goes.
	if got := deviceTaints(t, nvidiaPool()); len(got["node-a/gpu-1"]) != 0 {
		t.Errorf("without faults gpu-1 has taints %+v", got["node-a/gpu-1"])
	}
}

func TestDriverFaultsOnSharesProfile(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.Profile = ProfileNvidiaGPUShares
		s.Faults = []Fault{{Device: intstr.FromInt32(1), Mode: FaultNVLink}}
	})
	if got := deviceTaints(t, p)["node-a/gpu-1"]; !sameTaints(got, taint(TaintNvidiaXID, "74", resourcev1.DeviceTaintEffectNoSchedule)) {
		t.Errorf("gpu-1 taints %+v", got)
	}
}

func TestValidateDriverFaults(t *testing.T) {
	xid := func(v int64) *int64 { return &v }
	cases := map[string]struct {
		profile Profile
		fault   Fault
		want    []string // substrings of the joined errors; nil: valid
	}{
		"xid":              {ProfileNvidiaGPU, Fault{Mode: FaultXID, XID: xid(79)}, nil},
		"gpu-lost":         {ProfileNvidiaGPUShares, Fault{Mode: FaultGPULost}, nil},
		"xid missing":      {ProfileNvidiaGPU, Fault{Mode: FaultXID}, []string{"spec.faults[0].xid: Required value"}},
		"xid zero":         {ProfileNvidiaGPU, Fault{Mode: FaultXID, XID: xid(0)}, []string{"spec.faults[0].xid", "between 1 and 999"}},
		"xid too large":    {ProfileNvidiaGPU, Fault{Mode: FaultXID, XID: xid(1000)}, []string{"spec.faults[0].xid", "between 1 and 999"}},
		"xid on ecc":       {ProfileNvidiaGPU, Fault{Mode: FaultECC, XID: xid(48)}, []string{"spec.faults[0].xid: Forbidden", "ecc is XID 48"}},
		"xid on unhealthy": {ProfileNvidiaGPU, Fault{Mode: FaultUnhealthy, XID: xid(79)}, []string{"spec.faults[0].xid: Forbidden"}},
		"no profile": {"", Fault{Mode: FaultECC},
			[]string{"spec.faults[0].mode", "has no profile", "nvidia-gpu, nvidia-gpu-b200, nvidia-gpu-gb200, nvidia-gpu-h200, nvidia-gpu-shares"}},
		"amd profile": {ProfileAMDGPU, Fault{Mode: FaultXID, XID: xid(79)},
			[]string{"spec.faults[0].mode", `profile "amd-gpu" does not mirror that driver`}},
		"intel mode": {ProfileIntelGPU, Fault{Mode: FaultOverheat}, nil},
		"intel mode on nvidia": {ProfileNvidiaGPU, Fault{Mode: FaultMemoryCritical},
			[]string{"spec.faults[0].mode", "event of Intel GPUs", `profile "nvidia-gpu" does not mirror that driver`, "the Intel GPU driver (intel-gpu)"}},
		"nvidia mode on intel": {ProfileIntelGPU, Fault{Mode: FaultGPULost},
			[]string{"spec.faults[0].mode", "event of NVIDIA GPUs", `profile "intel-gpu"`}},
		"dynamic mig": {ProfileNvidiaMIGH100, Fault{Mode: FaultGPULost},
			[]string{"spec.faults[0].mode", "DynamicMIG", "mutually exclusive"}},
		"own modes on any profile": {ProfileAMDGPU, Fault{Mode: FaultUnhealthy}, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPool(func(s *PoolSpec) {
				s.Profile = tc.profile
				tc.fault.Device = intstr.FromInt32(0)
				s.Faults = []Fault{tc.fault}
			})
			var all []string
			for _, e := range p.Validate() {
				all = append(all, e.Error())
			}
			joined := strings.Join(all, "\n")
			if tc.want == nil && joined != "" {
				t.Fatalf("want valid, got\n%s", joined)
			}
			for _, w := range tc.want {
				if !strings.Contains(joined, w) {
					t.Errorf("want %q in\n%s", w, joined)
				}
			}
		})
	}
}

// TestNvidiaProfilesDeclareTheirDriver: the driver family, not a list of names, decides which
// profiles take driver-shaped faults, so a new nvidia-* profile must name its driver.
func TestNvidiaProfilesDeclareTheirDriver(t *testing.T) {
	for p, def := range profiles {
		want := NvidiaDriverName
		if p == ProfileNvidiaComputeDomain { // NVIDIA's other driver, with no health events
			want = "compute-domain.nvidia.com"
		}
		if strings.HasPrefix(string(p), "nvidia-") && def.driver != want {
			t.Errorf("profile %s: profileDef.driver is %q, want %q", p, def.driver, want)
		}
		if strings.HasPrefix(string(p), "intel-") && def.driver != IntelDriverName {
			t.Errorf("profile %s: profileDef.driver is %q, want %q", p, def.driver, IntelDriverName)
		}
	}
	want := map[string][]Profile{
		NvidiaDriverName: {ProfileNvidiaGPU, ProfileNvidiaGPUB200, ProfileNvidiaGPUGB200, ProfileNvidiaGPUH200, ProfileNvidiaGPUShares},
		IntelDriverName:  {ProfileIntelGPU},
	}
	var modes []FaultMode
	for _, fam := range FaultFamilies {
		if got := fam.Profiles(); !slices.Equal(got, want[fam.Driver]) {
			t.Errorf("%s: Profiles() = %v, want %v", fam.Driver, got, want[fam.Driver])
		}
		modes = append(modes, fam.Modes...)
	}
	if !slices.Equal(modes, DriverFaultModes) {
		t.Errorf("the families' modes %v, want DriverFaultModes %v in order", modes, DriverFaultModes)
	}
}
