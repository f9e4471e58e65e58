package simdevice

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxFaultCampaigns bounds spec.faultCampaigns.
const MaxFaultCampaigns = 16

// CampaignModes are the modes a fault campaign can give: every fault mode but healthy (no fault)
// and binding-failure (binding conditions are per device group, and campaigns are not allowed
// with deviceGroups).
var CampaignModes = []FaultMode{FaultUnhealthy, FaultCapacityExhausted, FaultDisappear, FaultXID, FaultECC, FaultNVLink, FaultGPULost, FaultUnmonitored, FaultFabricDetached}

// CampaignDraw is a physical device's number in [0, 1) for a campaign with seed: the top 53 bits
// of SHA-256(seed, node, index); index -1 draws for the whole node. Each device's draw is
// independent of every other device and node, so adding nodes never changes whether an existing
// device is hit, and a larger fraction only adds devices. drivers/faultcampaign uses the same
// draws for its time-based campaigns.
func CampaignDraw(seed int64, node string, index int) float64 {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(node))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(index)))
	sum := h.Sum(nil)
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// CampaignFaults returns the faults the pool's fault campaigns cause on node, in campaign then
// device order: one per hit device, or for a node-wide mode (NodeWide) the node's faults when
// the node is hit. The pool must be valid.
func (s *PoolSpec) CampaignFaults(node string) []Fault {
	var out []Fault
	for _, c := range s.FaultCampaigns {
		f := Fault{Node: node, Mode: c.Mode, XID: c.XID}
		if NodeWide(c.Mode) {
			if CampaignDraw(c.Seed, node, -1) < c.Fraction {
				out = append(out, NodeFaults(f, s.DeviceCount)...)
			}
			continue
		}
		for i := range s.DeviceCount {
			if CampaignDraw(c.Seed, node, i) < c.Fraction {
				f.Device = intstr.FromInt32(int32(i))
				out = append(out, f)
			}
		}
	}
	return out
}

// NodeWide reports whether a campaign of mode m hits whole nodes (one draw per node, index -1)
// rather than devices: gpu-lost, which the driver cannot pin on one GPU, and fabric-detached,
// a node's NVLink fabric going down (its NVSwitch trays or fabric manager), which takes every
// GPU of the node out of the clique.
func NodeWide(m FaultMode) bool { return m == FaultGPULost || m == FaultFabricDetached }

// NodeFaults are the faults a node-wide campaign gives a hit node of a pool with devices
// physical devices, f carrying the node and mode: gpu-lost once (device 0: the driver taints
// every device anyway), fabric-detached on every device.
func NodeFaults(f Fault, devices int) []Fault {
	if f.Mode != FaultFabricDetached {
		f.Device = intstr.FromInt32(0)
		return []Fault{f}
	}
	out := make([]Fault, devices)
	for i := range out {
		out[i] = f
		out[i].Device = intstr.FromInt32(int32(i))
	}
	return out
}

// validateCampaigns checks spec.faultCampaigns as the CRD does.
func (s *PoolSpec) validateCampaigns(sp *field.Path) field.ErrorList {
	cp := sp.Child("faultCampaigns")
	errs := tooMany(cp, len(s.FaultCampaigns), MaxFaultCampaigns)
	if len(s.FaultCampaigns) > 0 && len(s.DeviceGroups) > 0 {
		errs = append(errs, field.Forbidden(cp, "fault campaigns draw over deviceCount devices per node: not with deviceGroups"))
	}
	for i, c := range s.FaultCampaigns {
		p := cp.Index(i)
		if !slices.Contains(CampaignModes, c.Mode) {
			errs = append(errs, field.NotSupported(p.Child("mode"), c.Mode, CampaignModes))
		}
		errs = append(errs, s.validateDriverFault(p, Fault{Mode: c.Mode, XID: c.XID})...)
		if !(c.Fraction > 0 && c.Fraction <= 1) {
			errs = append(errs, field.Invalid(p.Child("fraction"), fmt.Sprint(c.Fraction), "must be more than 0 and at most 1 (the fraction of devices hit)"))
		}
	}
	return errs
}
