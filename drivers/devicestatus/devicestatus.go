// Package devicestatus builds and writes a ResourceClaim's status.devices the way a DRA kubelet
// plugin that reports device status does once it prepared the claim's devices on its node: one
// entry per allocated device of the driver, a Ready condition, and network data for NIC-like
// devices. Which devices' drivers report it is the pool's choice (Reports). Both the node agent
// (draforge kubelet-plugin) and the simulated kubelet call it, so real and simulated nodes
// publish the same thing.
//
// Two ways to write, both used by real drivers. Apply is a server-side apply of status with the
// driver name as field manager, as the upstream DRA test driver does (kubernetes
// test/e2e/dra/test-driver/app/kubeletplugin.go): status.devices is a map list keyed by
// (driver, pool, device, shareID), so each driver owns exactly its entries and applying an
// empty list removes them without touching other drivers'. Update is an UpdateStatus of the
// claim as read, as dra-example-driver does after its GET: it costs kube-apiserver about a
// quarter less CPU per write (2.3 against 3.1 ms on the bench machine) than the apply's
// structured merge, and the read resourceVersion turns a concurrent change into a Conflict.
package devicestatus

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"reflect"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"

	"github.com/draforge/draforge/drivers/simdevice"
)

// ConditionReady is the condition every prepared device carries.
const (
	ConditionReady = "Ready"
	ReasonPrepared = "Prepared"
)

// Network returns the network data of a device, or nil when it is not NIC-like.
type Network func(pool, device string) *resourcev1.NetworkDeviceData

// Reports tells whether the driver writes status.devices for a device of pool (see
// simdevice.PoolSpec.ReportsDeviceStatus): most drivers write none.
type Reports func(pool, device string) bool

// All reports every device.
func All(string, string) bool { return true }

// Entries returns the status.devices entries of driver for the claim's allocation, in
// allocation order, for the devices reports accepts. A condition that is already Ready=True in
// the claim keeps its lastTransitionTime, so preparing twice yields equal entries (and no
// write, see Apply).
func Entries(claim *resourcev1.ResourceClaim, driver string, reports Reports, network Network, now metav1.Time) []resourcev1.AllocatedDeviceStatus {
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []resourcev1.AllocatedDeviceStatus
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != driver || !reports(r.Pool, r.Device) {
			continue
		}
		e := resourcev1.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
		if r.ShareID != nil {
			e.ShareID = ptrString(string(*r.ShareID))
		}
		since := now
		if old := find(claim.Status.Devices, e); old != nil {
			for _, c := range old.Conditions {
				if c.Type == ConditionReady && c.Status == metav1.ConditionTrue {
					since = c.LastTransitionTime
				}
			}
		}
		e.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonPrepared,
			Message: "prepared on the node by the DRA kubelet plugin", ObservedGeneration: claim.Generation, LastTransitionTime: since}}
		if network != nil {
			e.NetworkData = network(r.Pool, r.Device)
		}
		out = append(out, e)
	}
	return out
}

func find(list []resourcev1.AllocatedDeviceStatus, e resourcev1.AllocatedDeviceStatus) *resourcev1.AllocatedDeviceStatus {
	for i := range list {
		d := &list[i]
		if d.Driver == e.Driver && d.Pool == e.Pool && d.Device == e.Device && reflect.DeepEqual(d.ShareID, e.ShareID) {
			return d
		}
	}
	return nil
}

// Owned returns the claim's current entries of driver, in claim order.
func Owned(claim *resourcev1.ResourceClaim, driver string) []resourcev1.AllocatedDeviceStatus {
	var out []resourcev1.AllocatedDeviceStatus
	for _, d := range claim.Status.Devices {
		if d.Driver == driver {
			out = append(out, d)
		}
	}
	return out
}

// Apply makes the driver's entries of the claim equal to entries (nil removes them) with a
// server-side apply of status as field manager driver. It writes nothing when the claim already
// shows exactly these entries. The apply carries the claim's UID, so a claim deleted and
// re-created under the same name is never written (kube-apiserver answers 422 Invalid,
// metadata.uid immutable).
func Apply(ctx context.Context, client resourceclient.ResourceV1Interface, claim *resourcev1.ResourceClaim, driver string, entries []resourcev1.AllocatedDeviceStatus) error {
	if Unchanged(claim, driver, entries) {
		return nil
	}
	return ApplyByName(ctx, client, claim.Namespace, claim.Name, claim.UID, driver, entries)
}

