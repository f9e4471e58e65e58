package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/poolfaults"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/trace"
)

// faultRunner sets and clears a replay's faults on the cluster's SimulatedDevicePools.
type faultRunner struct {
	dyn    dynamic.Interface
	nodes  []*corev1.Node
	events []FaultEvent
	next   int // the next event
	states map[string]*poolState
}

// prepareFaults reads the trace's pools and the nodes, expands the trace's faults and checks
// every one against its pool (CheckFaults), before anything is submitted. nil without faults.
func prepareFaults(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, t *trace.Trace) (*faultRunner, []FaultRecord, error) {
	if !t.HasFaults() {
		return nil, nil, nil
	}
	if dyn == nil {
		return nil, nil, errors.New("the trace sets faults: the replay needs a dynamic client to write SimulatedDevicePools")
	}
	nl, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(nl.Items))
	for i := range nl.Items {
		nodes[i] = &nl.Items[i]
	}
	pools := map[string]*simdevice.Pool{}
	targets := map[string]PoolTargets{}
	read := func(ft trace.FaultTiming, campaign bool) error {
		key := ft.PoolKey()
		p, ok := pools[key]
		if !ok {
			u, err := dyn.Resource(gvr.SimulatedDevicePools).Namespace(ft.PoolNamespace).Get(ctx, ft.Pool, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: SimulatedDevicePool %s: %w", ft.Source, key, err)
			}
			if p, err = simdevice.FromUnstructured(u); err != nil {
				return fmt.Errorf("%s: SimulatedDevicePool %s: %w", ft.Source, key, err)
			}
			pools[key] = p
			var names []string
			for _, n := range nodes {
				if p.Targets(n) {
					names = append(names, n.Name)
				}
			}
			targets[key] = PoolTargets{Nodes: names, DeviceCount: p.Spec.DeviceCount}
		}
		if campaign && len(p.Spec.DeviceGroups) > 0 {
			return fmt.Errorf("%s: SimulatedDevicePool %s has deviceGroups: fault campaigns draw over deviceCount devices per node", ft.Source, key)
		}
		return nil
	}
	for _, f := range t.Faults {
		if err := read(f.FaultTiming, false); err != nil {
			return nil, nil, err
		}
	}
	for _, c := range t.Campaigns {
		if err := read(c.FaultTiming, true); err != nil {
			return nil, nil, err
		}
	}
	recs, events, err := ScheduleFaults(t, targets)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckFaults(recs, events, pools); err != nil {
		return nil, nil, err
	}
	return &faultRunner{dyn: dyn, nodes: nodes, events: events, states: map[string]*poolState{}}, recs, nil
}

// nextAt is the simulated time of the next event, if any.
func (f *faultRunner) nextAt() (time.Duration, bool) {
	if f == nil || f.next >= len(f.events) {
		return 0, false
	}
	return f.events[f.next].At, true
}

// pendingClear reports whether a fault in effect will be cleared later: devices the trace will
// give back, so jobs waiting with nothing running are not stuck.
func (f *faultRunner) pendingClear(rec *Record) bool {
	if f == nil {
		return false
	}
	for _, ev := range f.events[f.next:] {
		if r := rec.Faults[ev.Record]; ev.Clear && r.Applied != nil && r.Cleared == nil {
			return true
		}
	}
	return false
}

// active counts the faults of the replay in effect.
func active(rec *Record) int {
	n := 0
	for _, r := range rec.Faults {
		if r.Applied != nil && r.Cleared == nil {
			n++
		}
	}
	return n
}

// apply writes the events due by elapsed (wall time since the start, compared with their
// compressed times), one patch per pool, and records each: when, the taint its devices got and
// the jobs holding them. now is the simulated time.
func (f *faultRunner) apply(ctx context.Context, rec *Record, due func(time.Duration) bool, now func() time.Duration, claims cache.Store, log func(string, ...any)) {
	if f == nil {
		return
	}
	first := f.next
	for f.next < len(f.events) && due(f.events[f.next].At) {
		f.next++
	}
	f.write(ctx, rec, f.events[first:f.next], now, claims, log)
}

// restore removes the replay's faults still in effect, putting back the pools' own.
func (f *faultRunner) restore(ctx context.Context, rec *Record, log func(string, ...any)) {
	if f == nil {
		return
	}
	var events []FaultEvent
	for _, s := range f.states {
		events = append(events, s.restore()...)
	}
	f.write(ctx, rec, events, nil, nil, log)
}

