package faultcampaign

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/simdevice"
)

func nodeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%04d", i)
	}
	return out
}

func keys(fs []simdevice.Fault) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Node + "/" + f.Device.String()
	}
	return out
}

func mustExpand(t *testing.T, c Campaign, nodes []string, devices int, at time.Duration) []simdevice.Fault {
	t.Helper()
	fs, err := Expand(c, nodes, devices, at)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// within checks got against a binomial count of n trials with probability p, at 4 standard
// deviations (a false failure about once in 16,000 seeds; the seeds here are fixed).
func within(t *testing.T, what string, got, n int, p float64) {
	t.Helper()
	mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
	if math.Abs(float64(got)-mean) > 4*sd {
		t.Errorf("%s: %d faults, want %.1f ± %.1f", what, got, mean, 4*sd)
	}
}

func TestFractionIsDeterministicStableAndMonotone(t *testing.T) {
	c := Campaign{Seed: 42, Mode: simdevice.FaultXID, XID: ptr.To[int64](79), Fraction: 0.05}
	nodes := nodeNames(1000)
	all := mustExpand(t, c, nodes, 8, 0)
	within(t, "5% of 8,000 GPUs", len(all), 8000, 0.05)
	for _, f := range all {
		if f.Mode != simdevice.FaultXID || *f.XID != 79 {
			t.Fatalf("fault %+v", f)
		}
	}
	// The order of the nodes does not matter; duplicates count once.
	shuffled := slices.Clone(nodes)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if got := mustExpand(t, c, append(shuffled, nodes[:10]...), 8, 0); !slices.Equal(keys(got), keys(all)) {
		t.Error("shuffled or duplicated nodes changed the faults")
	}
	// Fewer nodes: exactly the faults on those nodes.
	var first []string
	for _, k := range keys(all) {
		if k < "node-0500" {
			first = append(first, k)
		}
	}
	if got := mustExpand(t, c, nodes[:500], 8, 0); !slices.Equal(keys(got), first) {
		t.Error("removing nodes changed the faults of the others")
	}
	// A larger fraction only adds faults; another seed picks other devices.
	more := keys(mustExpand(t, Campaign{Seed: 42, Mode: simdevice.FaultXID, XID: ptr.To[int64](79), Fraction: 0.2}, nodes, 8, 0))
	for _, k := range keys(all) {
		if _, ok := slices.BinarySearch(more, k); !ok {
			t.Fatalf("%s hit at 5%% but not at 20%%", k)
		}
	}
	if other := mustExpand(t, Campaign{Seed: 43, Mode: simdevice.FaultECC, Fraction: 0.05}, nodes, 8, 0); slices.Equal(keys(other), keys(all)) {
		t.Error("seed 43 chose the same devices as seed 42")
	}
	// Before the start nothing has happened.
	c.Start = time.Hour
	if got := mustExpand(t, c, nodes, 8, 59*time.Minute); len(got) != 0 {
		t.Errorf("%d faults before the start", len(got))
	}
}

func TestRateOverTime(t *testing.T) {
	nodes := nodeNames(1000)
	const n = 8000
	c := Campaign{Seed: 7, Mode: simdevice.FaultNVLink, RatePerHour: 100, Start: 10 * time.Minute}
	// A device's fault has come by t after the start with probability 1 - exp(-r t / n).
	p := func(hours float64) float64 { return 1 - math.Exp(-100*hours/n) }
	if got := mustExpand(t, c, nodes, 8, 10*time.Minute); len(got) != 0 {
		t.Errorf("%d faults at the start", len(got))
	}
	h1 := mustExpand(t, c, nodes, 8, 70*time.Minute)
	within(t, "first hour at 100/h", len(h1), n, p(1))
	h3 := mustExpand(t, c, nodes, 8, 190*time.Minute)
	within(t, "three hours", len(h3), n, p(3))
	// Faults stay once caused: later times only add.
	k3 := keys(h3)
	for _, k := range keys(h1) {
		if _, ok := slices.BinarySearch(k3, k); !ok {
			t.Fatalf("%s gone after an hour", k)
		}
	}
	// A 30-minute window: no faults with onsets after it.
	c.Duration = 30 * time.Minute
	w := mustExpand(t, c, nodes, 8, 10*time.Hour)
	within(t, "30-minute window", len(w), n, p(0.5))
	if at40 := mustExpand(t, c, nodes, 8, 40*time.Minute); !slices.Equal(keys(at40), keys(w)) {
		t.Error("faults came after the window closed")
	}
}

func TestGPULostIsPerNode(t *testing.T) {
	nodes := nodeNames(400)
	fs := mustExpand(t, Campaign{Seed: 1, Mode: simdevice.FaultGPULost, Fraction: 0.25}, nodes, 8, 0)
	within(t, "a quarter of 400 nodes", len(fs), 400, 0.25)
	for _, f := range fs {
		if f.Device.IntValue() != 0 || f.Mode != simdevice.FaultGPULost || f.XID != nil {
			t.Fatalf("fault %+v: gpu-lost names device 0 of the node", f)
		}
	}
}

// TestFabricDetachedIsPerNode: a node whose fabric goes down has every GPU detached at once, the
// nodes hit being the same as a pool's fabric-detached campaign with the same seed.
func TestFabricDetachedIsPerNode(t *testing.T) {
	nodes := nodeNames(400)
	c := Campaign{Seed: 5, Mode: simdevice.FaultFabricDetached, RatePerHour: 40}
	timed, err := Schedule(c, nodes, 4)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]time.Duration{}
	devices := map[string]int{}
	for _, f := range timed {
		if t0, ok := at[f.Node]; ok && t0 != f.At {
			t.Fatalf("%s: GPUs detached at %v and %v", f.Node, t0, f.At)
		}
		at[f.Node] = f.At
		devices[f.Node]++
	}
	for n, d := range devices {
		if d != 4 {
			t.Errorf("%s: %d GPUs detached, want all 4", n, d)
		}
	}
	fs := mustExpand(t, Campaign{Seed: 5, Mode: simdevice.FaultFabricDetached, Fraction: 0.25}, nodes, 4, 0)
	within(t, "a quarter of 400 nodes, 4 GPUs each", len(fs)/4, 400, 0.25)
	spec := simdevice.PoolSpec{DeviceCount: 4, FaultCampaigns: []simdevice.FaultCampaign{{Seed: 5, Mode: simdevice.FaultFabricDetached, Fraction: ptr.To(0.25)}}}
	var pool []simdevice.Fault
	for _, n := range nodes {
		pool = append(pool, spec.CampaignFaults(n, 0)...)
	}
	if !reflect.DeepEqual(pool, fs) {
		t.Errorf("the pool's campaign hits %d faults, the expanded campaign %d: want the same", len(pool), len(fs))
	}
}

