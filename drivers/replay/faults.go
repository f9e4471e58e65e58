package replay

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/faultcampaign"
	"github.com/draforge/draforge/drivers/poolfaults"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/trace"
)

// The pure part of a replay's faults: a trace's faults and campaigns expanded into one fault
// per device (FaultRecord) and the changes that set and remove them in simulated time
// (FaultEvent); the edit of a pool's spec.faults those changes make, which keeps the pool's
// own faults; and what a change did to the devices the pool publishes.

// MaxReplayFaults bounds the faults a trace expands to.
const MaxReplayFaults = 100000

// FaultRecord is one fault the replay sets on one device (on one node, or on every node the
// pool targets) and what it did. Times are simulated offsets from the trace's start.
type FaultRecord struct {
	// Source is the trace's entry: "spec.faults.0" or "spec.faultCampaigns.1".
	Source string `json:"source"`
	// Pool is the SimulatedDevicePool's namespace/name.
	Pool string `json:"pool"`
	// Node is "" for every node the pool targets.
	Node   string              `json:"node,omitempty"`
	Device string              `json:"device"`
	Mode   simdevice.FaultMode `json:"mode"`
	XID    *int64              `json:"xid,omitempty"`
	// Due is when the trace sets it; ClearDue when it removes it (nil: at the replay's end).
	Due      time.Duration  `json:"due"`
	ClearDue *time.Duration `json:"clearDue,omitempty"`
	// Applied and Cleared are when the pool was written (nil: never, e.g. the jobs had all
	// ended first).
	Applied *time.Duration `json:"applied,omitempty"`
	Cleared *time.Duration `json:"cleared,omitempty"`
	// Taint is the device taint its devices got (key=value:Effect), Effect that taint's effect
	// (NoSchedule, NoExecute, None), or "removed" for devices it took out of their slices;
	// Devices how many published devices changed.
	Taint   string `json:"taint,omitempty"`
	Effect  string `json:"effect,omitempty"`
	Devices int    `json:"devices,omitempty"`
	// Hits are the jobs whose claims held one of those devices when it was applied.
	Hits []FaultHit `json:"hits,omitempty"`
	// Error is why writing it failed.
	Error string `json:"error,omitempty"`
}

// FaultHit is a job of the replay holding a device a fault changed.
type FaultHit struct {
	Job    string `json:"job"`
	Node   string `json:"node"`
	Device string `json:"device"`
}

// Effect values besides the taint effects.
const (
	EffectRemoved = "removed" // the device left its slice (mode disappear)
)

func (r FaultRecord) fault() simdevice.Fault {
	return simdevice.Fault{Device: poolfaults.DeviceRef(r.Device), Node: r.Node, Mode: r.Mode, XID: r.XID}
}

// Describe is the fault's mode with its XID.
func (r FaultRecord) Describe() string {
	if x, ok := simdevice.FaultXIDOf(r.fault()); ok {
		return fmt.Sprintf("%s (XID %d)", r.Mode, x)
	}
	return string(r.Mode)
}

// Where is the fault's node and device.
func (r FaultRecord) Where() string { return cmp.Or(r.Node, "every node") + " " + r.Device }

// Blocks reports whether the fault keeps new claims off its devices: a NoSchedule or NoExecute
// taint, or devices removed.
func (r FaultRecord) Blocks() bool {
	return r.Effect == string(resourcev1.DeviceTaintEffectNoSchedule) || r.Effect == string(resourcev1.DeviceTaintEffectNoExecute) || r.Effect == EffectRemoved
}

// FaultEvent sets (or, Clear, removes) the fault Record of the replay at simulated time At.
type FaultEvent struct {
	At     time.Duration
	Clear  bool
	Record int
}

// PoolTargets is what expanding a campaign needs of a pool: the nodes it targets and its
// devices per node.
type PoolTargets struct {
	Nodes       []string
	DeviceCount int
}

