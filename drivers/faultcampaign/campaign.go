// Package faultcampaign expands a seeded fault campaign (a fraction of a pool's devices, or a
// rate of faults per hour over a time window, of one fault mode) into the SimulatedDevicePool
// faults it has caused at a given time. It is pure and deterministic: the same campaign, nodes
// and time give the same faults, whatever the order of the nodes.
//
// Each physical device (node, index) draws one number u in [0, 1) from a hash of (seed, node,
// index) (simdevice.CampaignDraw, the draws of spec.faultCampaigns), independent of every other device, so adding nodes or devices never changes whether an
// existing device is hit, and raising the fraction or the rate only adds faults:
//   - Fraction f: the device is hit when u < f (a Bernoulli draw per device; the count is
//     binomial, about f × devices).
//   - RatePerHour r over n devices: each device fails at most once, at Start + an exponential
//     time with mean n/r hours (inverse transform of u), so the pool sees about r faults per hour
//     at first; a fault is in effect from its onset on when the onset falls before
//     Start + Duration (Duration 0: no end). Faults stay once caused, as the NVIDIA driver's
//     taints stay until its plugin restarts; clearing them is removing the faults.
//
// gpu-lost and fabric-detached are drawn per node (index -1, simdevice.NodeWide): the driver
// taints the whole node for gpu-lost, so one fault per hit node names device 0; a node whose
// fabric went down has every GPU detached, one fault per device, all at the node's time.
package faultcampaign

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/draforge/draforge/drivers/simdevice"
)

// Campaign is one seeded fault campaign over a pool's devices. Exactly one of Fraction and
// RatePerHour is set.
type Campaign struct {
	Seed int64
	// Mode and XID are the fault every hit device gets (XID only with mode xid).
	Mode simdevice.FaultMode
	XID  *int64
	// Fraction of the devices hit, in (0, 1], all at Start.
	Fraction float64
	// RatePerHour is how many faults per hour the whole pool sees at first (> 0).
	RatePerHour float64
	// Start is when the campaign begins and Duration how long new faults keep coming (0: no
	// end), both relative to the campaign's time zero.
	Start, Duration time.Duration
}

// Validate checks the campaign on its own; the faults it expands to are checked by the pool's
// own validation (the profile must publish driver-shaped modes, at most 256 faults).
func (c Campaign) Validate() error {
	var errs []error
	switch {
	case c.Mode == "" || c.Mode == simdevice.FaultHealthy || !slices.Contains(simdevice.FaultModes, c.Mode):
		errs = append(errs, fmt.Errorf("mode %q: a campaign causes a fault (one of the fault modes but healthy)", c.Mode))
	case c.Mode == simdevice.FaultXID && c.XID == nil:
		errs = append(errs, errors.New("mode xid needs the XID code"))
	case c.Mode == simdevice.FaultXID && (*c.XID < 1 || *c.XID > simdevice.MaxXID):
		errs = append(errs, fmt.Errorf("XID %d: must be between 1 and %d", *c.XID, simdevice.MaxXID))
	case c.Mode != simdevice.FaultXID && c.XID != nil:
		errs = append(errs, fmt.Errorf("an XID is only given with mode xid (mode %s)", c.Mode))
	}
	fractionSet, rateSet := c.Fraction != 0, c.RatePerHour != 0
	switch {
	case fractionSet == rateSet:
		errs = append(errs, errors.New("set exactly one of the fraction of devices and the rate per hour"))
	case fractionSet && !(c.Fraction > 0 && c.Fraction <= 1):
		errs = append(errs, fmt.Errorf("fraction %v: must be in (0, 1]", c.Fraction))
	case rateSet && !(c.RatePerHour > 0 && !math.IsInf(c.RatePerHour, 1)):
		errs = append(errs, fmt.Errorf("rate per hour %v: must be a positive number", c.RatePerHour))
	}
	if c.Start < 0 || c.Duration < 0 {
		errs = append(errs, fmt.Errorf("start %v and duration %v must not be negative", c.Start, c.Duration))
	}
	return errors.Join(errs...)
}

// Timed is one fault of a campaign with the time it is caused at (relative to the campaign's
// time zero).
type Timed struct {
	simdevice.Fault
	At time.Duration
}

// Schedule returns every fault the campaign ever causes on the given nodes, each with devices
// physical devices, with its time, sorted by node then device index (not by time): Expand at
// time at is the faults whose time is at most at. A rate campaign without an end (Duration 0)
// still causes each device's fault once, possibly very late (up to the largest duration). Nodes
// are deduplicated; an invalid campaign is an error.
func Schedule(c Campaign, nodes []string, devices int) ([]Timed, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if devices < 1 {
		return nil, fmt.Errorf("devices per node %d: must be at least 1", devices)
	}
	ns := slices.Clone(nodes)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	perNode := simdevice.NodeWide(c.Mode)
	units := len(ns) * devices
	if perNode {
		units = len(ns)
	}
	fault := func(node string, device int) simdevice.Fault {
		f := simdevice.Fault{Device: intstr.FromInt32(int32(device)), Node: node, Mode: c.Mode}
		if c.XID != nil {
			x := *c.XID
			f.XID = &x
		}
		return f
	}
	var out []Timed
	for _, node := range ns {
		if perNode {
			if at, ok := onsetOf(c, simdevice.CampaignDraw(c.Seed, node, -1), units); ok {
				for _, f := range simdevice.NodeFaults(fault(node, 0), devices) {
					out = append(out, Timed{Fault: f, At: at})
				}
			}
			continue
		}
		for i := range devices {
			if at, ok := onsetOf(c, simdevice.CampaignDraw(c.Seed, node, i), units); ok {
				out = append(out, Timed{Fault: fault(node, i), At: at})
			}
		}
	}
	return out, nil
}

// Expand returns the faults the campaign has caused by time at (relative to its time zero) on
// the given nodes, each with devices physical devices, sorted by node then device index: the
// faults of Schedule whose time is at most at. Nodes are deduplicated; an invalid campaign is an
// error.
func Expand(c Campaign, nodes []string, devices int, at time.Duration) ([]simdevice.Fault, error) {
	all, err := Schedule(c, nodes, devices)
	if err != nil {
		return nil, err
	}
	var out []simdevice.Fault
	for _, t := range all {
		if t.At <= at {
			out = append(out, t.Fault)
		}
	}
	return out, nil
}

// onsetOf is when one unit (device, or node for gpu-lost) with its draw u among units is hit,
// relative to the campaign's time zero, and whether it ever is.
func onsetOf(c Campaign, u float64, units int) (time.Duration, bool) {
	if c.Fraction != 0 {
		return c.Start, u < c.Fraction
	}
	onset := Onset(u, c.RatePerHour/float64(units))
	if c.Duration > 0 && onset >= c.Duration {
		return 0, false
	}
	if onset > math.MaxInt64-c.Start {
		return math.MaxInt64, true
	}
	return c.Start + onset, true
}

// Onset is the time of a unit's fault after the campaign's start with per-unit hazard perHour
// (faults per hour): the exponential waiting time of mean 1/perHour hours at draw u
// (simdevice.CampaignOnset, which a pool's timed campaigns use too).
func Onset(u, perHour float64) time.Duration {
	mean := float64(time.Hour) / perHour
	if mean >= math.MaxInt64 {
		return math.MaxInt64
	}
	return simdevice.CampaignOnset(u, time.Duration(mean))
}
