package devicestatus

import (
	"context"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
	got := Entries(c, "a.example", All, net, now)
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
	if Entries(&resourcev1.ResourceClaim{}, "a.example", All, nil, now) != nil {
		t.Error("an unallocated claim has entries")
	}
}

// Preparing again keeps the transition time, so the entries are equal and Apply writes nothing.
func TestEntriesKeepTransitionTime(t *testing.T) {
	first := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(first.Add(time.Hour))
	c := claim(resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "a.example", Pool: "p", Device: "gpu-0"})
	c.Status.Devices = Entries(c, "a.example", All, nil, first)
	again := Entries(c, "a.example", All, nil, later)
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
	a := SimulatedNetwork("ns/pool/node/0", "nic0")
	if again := SimulatedNetwork("ns/pool/node/0", "nic0"); again.IPs[0] != a.IPs[0] || again.HardwareAddress != a.HardwareAddress {
		t.Errorf("not stable: %+v then %+v", a, again)
	}
	b := SimulatedNetwork("ns/pool/node/1", "nic1")
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
		{simdevice.PoolSpec{DeviceType: "vf", Profile: simdevice.ProfileSRIOVVF}, true},
		{simdevice.PoolSpec{DeviceType: "net", Profile: simdevice.ProfileExampleNet}, true},
		{simdevice.PoolSpec{DeviceType: "gpu", Profile: simdevice.ProfileNvidiaGPU}, false},
	} {
		if got := IsNetwork(&c.spec); got != c.want {
			t.Errorf("%+v: %v", c.spec, got)
		}
	}
}

func TestNetworkFor(t *testing.T) {
	nic := &simdevice.Pool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nics"},
		Spec: simdevice.PoolSpec{DeviceType: "nic", DriverName: "d.example"}}
	indexed := &resourcev1.Device{Name: "nic-3", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		simdevice.AttrIndex: {IntValue: ptr.To[int64](3)}}}
	if n := NetworkFor(nic, "node-a", indexed); n == nil || n.InterfaceName != "nic3" || n.IPs[0] != SimulatedNetwork("ns/nics/node-a/nic-3", "nic3").IPs[0] {
		t.Errorf("indexed NIC: %+v", n)
	}
	vf := &simdevice.Pool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vfs"},
		Spec: simdevice.PoolSpec{DeviceType: "vf", Profile: simdevice.ProfileSRIOVVF}}
	if n := NetworkFor(vf, "node-a", &resourcev1.Device{Name: "0000-18-00-2"}); n == nil || n.InterfaceName != "0000-18-00-2" {
		t.Errorf("VF without index: %+v", n)
	}
	if n := NetworkFor(vf, "node-b", &resourcev1.Device{Name: "0000-18-00-2"}); n.HardwareAddress == NetworkFor(vf, "node-a", &resourcev1.Device{Name: "0000-18-00-2"}).HardwareAddress {
		t.Error("the same device on two nodes got the same MAC")
	}
	gpu := &simdevice.Pool{Spec: simdevice.PoolSpec{DeviceType: "gpu", Profile: simdevice.ProfileNvidiaGPU}}
	if NetworkFor(gpu, "node-a", &resourcev1.Device{Name: "gpu-0"}) != nil {
		t.Error("a GPU got network data")
	}
}

func TestReplacedKeepsOtherDrivers(t *testing.T) {
	a1 := resourcev1.AllocatedDeviceStatus{Driver: "a", Pool: "p", Device: "1"}
	b1 := resourcev1.AllocatedDeviceStatus{Driver: "b", Pool: "p", Device: "1"}
	b2 := resourcev1.AllocatedDeviceStatus{Driver: "b", Pool: "p", Device: "2"}
	c1 := resourcev1.AllocatedDeviceStatus{Driver: "c", Pool: "p", Device: "1"}
	nb := resourcev1.AllocatedDeviceStatus{Driver: "b", Pool: "q", Device: "9"}
	for _, tc := range []struct {
		name    string
		devices []resourcev1.AllocatedDeviceStatus
		entries []resourcev1.AllocatedDeviceStatus
		want    []resourcev1.AllocatedDeviceStatus
	}{
		{"in place of the driver's first entry", []resourcev1.AllocatedDeviceStatus{a1, b1, c1, b2}, []resourcev1.AllocatedDeviceStatus{nb}, []resourcev1.AllocatedDeviceStatus{a1, nb, c1}},
		{"appended when the driver had none", []resourcev1.AllocatedDeviceStatus{a1, c1}, []resourcev1.AllocatedDeviceStatus{nb}, []resourcev1.AllocatedDeviceStatus{a1, c1, nb}},
		{"removed", []resourcev1.AllocatedDeviceStatus{a1, b1, b2}, nil, []resourcev1.AllocatedDeviceStatus{a1}},
		{"nothing left is nil", []resourcev1.AllocatedDeviceStatus{b1}, nil, nil},
	} {
		if got := Replaced(tc.devices, "b", tc.entries); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Update writes the claim as read (its resourceVersion: kube-apiserver refuses a stale one),
// changes only the driver's entries, and writes nothing when they are already there.
func TestUpdate(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", ResourceVersion: "7"},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "r", Driver: "gpu.example.com", Pool: "p", Device: "gpu-0"}, {Request: "n", Driver: "nic.example.com", Pool: "p", Device: "nic-0"}}}},
			Devices: []resourcev1.AllocatedDeviceStatus{{Driver: "nic.example.com", Pool: "p", Device: "nic-0"}},
		},
	}
	client := fake.NewClientset(claim)
	var updates []*resourcev1.ResourceClaim
	client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		if u.GetSubresource() != "status" {
			t.Errorf("update of %q, want status", u.GetSubresource())
		}
		updates = append(updates, u.GetObject().(*resourcev1.ResourceClaim))
		return false, nil, nil
	})
	entries := Entries(claim, "gpu.example.com", All, nil, now)
	if err := Update(context.Background(), client.ResourceV1(), claim, "gpu.example.com", entries); err != nil {
		t.Fatal(err)
	}
	if len(updates) != 1 {
		t.Fatalf("%d updates, want 1", len(updates))
	}
	got := updates[0]
	if got.ResourceVersion != "7" {
		t.Errorf("resourceVersion %q, want the read one", got.ResourceVersion)
	}
	if len(got.Status.Devices) != 2 || got.Status.Devices[0].Driver != "nic.example.com" || got.Status.Devices[1].Device != "gpu-0" {
		t.Errorf("devices %+v, want the NIC entry kept and gpu-0 added", got.Status.Devices)
	}
	if len(claim.Status.Devices) != 1 {
		t.Errorf("the read claim was changed: %+v", claim.Status.Devices)
	}
	if err := Update(context.Background(), client.ResourceV1(), got, "gpu.example.com", entries); err != nil || len(updates) != 1 {
		t.Errorf("equal entries: err %v, %d updates, want no write", err, len(updates))
	}
}