// ApplyByName is Apply without reading the claim first (for unprepare, where only the name and
// UID are known); it always writes.
func ApplyByName(ctx context.Context, client resourceclient.ResourceV1Interface, namespace, name string, uid types.UID, driver string, entries []resourcev1.AllocatedDeviceStatus) error {
	status := resourceac.ResourceClaimStatus()
	for _, e := range entries {
		d := resourceac.AllocatedDeviceStatus().WithDriver(e.Driver).WithPool(e.Pool).WithDevice(e.Device)
		if e.ShareID != nil {
			d.WithShareID(*e.ShareID)
		}
		for _, c := range e.Conditions {
			d.WithConditions(metav1ac.Condition().WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).
				WithMessage(c.Message).WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
		}
		if n := e.NetworkData; n != nil {
			nd := resourceac.NetworkDeviceData().WithInterfaceName(n.InterfaceName).WithHardwareAddress(n.HardwareAddress).WithIPs(n.IPs...)
			d.WithNetworkData(nd)
		}
		status.WithDevices(d)
	}
	ac := resourceac.ResourceClaim(name, namespace).WithUID(uid).WithStatus(status)
	if _, err := client.ResourceClaims(namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: driver, Force: true}); err != nil {
		return fmt.Errorf("status.devices of ResourceClaim %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Update makes the driver's entries of the claim equal to entries (nil removes them) with an
// UpdateStatus of claim as read: other drivers' entries stay as they are, and a claim changed
// (or deleted and re-created) since it was read is a Conflict, never overwritten. It writes
// nothing when the claim already shows exactly these entries.
func Update(ctx context.Context, client resourceclient.ResourceV1Interface, claim *resourcev1.ResourceClaim, driver string, entries []resourcev1.AllocatedDeviceStatus) error {
	if Unchanged(claim, driver, entries) {
		return nil
	}
	c := claim.DeepCopy()
	c.Status.Devices = Replaced(claim.Status.Devices, driver, entries)
	if _, err := client.ResourceClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: driver}); err != nil {
		return fmt.Errorf("status.devices of ResourceClaim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// Unchanged reports whether the claim already shows exactly entries as driver's status.devices.
func Unchanged(claim *resourcev1.ResourceClaim, driver string, entries []resourcev1.AllocatedDeviceStatus) bool {
	return equalEntries(Owned(claim, driver), entries)
}

// Replaced returns devices with driver's entries replaced by entries: they take the place of the
// driver's first entry (the end when it had none), other drivers' entries keep their order.
func Replaced(devices []resourcev1.AllocatedDeviceStatus, driver string, entries []resourcev1.AllocatedDeviceStatus) []resourcev1.AllocatedDeviceStatus {
	out := make([]resourcev1.AllocatedDeviceStatus, 0, len(devices)+len(entries))
	placed := false
	for _, d := range devices {
		if d.Driver != driver {
			out = append(out, d)
			continue
		}
		if !placed {
			out, placed = append(out, entries...), true
		}
	}
	if !placed {
		out = append(out, entries...)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func equalEntries(a, b []resourcev1.AllocatedDeviceStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Driver != y.Driver || x.Pool != y.Pool || x.Device != y.Device || !reflect.DeepEqual(x.ShareID, y.ShareID) ||
			!reflect.DeepEqual(x.NetworkData, y.NetworkData) || len(x.Conditions) != len(y.Conditions) {
			return false
		}
		for j := range x.Conditions {
			c, d := x.Conditions[j], y.Conditions[j]
			if c.Type != d.Type || c.Status != d.Status || c.Reason != d.Reason || c.Message != d.Message ||
				c.ObservedGeneration != d.ObservedGeneration || !c.LastTransitionTime.Equal(&d.LastTransitionTime) {
				return false
			}
		}
	}
	return true
}

// IsNetwork reports whether a pool's devices are NIC-like: a network profile (mellanox-nic,
// example-net, sriov-vf) or device type "nic".
func IsNetwork(spec *simdevice.PoolSpec) bool {
	switch spec.Profile {
	case simdevice.ProfileMellanoxNIC, simdevice.ProfileExampleNet, simdevice.ProfileSRIOVVF:
		return true
	}
	return spec.DeviceType == "nic"
}

// NetworkFor is the network data of device d of pool p on node, as the kubelet plugin and the
// simulated kubelet both publish it: nil unless the pool is NIC-like (IsNetwork); interface
// "<deviceType><index>" for devices with the built-in index attribute, the device name
// otherwise; addresses seeded by pool, node and device.
func NetworkFor(p *simdevice.Pool, node string, d *resourcev1.Device) *resourcev1.NetworkDeviceData {
	if !IsNetwork(&p.Spec) {
		return nil
	}
	iface := d.Name
	if a, ok := d.Attributes[resourcev1.QualifiedName(simdevice.AttrIndex)]; ok && a.IntValue != nil {
		iface = fmt.Sprintf("%s%d", p.Spec.DeviceType, *a.IntValue)
	}
	return SimulatedNetwork(p.Namespace+"/"+p.Name+"/"+node+"/"+d.Name, iface)
}

// SimulatedNetwork is the network data of a simulated NIC: the interface name given and an
// address and MAC derived from seed (stable per device and node, so re-preparing gives the same
// data). Addresses come from 10.0.0.0/8 and MACs are locally administered unicast.
func SimulatedNetwork(seed, iface string) *resourcev1.NetworkDeviceData {
	h := sha256.Sum256([]byte(seed))
	ip := netip.AddrFrom4([4]byte{10, h[0], h[1], 1 + h[2]%254})
	mac := fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", (h[3]|0x02)&0xfe, h[4], h[5], h[6], h[7], h[8])
	return &resourcev1.NetworkDeviceData{
		InterfaceName:   iface,
		IPs:             []string{netip.PrefixFrom(ip, 16).String()},
		HardwareAddress: mac,
	}
}

func ptrString(s string) *string { return &s }