// write applies events grouped by pool, in order within each pool. With now nil (the end of
// the replay) nothing is recorded but errors.
func (f *faultRunner) write(ctx context.Context, rec *Record, events []FaultEvent, now func() time.Duration, claims cache.Store, log func(string, ...any)) {
	var order []string
	byPool := map[string][]FaultEvent{}
	var held map[string][]string // read once, when a fault is set
	for _, ev := range events {
		key := rec.Faults[ev.Record].Pool
		if _, ok := byPool[key]; !ok {
			order = append(order, key)
		}
		byPool[key] = append(byPool[key], ev)
	}
	for _, key := range order {
		evs := byPool[key]
		state := f.states[key]
		if state == nil {
			state = newPoolState()
		}
		ns, name, _ := strings.Cut(key, "/")
		var before *simdevice.Pool
		var steps [][]simdevice.Fault
		var next *poolState
		_, err := poolfaults.Patch(ctx, f.dyn, ns, name, func(p *simdevice.Pool) ([]simdevice.Fault, error) {
			var err error
			before = p
			steps, next, err = state.edit(p, evs, rec.Faults)
			if err != nil {
				return nil, err
			}
			return steps[len(steps)-1], nil
		})
		if err != nil {
			for _, ev := range evs {
				if r := &rec.Faults[ev.Record]; r.Error == "" {
					r.Error = err.Error()
				}
			}
			log("faults of SimulatedDevicePool %s: %v", key, err)
			continue
		}
		f.states[key] = next
		if now == nil {
			continue
		}
		at := now()
		jobs := map[string]*JobRecord{}
		for i := range rec.Jobs {
			jobs[rec.Jobs[i].Key()] = &rec.Jobs[i]
		}
		prev := before.Spec.Faults
		for i, ev := range evs {
			r := &rec.Faults[ev.Record]
			if ev.Clear {
				if r.Applied != nil && r.Cleared == nil {
					r.Cleared = new(at)
					log("%s clear %s: %s on %s of %s", fmtSim(at), r.Source, r.Describe(), r.Where(), r.Pool)
				}
			} else {
				r.Applied = new(at)
				ch := f.changes(before, prev, steps[i], r.Node)
				r.describeChange(ch)
				if held == nil {
					held = heldBy(claims)
				}
				r.Hits = hits(ch, held, jobs, at)
				log("%s fault %s: %s on %s of %s (%s, %d devices, %d jobs holding them)", fmtSim(at), r.Source, r.Describe(), r.Where(), r.Pool, r.Taint+r.effectNote(), r.Devices, len(r.Hits))
			}
			prev = steps[i]
		}
	}
}

func (r FaultRecord) effectNote() string {
	if r.Effect == EffectRemoved {
		return "devices removed"
	}
	return ""
}

// changes are the devices of pool p that went from the faults before to after, on node (or
// every node).
func (f *faultRunner) changes(p *simdevice.Pool, before, after []simdevice.Fault, node string) []changedDevice {
	nodes := f.nodes
	if node != "" {
		nodes = slices.DeleteFunc(slices.Clone(nodes), func(n *corev1.Node) bool { return n.Name != node })
	}
	b, a := *p, *p
	b.Spec.Faults, a.Spec.Faults = before, after
	pb, err1 := published(&b, nodes)
	pa, err2 := published(&a, nodes)
	if err1 != nil || err2 != nil {
		return nil
	}
	return changed(pb, pa)
}

// heldBy maps each device the replay's claims hold (deviceKey) to the jobs holding it.
func heldBy(claims cache.Store) map[string][]string {
	out := map[string][]string{}
	if claims == nil {
		return out
	}
	for _, o := range claims.List() {
		c := o.(*resourcev1.ResourceClaim)
		if c.Status.Allocation == nil {
			continue
		}
		job := c.Namespace + "/" + c.Labels[trace.LabelJob]
		for _, res := range c.Status.Allocation.Devices.Results {
			k := deviceKey(res.Driver, res.Pool, res.Device)
			out[k] = append(out[k], job)
		}
	}
	return out
}

// hits are the replay's jobs, not ended by at, holding a device of ch (held: heldBy).
func hits(ch []changedDevice, held map[string][]string, jobs map[string]*JobRecord, at time.Duration) []FaultHit {
	var out []FaultHit
	for _, d := range ch {
		for _, job := range held[d.key] {
			if j := jobs[job]; j == nil || (j.Finished != nil && *j.Finished <= at) {
				continue
			}
			out = append(out, FaultHit{Job: job, Node: d.node, Device: d.device})
		}
	}
	slices.SortFunc(out, func(a, b FaultHit) int {
		return strings.Compare(a.Job+"|"+a.Node+"|"+a.Device, b.Job+"|"+b.Node+"|"+b.Device)
	})
	return slices.Compact(out)
}
