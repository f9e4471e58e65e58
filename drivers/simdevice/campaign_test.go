package simdevice

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

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
		s.FaultCampaigns = []FaultCampaign{{Seed: 9, Mode: FaultXID, XID: ptr.To[int64](79), Fraction: ptr.To(0.1)}}
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
	p.Spec.FaultCampaigns = []FaultCampaign{{Seed: 1, Mode: FaultGPULost, Fraction: ptr.To(0.5)}}
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
		"healthy": {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultHealthy, Fraction: ptr.To(0.1)}} }, "spec.faultCampaigns[0].mode: Unsupported value"},
		"binding-failure": {func(s *PoolSpec) {
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultBindingFailure, Fraction: ptr.To(0.1)}}
		}, "spec.faultCampaigns[0].mode: Unsupported value"},
		"no fraction":   {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy}} }, "spec.faultCampaigns[0].fraction: Required value"},
		"fraction zero": {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, Fraction: ptr.To(0.0)}} }, "spec.faultCampaigns[0].fraction: Invalid value: 0"},
		"fraction zero and mean time": {func(s *PoolSpec) {
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, Fraction: ptr.To(0.0), MeanTimeToFault: "1h"}}
		}, "spec.faultCampaigns[0].fraction: Forbidden"},
		"fraction above 1": {func(s *PoolSpec) { s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, Fraction: ptr.To(1.01)}} },
			"spec.faultCampaigns[0].fraction"},
		"xid missing": {func(s *PoolSpec) {
			s.Profile = ProfileNvidiaGPU
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultXID, Fraction: ptr.To(float64(1))}}
		}, "spec.faultCampaigns[0].xid: Required"},
		"xid on ecc": {func(s *PoolSpec) {
			s.Profile = ProfileNvidiaGPU
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultECC, XID: ptr.To[int64](1), Fraction: ptr.To(float64(1))}}
		}, "spec.faultCampaigns[0].xid: Forbidden"},
		"driver mode, no profile": {func(s *PoolSpec) {
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultNVLink, Fraction: ptr.To(float64(1))}}
		}, "spec.faultCampaigns[0].mode"},
		"too many": {func(s *PoolSpec) {
			s.FaultCampaigns = make([]FaultCampaign, 17)
			for i := range s.FaultCampaigns {
				s.FaultCampaigns[i] = FaultCampaign{Mode: FaultUnhealthy, Fraction: ptr.To(0.1)}
			}
		}, "spec.faultCampaigns: Too many"},
		"fraction and mean time": {func(s *PoolSpec) {
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, Fraction: ptr.To(0.1), MeanTimeToFault: "1h"}}
		}, "spec.faultCampaigns[0].fraction: Forbidden: set either fraction"},
		"mean time zero": {func(s *PoolSpec) {
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, MeanTimeToFault: "0s"}}
		}, "spec.faultCampaigns[0].meanTimeToFault: Invalid value: \"0s\": must be positive"},
		"mean time not a duration": {func(s *PoolSpec) {
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, MeanTimeToFault: "3 days"}}
		}, "spec.faultCampaigns[0].meanTimeToFault: Invalid value: \"3 days\": must be a Go duration"},
		"negative start": {func(s *PoolSpec) {
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, MeanTimeToFault: "1h", Start: "-1m"}}
		}, "spec.faultCampaigns[0].start: Invalid value"},
		"window without mean time": {func(s *PoolSpec) {
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, Fraction: ptr.To(0.5), Duration: "1h"}}
		}, "spec.faultCampaigns[0].duration: Forbidden: only with meanTimeToFault"},
		"device groups": {func(s *PoolSpec) {
			s.DeviceType, s.DeviceCount = "", 0
			s.DeviceGroups = []DeviceGroup{{DeviceType: "gpu", Count: 1}}
			s.FaultCampaigns = []FaultCampaign{{Mode: FaultUnhealthy, Fraction: ptr.To(0.1)}}
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

// TestTimedFaultCampaign: with meanTimeToFault each device fails once, at its own time after
// start (counted from the pool's creation), within the window; faults stay once caused, the
// published slices follow the clock, and NextCampaignFault names the next onset.
func TestTimedFaultCampaign(t *testing.T) {
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("n-%02d", i))
	}
	mean, start, window := 10*time.Hour, 30*time.Minute, 5*time.Hour
	p := newPool(func(s *PoolSpec) {
		s.DeviceCount, s.TargetNodes = 8, names
		s.FaultCampaigns = []FaultCampaign{{Seed: 4, Mode: FaultUnhealthy, MeanTimeToFault: "10h", Start: "30m", Duration: "5h"}}
	})
	if errs := p.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	hit := func(elapsed time.Duration) map[string]bool {
		out := map[string]bool{}
		for _, n := range names {
			for _, f := range p.Spec.CampaignFaults(n, elapsed) {
				out[n+"/"+f.Device.String()] = true
			}
		}
		return out
	}
	if n := len(hit(start)); n != 0 {
		t.Errorf("%d faults at the campaign's start", n)
	}
	prev := map[string]bool{}
	for _, at := range []time.Duration{time.Hour, 2 * time.Hour, 4 * time.Hour, start + window, 100 * time.Hour} {
		now := hit(at)
		for k := range prev {
			if !now[k] {
				t.Errorf("%s: fault at %v gone at %v", k, at-time.Hour, at)
			}
		}
		prev = now
	}
	// 400 devices over a 5h window with a 10h mean: 1-e^-0.5 = 39% of them (4 sd: 31%..47%).
	if n := len(prev); n < 124 || n > 190 {
		t.Errorf("%d of 400 devices failed within the window, want about 157", n)
	}
	for k := range prev {
		node, dev, _ := strings.Cut(k, "/")
		i, _ := strconv.Atoi(dev)
		if at := start + CampaignOnset(CampaignDraw(4, node, i), mean); at >= start+window {
			t.Errorf("%s failed at %v, after the window", k, at)
		}
	}
	// The next onset after 1h is a fault not yet caused at 1h and caused then.
	next, ok := p.Spec.NextCampaignFault(names, time.Hour)
	if !ok || next <= 0 {
		t.Fatalf("next fault after 1h: %v %v", next, ok)
	}
	if a, b := len(hit(time.Hour+next-time.Nanosecond)), len(hit(time.Hour+next)); b != a+1 || a != len(hit(time.Hour)) {
		t.Errorf("faults just before the next onset %d, at it %d, at 1h %d", a, b, len(hit(time.Hour)))
	}
	if _, ok := p.Spec.NextCampaignFault(names, start+window); ok {
		t.Error("a fault after the window closed")
	}
	// Slices follow the clock from the pool's creation.
	created := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	p.CreationTimestamp = metav1.NewTime(created)
	nodes := make([]*corev1.Node, len(names))
	for i, n := range names {
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
	}
	tainted := func(now time.Time) int {
		sl, err := DesiredSlicesAt(p, nodes, now)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range sl {
			for _, d := range s.Spec.Devices {
				n += len(d.Taints)
			}
		}
		return n
	}
	if got, want := tainted(created.Add(2*time.Hour)), len(hit(2*time.Hour)); got != want || got == 0 {
		t.Errorf("%d devices tainted 2h after creation, want %d", got, want)
	}
	if got := tainted(created.Add(-time.Hour)); got != 0 {
		t.Errorf("%d devices tainted before creation", got)
	}
}
