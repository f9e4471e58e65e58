package simdevice

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// TestIntelHealthFaults: the Intel GPU driver publishes one NoExecute taint per unhealthy device,
// HealthIssues-<categories sorted, joined by "_">, and health=Unhealthy; an absent GPU stays
// published; healthy devices keep health=Healthy and no taint. A fault on node-a only leaves
// node-b alone; with attributeDomain the health attribute keeps its domain.
func TestIntelHealthFaults(t *testing.T) {
	for _, domain := range []string{"", "intel.example.com"} {
		p := newPool(func(s *PoolSpec) {
			s.Profile = ProfileIntelGPU
			s.DeviceCount = 3
			s.TargetNodes = []string{"node-a", "node-b"}
			s.Faults = []Fault{
				{Device: intstr.FromInt32(0), Node: "node-a", Mode: FaultOverheat},
				{Device: intstr.FromInt32(0), Node: "node-a", Mode: FaultMemoryCritical},
				{Device: intstr.FromInt32(0), Node: "node-a", Mode: FaultMemoryCritical},
				{Device: intstr.FromInt32(1), Node: "node-a", Mode: FaultDeviceAbsent},
			}
			if domain != "" {
				s.AttributeDomain = domain
			}
		})
		if errs := p.Validate(); len(errs) > 0 {
			t.Fatal(errs)
		}
		attr := resourcev1.QualifiedName(AttrIntelHealth)
		if domain != "" {
			attr = resourcev1.QualifiedName(domain + "/" + AttrIntelHealth)
		}
		noExecute := resourcev1.DeviceTaintEffectNoExecute
		// Devices by name: GPU i is on bus 04 + 16i.
		want := map[string]struct {
			taints []resourcev1.DeviceTaint
			health string
		}{
			"0000-04-00-0-0xe211": {taint("HealthIssues-memory_temperature.core.gpu", "", noExecute), "Unhealthy"},
			"0000-14-00-0-0xe211": {taint("HealthIssues-DeviceAbsent", "", noExecute), "Unhealthy"},
			"0000-24-00-0-0xe211": {nil, "Healthy"},
		}
		seen := 0
		for _, s := range mustSlices(t, p) {
			for _, d := range s.Spec.Devices {
				health := d.Attributes[attr].StringValue
				if health == nil {
					t.Fatalf("domain %q: %s has no attribute %s: %v", domain, d.Name, attr, d.Attributes)
				}
				w, ok := want[d.Name]
				if !ok {
					t.Fatalf("unexpected device %s", d.Name)
				}
				if *s.Spec.NodeName == "node-b" {
					w.taints, w.health = nil, "Healthy"
				}
				if !sameTaints(d.Taints, w.taints) || *health != w.health {
					t.Errorf("domain %q: %s/%s: taints %+v health %s, want %+v %s", domain, *s.Spec.NodeName, d.Name, d.Taints, *health, w.taints, w.health)
				}
				seen++
			}
		}
		if seen != 6 {
			t.Errorf("domain %q: %d devices published, want 6 (an absent GPU stays published)", domain, seen)
		}
	}
}

// Every Intel category at once still makes a valid taint key (name part at most 63 characters).
func TestIntelHealthTaintKeyValid(t *testing.T) {
	var cats []string
	intel, _ := FamilyOf(FaultOverheat)
	for _, m := range intel.Modes {
		cats = addCategory(cats, intelHealthCategory(m))
	}
	key := intelHealthTaint(cats).Key
	if key != "HealthIssues-DeviceAbsent_memory_temperature.core.gpu" {
		t.Errorf("key %s", key)
	}
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		t.Errorf("%s: %v", key, msgs)
	}
}

// A campaign draws Intel faults per GPU like any other; with no fault left the GPUs are healthy
// again (the driver drops the taint once every category is healthy).
func TestIntelHealthCampaignAndRecovery(t *testing.T) {
	p := newPool(func(s *PoolSpec) {
		s.Profile = ProfileIntelGPU
		s.DeviceCount = 2
		s.FaultCampaigns = []FaultCampaign{{Seed: 1, Mode: FaultMemoryCritical, Fraction: ptr.To(float64(1))}}
	})
	if errs := p.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	check := func(wantKey, wantHealth string) {
		t.Helper()
		n := 0
		for _, s := range mustSlices(t, p) {
			for _, d := range s.Spec.Devices {
				n++
				var want []resourcev1.DeviceTaint
				if wantKey != "" {
					want = taint(wantKey, "", resourcev1.DeviceTaintEffectNoExecute)
				}
				if h := d.Attributes[AttrIntelHealth].StringValue; !sameTaints(d.Taints, want) || h == nil || *h != wantHealth {
					t.Errorf("%s: taints %+v health %v, want %q %s", d.Name, d.Taints, h, wantKey, wantHealth)
				}
			}
		}
		if n != 2 {
			t.Errorf("%d devices, want 2", n)
		}
	}
	check("HealthIssues-memory", "Unhealthy")
	p.Spec.FaultCampaigns = nil
	check("", "Healthy")
}