// TestExpandedFaultsAreValidPoolFaults: the faults pass an nvidia-gpu pool's validation.
func TestExpandedFaultsAreValidPoolFaults(t *testing.T) {
	nodes := nodeNames(20)
	fs := mustExpand(t, Campaign{Seed: 3, Mode: simdevice.FaultECC, Fraction: 0.1}, nodes, 4, 0)
	if len(fs) == 0 {
		t.Fatal("no faults")
	}
	p := &simdevice.Pool{Spec: simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 4, Profile: simdevice.ProfileNvidiaGPU, TargetNodes: nodes, Faults: fs}}
	p.Name, p.Namespace = "gpus", "ns"
	p.Default()
	if errs := p.Validate(); len(errs) > 0 {
		t.Fatalf("invalid: %v", errs)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Campaign
		want string
	}{
		{Campaign{Mode: simdevice.FaultHealthy, Fraction: 0.1}, "a campaign causes a fault"},
		{Campaign{Mode: "broken", Fraction: 0.1}, "a campaign causes a fault"},
		{Campaign{Mode: simdevice.FaultXID, Fraction: 0.1}, "needs the XID"},
		{Campaign{Mode: simdevice.FaultXID, XID: ptr.To[int64](0), Fraction: 0.1}, "between 1 and 999"},
		{Campaign{Mode: simdevice.FaultECC, XID: ptr.To[int64](48), Fraction: 0.1}, "only given with mode xid"},
		{Campaign{Mode: simdevice.FaultECC}, "exactly one of"},
		{Campaign{Mode: simdevice.FaultECC, Fraction: 0.1, RatePerHour: 1}, "exactly one of"},
		{Campaign{Mode: simdevice.FaultECC, Fraction: 1.5}, "(0, 1]"},
		{Campaign{Mode: simdevice.FaultECC, Fraction: math.NaN()}, "(0, 1]"},
		{Campaign{Mode: simdevice.FaultECC, RatePerHour: -1}, "positive"},
		{Campaign{Mode: simdevice.FaultECC, RatePerHour: math.Inf(1)}, "positive"},
		{Campaign{Mode: simdevice.FaultECC, Fraction: 0.1, Start: -time.Second}, "must not be negative"},
	} {
		if _, err := Expand(tc.c, []string{"a"}, 1, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	if _, err := Expand(Campaign{Mode: simdevice.FaultECC, Fraction: 0.1}, []string{"a"}, 0, 0); err == nil {
		t.Error("0 devices per node accepted")
	}
	if Onset(0.999999, 1e-300) != math.MaxInt64 {
		t.Error("a huge onset does not saturate")
	}
}

// Schedule gives every fault a campaign causes with its time: fraction faults all at the
// start, rate faults spread over the window, and Expand at any time is those due by then.
func TestScheduleTimesTheFaultsExpandGives(t *testing.T) {
	nodes := nodeNames(50)
	frac := Campaign{Seed: 1, Mode: simdevice.FaultECC, Fraction: 0.1, Start: 10 * time.Minute}
	fs, err := Schedule(frac, nodes, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.At != 10*time.Minute {
			t.Fatalf("a fraction fault at %s, want the start", f.At)
		}
	}
	rate := Campaign{Seed: 2, Mode: simdevice.FaultXID, XID: ptr.To[int64](79), RatePerHour: 30, Start: time.Hour, Duration: 2 * time.Hour}
	all, err := Schedule(rate, nodes, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if f.At < time.Hour || f.At >= 3*time.Hour {
			t.Fatalf("a rate fault at %s, outside the window [1h, 3h)", f.At)
		}
	}
	for _, at := range []time.Duration{0, time.Hour, 90 * time.Minute, 3 * time.Hour} {
		var due []string
		for _, f := range all {
			if f.At <= at {
				due = append(due, f.Node+"/"+f.Device.String())
			}
		}
		if got := keys(mustExpand(t, rate, nodes, 8, at)); !slices.Equal(got, due) {
			t.Errorf("at %s: Expand gives %d faults, Schedule %d due", at, len(got), len(due))
		}
	}
	if _, err := Schedule(Campaign{Mode: simdevice.FaultECC}, nodes, 8); err == nil {
		t.Error("an invalid campaign was scheduled")
	}
}
