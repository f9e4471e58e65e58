package simdevice

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// MaxFaultCampaigns bounds spec.faultCampaigns.
const MaxFaultCampaigns = 16

// CampaignModes are the modes a fault campaign can give: every fault mode but healthy (no fault)
// and binding-failure (binding conditions are per device group, and campaigns are not allowed
// with deviceGroups).
var CampaignModes = append([]FaultMode{FaultUnhealthy, FaultCapacityExhausted, FaultDisappear}, DriverFaultModes...)

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

// CampaignFaults returns the faults the pool's fault campaigns have caused on node by elapsed
// (the time since the pool's creation), in campaign then device order: one per hit device, or
// for a node-wide mode (NodeWide) the node's faults when the node is hit. The pool must be valid.
func (s *PoolSpec) CampaignFaults(node string, elapsed time.Duration) []Fault {
	var out []Fault
	for _, c := range s.FaultCampaigns {
		f := Fault{Node: node, Mode: c.Mode, XID: c.XID}
		tm := c.timing()
		hit := func(index int) bool {
			at, ok := tm.onset(CampaignDraw(c.Seed, node, index))
			return ok && at <= elapsed
		}
		if NodeWide(c.Mode) {
			if hit(-1) {
				out = append(out, NodeFaults(f, s.DeviceCount)...)
			}
			continue
		}
		for i := range s.DeviceCount {
			if hit(i) {
				f.Device = intstr.FromInt32(int32(i))
				out = append(out, f)
			}
		}
	}
	return out
}

// NextCampaignFault returns how long after elapsed the pool's timed campaigns cause their next
// fault on one of nodes, and false when none will.
func (s *PoolSpec) NextCampaignFault(nodes []string, elapsed time.Duration) (time.Duration, bool) {
	var next time.Duration
	found := false
	for _, c := range s.FaultCampaigns {
		if !c.Timed() {
			continue
		}
		indexes := []int{-1}
		if !NodeWide(c.Mode) {
			indexes = make([]int, s.DeviceCount)
			for i := range indexes {
				indexes[i] = i
			}
		}
		tm := c.timing()
		for _, node := range nodes {
			for _, i := range indexes {
				if at, ok := tm.onset(CampaignDraw(c.Seed, node, i)); ok && at > elapsed && (!found || at-elapsed < next) {
					next, found = at-elapsed, true
				}
			}
		}
	}
	return next, found
}

// campaignTiming is a campaign's times, parsed: a fraction campaign has mean 0.
type campaignTiming struct {
	fraction              float64
	mean, start, duration time.Duration
}

// timing parses the campaign's durations (validated: a bad one reads as 0).
func (c FaultCampaign) timing() campaignTiming {
	parse := func(s string) time.Duration {
		d, _ := time.ParseDuration(s)
		return d
	}
	return campaignTiming{fraction: ptr.Deref(c.Fraction, 0), mean: parse(c.MeanTimeToFault), start: parse(c.Start), duration: parse(c.Duration)}
}

// onset is when a device (or node) with draw u is hit, after the pool's creation, and whether it
// ever is: at once when u is below the fraction, or for a timed campaign at start plus
// CampaignOnset(u, mean) unless that is duration or more after start.
func (t campaignTiming) onset(u float64) (time.Duration, bool) {
	if t.mean <= 0 {
		return 0, u < t.fraction
	}
	after := CampaignOnset(u, t.mean)
	if t.duration > 0 && after >= t.duration {
		return 0, false
	}
	if after > math.MaxInt64-t.start {
		return math.MaxInt64, true
	}
	return t.start + after, true
}

// CampaignOnset is the time of a fault with draw u whose waiting time is exponentially
// distributed with the given mean: the inverse of the distribution at u, saturating at the
// largest duration. drivers/faultcampaign's rate campaigns use it with the mean n/R.
func CampaignOnset(u float64, mean time.Duration) time.Duration {
	d := -math.Log1p(-u) * float64(mean)
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
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
		switch {
		case c.Timed() && c.Fraction != nil:
			errs = append(errs, field.Forbidden(p.Child("fraction"), "set either fraction (devices hit at once) or meanTimeToFault (devices hit over time), not both"))
		case c.Timed():
			if d, err := campaignDuration(c.MeanTimeToFault); err != nil {
				errs = append(errs, field.Invalid(p.Child("meanTimeToFault"), c.MeanTimeToFault, err.Error()))
			} else if d <= 0 {
				errs = append(errs, field.Invalid(p.Child("meanTimeToFault"), c.MeanTimeToFault, "must be positive"))
			}
			for name, v := range map[string]string{"start": c.Start, "duration": c.Duration} {
				if _, err := campaignDuration(v); v != "" && err != nil {
					errs = append(errs, field.Invalid(p.Child(name), v, err.Error()))
				}
			}
		case c.Fraction == nil:
			errs = append(errs, field.Required(p.Child("fraction"), "the fraction of devices hit, more than 0 and at most 1, or set meanTimeToFault"))
		case !(*c.Fraction > 0 && *c.Fraction <= 1):
			errs = append(errs, field.Invalid(p.Child("fraction"), *c.Fraction, "must be more than 0 and at most 1 (the fraction of devices hit), or set meanTimeToFault"))
		}
		if !c.Timed() {
			if c.Start != "" {
				errs = append(errs, field.Forbidden(p.Child("start"), "only with meanTimeToFault"))
			}
			if c.Duration != "" {
				errs = append(errs, field.Forbidden(p.Child("duration"), "only with meanTimeToFault"))
			}
		}
	}
	return errs
}

// campaignDurationPattern is the grammar of a campaign's durations, as the CRD and the CUE
// schema give it: a non-negative Go duration with units (time.ParseDuration also takes "-1h"
// and a bare "0").
var campaignDurationPattern = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// campaignDuration parses one of a campaign's durations.
func campaignDuration(s string) (time.Duration, error) {
	if !campaignDurationPattern.MatchString(s) {
		return 0, errors.New(`must be a Go duration such as "500h" or "1h30m"`)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New(`must be a Go duration such as "500h" or "1h30m" of at most 2562047h (about 292 years)`)
	}
	return d, nil
}
