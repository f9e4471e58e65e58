package devicestatus

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/simdevice"
)

func claim(results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 3},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}}}
}

func TestEntriesOnlyTheDriversDevicesInOrder(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	c := claim(
		resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "a.example", Pool: "p", Device: "gpu-1"},
		resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "b.example", Pool: "p", Device: "nic-0"},
		resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "a.example", Pool: "p", Device: "gpu-0", ShareID: ptr.To(types.UID("s1"))},
	)
	net := func(pool, dev string) *resourcev1.NetworkDeviceData {
		if dev == "gpu-0" {
			return &resourcev1.NetworkDeviceData{InterfaceName: "x"}
		}
		return nil
	}
	got := Entries(c, "a.example", net, now)
	if len(got) != 2 || got[0].Device != "gpu-1" || got[1].Device != "gpu-0" {
		t.Fatalf("entries %+v", got)
	}
	if got[1].ShareID == nil || *got[1].ShareID != "s1" || got[0].ShareID != nil {
		t.Errorf("share IDs %v %v", got[0].ShareID, got[1].ShareID)
	}
	if got[0].NetworkData != nil || got[1].NetworkData == nil || got[1].NetworkData.InterfaceName != "x" {
		t.Errorf("network data %+v %+v", got[0].NetworkData, got[1].NetworkData)
	}
	cond := got[0].Conditions
	if len(cond) != 1 || cond[0].Type != ConditionReady || cond[0].Status != metav1.ConditionTrue || cond[0].Reason != ReasonPrepared ||
		cond[0].ObservedGeneration != 3 || !cond[0].LastTransitionTime.Equal(&now) {
		t.Errorf("condition %+v", cond)
	}
	if Entries(&resourcev1.ResourceClaim{}, "a.example", nil, now) != nil {
		t.Error("an unallocated claim has entries")
	}
}

// Preparing again keeps the transition time, so the entries are equal and Apply writes nothing.
func TestEntriesKeepTransitionTime(t *testing.T) {
	first := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(first.Add(time.Hour))
	c := claim(resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "a.example", Pool: "p", Device: "gpu-0"})
	c.Status.Devices = Entries(c, "a.example", nil, first)
	again := Entries(c, "a.example", nil, later)
	if !again[0].Conditions[0].LastTransitionTime.Equal(&first) {
		t.Errorf("transition time moved to %v", again[0].Conditions[0].LastTransitionTime)
	}
	if !equalEntries(Owned(c, "a.example"), again) {
		t.Error("repeated entries differ from the written ones")
	}
	// A changed message (or anything else) is a difference.
	again[0].Conditions[0].Message = "other"
	if equalEntries(Owned(c, "a.example"), again) {
		t.Error("a changed condition compared equal")
	}
	if !equalEntries(nil, nil) || equalEntries(nil, again) {
		t.Error("empty comparisons")
	}
}

func TestSimulatedNetworkIsValidAndStable(t *testing.T) {
	a := SimulatedNetwork("ns/pool/node/0", "nic", 0)
	if again := SimulatedNetwork("ns/pool/node/0", "nic", 0); again.IPs[0] != a.IPs[0] || again.HardwareAddress != a.HardwareAddress {
		t.Errorf("not stable: %+v then %+v", a, again)
	}
	b := SimulatedNetwork("ns/pool/node/1", "nic", 1)
	if a.IPs[0] == b.IPs[0] || a.HardwareAddress == b.HardwareAddress {
		t.Errorf("two devices share addresses: %+v %+v", a, b)
	}
	if a.InterfaceName != "nic0" || b.InterfaceName != "nic1" {
		t.Errorf("interfaces %q %q", a.InterfaceName, b.InterfaceName)
	}
	for _, n := range []*resourcev1.NetworkDeviceData{a, b} {
		p, err := netip.ParsePrefix(n.IPs[0])
		if err != nil || !p.Addr().Is4() || p.Bits() != 16 || p.Addr().As4()[0] != 10 {
			t.Errorf("IP %q: %v", n.IPs[0], err)
		}
		parts := strings.Split(n.HardwareAddress, ":")
		if len(parts) != 6 {
			t.Fatalf("MAC %q", n.HardwareAddress)
		}
		first, err := strconv.ParseUint(parts[0], 16, 8)
		if err != nil || first&0x01 != 0 || first&0x02 == 0 {
			t.Errorf("MAC %q is not locally administered unicast", n.HardwareAddress)
		}
	}
}

func TestIsNetwork(t *testing.T) {
	for _, c := range []struct {
		spec simdevice.PoolSpec
		want bool
	}{
		{simdevice.PoolSpec{DeviceType: "nic"}, true},
		{simdevice.PoolSpec{DeviceType: "port", Profile: simdevice.ProfileMellanoxNIC}, true},
		{simdevice.PoolSpec{DeviceType: "gpu", Profile: simdevice.ProfileNvidiaGPU}, false},
	} {
		if got := IsNetwork(&c.spec); got != c.want {
			t.Errorf("%+v: %v", c.spec, got)
		}
	}
}
