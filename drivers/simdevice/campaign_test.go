package simdevice

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestFaultCampaignPublishes: a campaign's hit devices get its fault's taint on every targeted
// node, the same devices on every run, and spec.faults still apply after it.
func TestFaultCampaignPublishes(t *testing.T) {
	var nodes []*corev1.Node
	var names []string
	for i := range 80 { // the pool targets the first 64 (targetNodes' limit)
		n := fmt.Sprintf("n-%03d", i)
		names = append(names, n)
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	p := newPool(func(s *PoolSpec) {
		s.Profile, s.DeviceCount, s.TargetNodes = ProfileNvidiaGPU, 8, names[:64]
		s.FaultCampaigns = []FaultCampaign{{Seed: 9, Mode: FaultXID, XID: ptr.To[int64](79), Fraction: 0.1}}
		s.Faults = []Fault{{Device: intstr.FromInt32(0), Node: "n-000", Mode: FaultXID, XID: ptr.To[int64](43)}}
	})
	if errs := p.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	slices, err := DesiredSlices(p, nodes)
	if err != nil {
		t.Fatal(err)
	}
	hit := map[string]string{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			for _, tn := range d.Taints {
				hit[*s.Spec.NodeName+"/"+d.Name] = tn.Value + ":" + string(tn.Effect)
			}
		}
	}
	// 64 nodes × 8 GPUs at 10%: about 51 (4 standard deviations: 24..78).
	if len(hit) < 24 || len(hit) > 78 {
		t.Errorf("%d devices hit, want about 51", len(hit))
	}
	for dev, v := range hit {
		node, name, _ := strings.Cut(dev, "/")
		i := 0
		fmt.Sscanf(name, "gpu-%d", &i)
		want := "79:NoSchedule"
		if dev == "n-000/gpu-0" {
			want = "43:None" // the listed fault is the later event
		} else if CampaignDraw(9, node, i) >= 0.1 {
			t.Errorf("%s tainted without being drawn", dev)
		}
		if v != want {
			t.Errorf("%s: %s, want %s", dev, v, want)
		}
	}
	again, _ := DesiredSlices(p, nodes)
	for i := range slices {
		if !SlicesEqual(slices[i], again[i]) {
			t.Fatal("a second run published other slices")
		}
	}
	// gpu-lost campaigns draw per node and taint every device of a hit node.
	p.Spec.FaultCampaigns = []FaultCampaign{{Seed: 1, Mode: FaultGPULost, Fraction: 0.5}}
	p.Spec.Faults = nil
	for _, s := range mustSlices(t, p) {
		lost := CampaignDraw(1, *s.Spec.NodeName, -1) < 0.5
		for _, d := range s.Spec.Devices {
			if got := len(d.Taints) == 1 && d.Taints[0].Key == TaintNvidiaGPULost; got != lost {
				t.Errorf("%s/%s: taints %+v, node drawn lost %v", *s.Spec.NodeName, d.Name, d.Taints, lost)
			}
		}
	}
}

func TestValidateFaultCampaigns(t *testing.T) {
	for name, tc := range map[string]struct {
		mut  func(*PoolSpec)
		want string
	}{
		"healthy":         {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultHealthy, Fraction: 0.1}} }, "spec.faultCampaigns[0].mode: Unsupported value"},
		"binding-failure": {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultBindingFailure, Fraction: 0.1}} }, "spec.faultCampaigns[0].mode: Unsupported value"},
		"fraction zero":   {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy}} }, "spec.faultCampaigns[0].fraction"},
		"fraction above 1": {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, Fraction: 1.01}} },
			"spec.faultCampaigns[0].fraction"},
		"xid missing": {func(s *PoolSpec) {
			s.Profile = ProfileNvidiaGPU
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultXID, Fraction: 1}}
		}, "spec.faultCampaigns[0].xid: Required"},
		"xid on ecc": {func(s *PoolSpec) {
			s.Profile = ProfileNvidiaGPU
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultECC, XID: ptr.To[int64](1), Fraction: 1}}
		}, "spec.faultCampaigns[0].xid: Forbidden"},
		"driver mode, no profile": {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultNVLink, Fraction: 1}} }, "spec.faultCampaigns[0].mode"},
		"too many": {func(s *PoolSpec) {
			s.FaultCampaigns = make([]FaultCampaign, 17)
			for i := range s.FaultCampaigns {
				s.FaultCampaigns[i] = FaultCampaign{Mode: FaultUnhealthy, Fraction: 0.1}
			}
		}, "spec.faultCampaigns: Too many"},
		"device groups": {func(s *PoolSpec) {
			s.DeviceType, s.DeviceCount = "", 0
			s.DeviceGroups = []DeviceGroup{{DeviceType: "gpu", Count: 1}}
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, Fraction: 0.1}}
		}, "spec.faultCampaigns: Forbidden"},
	} {
		t.Run(name, func(t *testing.T) {
			var all []string
			for _, e := range newPool(tc.mut).Validate() {
				all = append(all, e.Error())
			}
			if joined := strings.Join(all, "\n"); !strings.Contains(joined, tc.want) {
				t.Errorf("want %q in\n%s", tc.want, joined)
			}
		})
	}
}