// ScheduleFaults expands the trace's faults (one record per listed device) and campaigns (one
// per device the campaign hits, on the nodes the pool targets: faultcampaign.Schedule) into
// records and the events that set and clear them, sorted by time; at one time, clears come
// first, then in record order. pools are the trace's pools by namespace/name.
func ScheduleFaults(t *trace.Trace, pools map[string]PoolTargets) ([]FaultRecord, []FaultEvent, error) {
	var recs []FaultRecord
	var events []FaultEvent
	add := func(ft trace.FaultTiming, f simdevice.Fault, at time.Duration) error {
		if len(recs) >= MaxReplayFaults {
			return fmt.Errorf("%s: the trace sets more than %d faults", ft.Source, MaxReplayFaults)
		}
		r := FaultRecord{Source: ft.Source, Pool: ft.PoolKey(), Node: f.Node, Device: f.Device.String(), Mode: f.Mode, XID: f.XID, Due: at}
		events = append(events, FaultEvent{At: at, Record: len(recs)})
		if c, ok := ft.ClearAt(at); ok {
			r.ClearDue = &c
			events = append(events, FaultEvent{At: c, Clear: true, Record: len(recs)})
		}
		recs = append(recs, r)
		return nil
	}
	for _, f := range t.Faults {
		for _, d := range f.Devices {
			if err := add(f.FaultTiming, simdevice.Fault{Device: d, Node: f.Node, Mode: f.Mode, XID: f.XID}, f.At); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, c := range t.Campaigns {
		p, ok := pools[c.PoolKey()]
		if !ok {
			return nil, nil, fmt.Errorf("%s: no SimulatedDevicePool %s", c.Source, c.PoolKey())
		}
		timed, err := faultcampaign.Schedule(c.Campaign, p.Nodes, p.DeviceCount)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.Source, err)
		}
		for _, tf := range timed {
			if err := add(c.FaultTiming, tf.Fault, tf.At); err != nil {
				return nil, nil, err
			}
		}
	}
	slices.SortStableFunc(events, func(a, b FaultEvent) int {
		if a.At != b.At {
			return cmp.Compare(a.At, b.At)
		}
		if a.Clear != b.Clear {
			if a.Clear {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Record, b.Record)
	})
	return recs, events, nil
}

// poolState is what the replay has done to one pool's faults: the devices (poolfaults.Key)
// whose fault is the replay's, by record, and the pool's own faults the replay replaced, put
// back when the replay's fault is removed.
type poolState struct {
	active   map[string]int
	shadowed map[string]simdevice.Fault
}

func newPoolState() *poolState {
	return &poolState{active: map[string]int{}, shadowed: map[string]simdevice.Fault{}}
}

func (s *poolState) clone() *poolState {
	c := newPoolState()
	for k, v := range s.active {
		c.active[k] = v
	}
	for k, v := range s.shadowed {
		c.shadowed[k] = v
	}
	return c
}

// edit applies events (all of pool p) to p's faults in order and returns the faults after each
// event, and the state after them all; s is not changed. Setting a fault replaces the device's
// fault on its node (the NVIDIA driver keeps one taint per key); a fault of the pool's own
// that it replaces is kept aside and put back when the replay's fault is removed. Removing a
// fault that a later fault of the trace replaced does nothing; removing one that someone
// changed since leaves theirs. The faults are checked with the pool's own validation.
func (s *poolState) edit(p *simdevice.Pool, events []FaultEvent, recs []FaultRecord) ([][]simdevice.Fault, *poolState, error) {
	next := s.clone()
	faults := slices.Clone(p.Spec.Faults)
	steps := make([][]simdevice.Fault, 0, len(events))
	for _, ev := range events {
		r := recs[ev.Record]
		f := r.fault()
		k := poolfaults.Key(p, f)
		if k == "" {
			return nil, nil, fmt.Errorf("%s: SimulatedDevicePool %s has no device %s", r.Source, r.Pool, r.Device)
		}
		same := func(o simdevice.Fault) bool { return poolfaults.Key(p, o) == k }
		if !ev.Clear {
			if _, ours := next.active[k]; !ours {
				if i := slices.IndexFunc(faults, same); i >= 0 {
					next.shadowed[k] = faults[i]
				}
			}
			faults = append(slices.DeleteFunc(faults, same), f)
			next.active[k] = ev.Record
		} else if id, ok := next.active[k]; ok && id == ev.Record {
			faults = slices.DeleteFunc(faults, func(o simdevice.Fault) bool {
				return same(o) && o.Mode == f.Mode && ptrEqual(o.XID, f.XID)
			})
			if old, ok := next.shadowed[k]; ok && !slices.ContainsFunc(faults, same) {
				faults = append(faults, old)
			}
			delete(next.shadowed, k)
			delete(next.active, k)
		}
		check := *p
		check.Spec.Faults = faults
		if errs := check.Validate(); len(errs) > 0 {
			verb := "setting"
			if ev.Clear {
				verb = "clearing"
			}
			return nil, nil, fmt.Errorf("%s (%s %s on %s of SimulatedDevicePool %s at %s): %w", r.Source, verb, r.Describe(), r.Where(), r.Pool, ev.At, errors.Join(errs...))
		}
		steps = append(steps, slices.Clone(faults))
	}
	return steps, next, nil
}

// restore returns the events that remove every fault of the replay still set, in record order.
func (s *poolState) restore() []FaultEvent {
	var out []FaultEvent
	for _, id := range s.active {
		out = append(out, FaultEvent{Clear: true, Record: id})
	}
	slices.SortFunc(out, func(a, b FaultEvent) int { return cmp.Compare(a.Record, b.Record) })
	return out
}

func ptrEqual(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// CheckFaults plays every event on copies of the pools (by namespace/name) as the replay will,
// so that a fault the pool refuses (a device it lacks, a mode its profile does not publish,
// more than 256 faults at once) is an error before anything is submitted.
func CheckFaults(recs []FaultRecord, events []FaultEvent, pools map[string]*simdevice.Pool) error {
	states := map[string]*poolState{}
	copies := map[string]*simdevice.Pool{}
	for _, ev := range events {
		key := recs[ev.Record].Pool
		p, ok := copies[key]
		if !ok {
			orig, ok := pools[key]
			if !ok {
				return fmt.Errorf("%s: no SimulatedDevicePool %s", recs[ev.Record].Source, key)
			}
			c := *orig
			p, copies[key], states[key] = &c, &c, newPoolState()
		}
		steps, next, err := states[key].edit(p, []FaultEvent{ev}, recs)
		if err != nil {
			return err
		}
		p.Spec.Faults, states[key] = steps[0], next
	}
	return nil
}

// publishedDevice is one device as the pool publishes it on a node.
type publishedDevice struct {
	node   string
	taints []resourcev1.DeviceTaint
}

// deviceKey names a published device as a claim's allocation result does.
func deviceKey(driver, pool, device string) string { return driver + "/" + pool + "/" + device }

// published is every device the pool publishes on nodes, by deviceKey.
func published(p *simdevice.Pool, nodes []*corev1.Node) (map[string]publishedDevice, error) {
	slices, err := simdevice.DesiredSlices(p, nodes)
	if err != nil {
		return nil, err
	}
	out := map[string]publishedDevice{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			node := ""
			if s.Spec.NodeName != nil {
				node = *s.Spec.NodeName
			}
			out[deviceKey(s.Spec.Driver, s.Spec.Pool.Name, d.Name)] = publishedDevice{node: node, taints: d.Taints}
		}
	}
	return out, nil
}

// changedDevice is a device a fault changed: a taint it got, or removed.
type changedDevice struct {
	key, node, device string
	taint             *resourcev1.DeviceTaint
}

// changed are the devices whose publication the fault changed from before to after: devices
// removed, and devices that got a taint (key, value or effect) they did not have, sorted.
func changed(before, after map[string]publishedDevice) []changedDevice {
	var out []changedDevice
	for k, b := range before {
		name := k[lastSlash(k)+1:]
		a, ok := after[k]
		if !ok {
			out = append(out, changedDevice{key: k, node: b.node, device: name})
			continue
		}
		for _, t := range a.taints {
			if !slices.ContainsFunc(b.taints, func(o resourcev1.DeviceTaint) bool {
				return o.Key == t.Key && o.Value == t.Value && o.Effect == t.Effect
			}) {
				out = append(out, changedDevice{key: k, node: a.node, device: name, taint: &t})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b changedDevice) int { return cmp.Compare(a.key, b.key) })
	return out
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// describeChange fills r's Taint, Effect and Devices from the devices it changed.
func (r *FaultRecord) describeChange(ch []changedDevice) {
	r.Devices = len(ch)
	for _, c := range ch {
		if c.taint == nil {
			r.Effect = EffectRemoved
			continue
		}
		t := c.taint
		r.Taint = t.Key
		if t.Value != "" {
			r.Taint += "=" + t.Value
		}
		r.Taint += ":" + string(t.Effect)
		r.Effect = string(t.Effect)
		return
	}
}

// blockingTaint reports whether a taint keeps new claims off its device.
func blockingTaint(t resourcev1.DeviceTaint) bool {
	return t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute
}

// fmtXID is a record's XID for tables ("" without one).
func fmtXID(r FaultRecord) string {
	if x, ok := simdevice.FaultXIDOf(r.fault()); ok {
		return strconv.FormatInt(x, 10)
	}
	return ""
}
