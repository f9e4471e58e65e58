package replay

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
)

// Percentiles of a set of waits (nearest rank), with how many there were.
type Percentiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50"`
	P90 time.Duration `json:"p90"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

func percentiles(waits []time.Duration) Percentiles {
	if len(waits) == 0 {
		return Percentiles{}
	}
	w := slices.Clone(waits)
	slices.Sort(w)
	rank := func(p float64) time.Duration {
		return w[max(0, int(math.Ceil(p*float64(len(w))))-1)]
	}
	return Percentiles{N: len(w), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: w[len(w)-1]}
}

// Summary is what a report says about one replay.
type Summary struct {
	Jobs     int `json:"jobs"`
	Started  int `json:"started"`
	Finished int `json:"finished"`
	Failed   int `json:"failed"`
	// Wait is every started job's wait; ByQueue per queue ("-" without one), BySize per
	// bucket of devices asked for (pods × devices), Gang for the gangs.
	Wait    Percentiles            `json:"wait"`
	ByQueue map[string]Percentiles `json:"byQueue"`
	BySize  map[string]Percentiles `json:"bySize"`
	Gang    Percentiles            `json:"gang"`
	// NeverStarted are the jobs that never got all their pods placed, with the first reason.
	NeverStarted []NeverStarted `json:"neverStarted"`
	// Utilization is the mean share of each node group's devices the replay held, over the
	// samples; IdleWhilePending the mean free devices per group over the samples in which some
	// pod was pending (fragmentation: devices no pending pod could use).
	Utilization      map[string]float64 `json:"utilization"`
	IdleWhilePending map[string]float64 `json:"idleWhilePending"`
	PeakPending      int                `json:"peakPending"`
	Fragmentation    Fragmentation      `json:"fragmentation"`
	// Faults is what the trace's faults did (nil without faults).
	Faults *FaultSummary `json:"faults,omitempty"`
}

// FaultSummary is what a replay's faults did.
type FaultSummary struct {
	// Faults is every fault the trace expanded to (one per device); Applied were written,
	// Cleared removed again by the trace, Failed could not be written, NotApplied were due after
	// the replay ended.
	Faults     int `json:"faults"`
	Applied    int `json:"applied"`
	Cleared    int `json:"cleared"`
	Failed     int `json:"failed"`
	NotApplied int `json:"notApplied"`
	// ByMode counts the applied faults by mode (with the XID), ByEffect by the effect of the
	// taint they published ("removed": devices taken out of their slices).
	ByMode   map[string]int `json:"byMode"`
	ByEffect map[string]int `json:"byEffect"`
	// PeakUnavailable is the most devices unavailable at once (Sample.Unavailable).
	PeakUnavailable int `json:"peakUnavailable"`
	// Hit are the jobs whose claims held a device when a fault changed it, and what became of
	// them; Delayed the jobs that waited while devices were unavailable.
	Hit     []HitJob     `json:"hit"`
	Delayed []DelayedJob `json:"delayed"`
}

// HitJob is a job holding a device when a fault changed it.
type HitJob struct {
	Job    string        `json:"job"`
	At     time.Duration `json:"at"`
	Source string        `json:"source"`
	Fault  string        `json:"fault"`
	Where  string        `json:"where"`
	Taint  string        `json:"taint,omitempty"`
	Effect string        `json:"effect,omitempty"`
	// Expected is what the effect does to a running pod; Outcome what happened to the job.
	Expected string `json:"expected"`
	Outcome  string `json:"outcome"`
}

// DelayedJob is a job that waited while devices were unavailable: Wait from its arrival to its
// start (or to the replay's end when it never started), Unavailable the part of it during
// which some device was (the samples' Unavailable), an overlap, not a cause.
type DelayedJob struct {
	Job         string        `json:"job"`
	Started     bool          `json:"started"`
	Wait        time.Duration `json:"wait"`
	Unavailable time.Duration `json:"unavailable"`
}

// expected says what a taint effect does to a pod already running on the device.
func expected(effect string) string {
	switch effect {
	case string(resourcev1.DeviceTaintEffectNoExecute):
		return "evicted: NoExecute evicts pods using the device"
	case string(resourcev1.DeviceTaintEffectNoSchedule):
		return "keeps running: NoSchedule only keeps new claims off the device"
	case string(resourcev1.DeviceTaintEffectNone):
		return "keeps running: effect None is informational"
	case EffectRemoved:
		return "keeps running: a removed device stays allocated to its claim"
	}
	return "keeps running"
}

// outcome says what became of a job after time at.
func outcome(j *JobRecord) string {
	switch {
	case j == nil:
		return "unknown job"
	case j.Failed:
		return "failed"
	case j.Finished != nil:
		return "finished"
	}
	return "running when the replay ended"
}

func summarizeFaults(r *Record) *FaultSummary {
	if len(r.Faults) == 0 {
		return nil
	}
	f := &FaultSummary{Faults: len(r.Faults), ByMode: map[string]int{}, ByEffect: map[string]int{}, Hit: []HitJob{}, Delayed: []DelayedJob{}}
	jobs := map[string]*JobRecord{}
	for i := range r.Jobs {
		jobs[r.Jobs[i].Key()] = &r.Jobs[i]
	}
	for _, fr := range r.Faults {
		switch {
		case fr.Applied != nil:
			f.Applied++
			f.ByMode[fr.Describe()]++
			f.ByEffect[cmp.Or(fr.Effect, "no change")]++
		case fr.Error != "":
			f.Failed++
		default:
			f.NotApplied++
		}
		if fr.Cleared != nil {
			f.Cleared++
		}
		if fr.Applied == nil {
			continue
		}
		for _, h := range fr.Hits {
			f.Hit = append(f.Hit, HitJob{Job: h.Job, At: *fr.Applied, Source: fr.Source, Fault: fr.Describe(), Where: h.Node + " " + h.Device,
				Taint: fr.Taint, Effect: fr.Effect, Expected: expected(fr.Effect), Outcome: outcome(jobs[h.Job])})
		}
	}
	slices.SortStableFunc(f.Hit, func(a, b HitJob) int { return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Job, b.Job)) })
	for _, s := range r.Samples {
		f.PeakUnavailable = max(f.PeakUnavailable, s.Unavailable)
	}
	for _, j := range r.Jobs {
		if j.Submitted == nil {
			continue
		}
		end := r.Simulated
		if j.Started != nil {
			end = *j.Started
		}
		var during time.Duration
		for i, s := range r.Samples {
			if s.Unavailable == 0 || i+1 == len(r.Samples) {
				continue
			}
			from, to := max(s.T, j.Arrival), min(r.Samples[i+1].T, end)
			if to > from {
				during += to - from
			}
		}
		if during > 0 {
			f.Delayed = append(f.Delayed, DelayedJob{Job: j.Key(), Started: j.Started != nil, Wait: max(end-j.Arrival, 0), Unavailable: during})
		}
	}
	slices.SortStableFunc(f.Delayed, func(a, b DelayedJob) int {
		return cmp.Or(cmp.Compare(b.Unavailable, a.Unavailable), cmp.Compare(a.Job, b.Job))
	})
	return f
}

// Fragmentation is how often, and how badly, free devices were split across nodes while pods
// pended (Sample.Fragmented): of the samples with pending pods, how many were fragmented, the
// mean devices free in those, and the worst of them (the most devices free).
type Fragmentation struct {
	Samples        int     `json:"samples"`
	PendingSamples int     `json:"pendingSamples"`
	MeanFree       float64 `json:"meanFree"`
	Worst          *Sample `json:"worst,omitempty"`
}

// NeverStarted is a job that never started and why.
type NeverStarted struct {
	Job    string `json:"job"`
	Size   int    `json:"size"`
	Reason string `json:"reason"`
}

// sizeBuckets are the job size buckets of BySize, by devices asked for.
var sizeBuckets = []struct {
	name string
	max  int
}{{"0", 0}, {"1", 1}, {"2-4", 4}, {"5-8", 8}, {"9-32", 32}, {"33+", math.MaxInt}}

func sizeBucket(n int) string {
	for _, b := range sizeBuckets {
		if n <= b.max {
			return b.name
		}
	}
	return ""
}

// Summarize computes a record's summary.
func Summarize(r *Record) Summary {
	s := Summary{Jobs: len(r.Jobs), ByQueue: map[string]Percentiles{}, BySize: map[string]Percentiles{},
		Utilization: map[string]float64{}, IdleWhilePending: map[string]float64{}, NeverStarted: []NeverStarted{}}
	var all, gang []time.Duration
	byQueue, bySize := map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, j := range r.Jobs {
		if j.Finished != nil {
			s.Finished++
		}
		if j.Failed {
			s.Failed++
		}
		w, ok := j.Wait()
		if !ok {
			s.NeverStarted = append(s.NeverStarted, NeverStarted{Job: j.Key(), Size: j.Size(), Reason: cmp.Or(j.Reason, "no reason reported")})
			continue
		}
		s.Started++
		all = append(all, w)
		q := cmp.Or(j.Queue, "-")
		byQueue[q] = append(byQueue[q], w)
		bySize[sizeBucket(j.Size())] = append(bySize[sizeBucket(j.Size())], w)
		if j.Gang {
			gang = append(gang, w)
		}
	}
	s.Wait, s.Gang = percentiles(all), percentiles(gang)
	for q, w := range byQueue {
		s.ByQueue[q] = percentiles(w)
	}
	for b, w := range bySize {
		s.BySize[b] = percentiles(w)
	}
	pendingSamples := 0
	for i, sm := range r.Samples {
		s.PeakPending = max(s.PeakPending, sm.Pending)
		for g, n := range r.Devices {
			if n > 0 {
				s.Utilization[g] += float64(sm.AllocatedByGroup[g]) / float64(n)
			}
			if sm.Pending > 0 {
				s.IdleWhilePending[g] += float64(n - sm.AllocatedByGroup[g])
			}
		}
		if sm.Pending > 0 {
			pendingSamples++
		}
		if sm.Fragmented > 0 {
			f := &s.Fragmentation
			f.Samples++
			f.MeanFree += float64(sm.Fragmented)
			if f.Worst == nil || sm.Fragmented > f.Worst.Fragmented {
				f.Worst = &r.Samples[i]
			}
		}
	}
	s.Fragmentation.PendingSamples = pendingSamples
	if s.Fragmentation.Samples > 0 {
		s.Fragmentation.MeanFree /= float64(s.Fragmentation.Samples)
	}
	s.Faults = summarizeFaults(r)
	for g := range r.Devices {
		if len(r.Samples) > 0 {
			s.Utilization[g] /= float64(len(r.Samples))
		}
		if pendingSamples > 0 {
			s.IdleWhilePending[g] /= float64(pendingSamples)
		}
	}
	return s
}

// Groups are a record's node groups, sorted.
func (r *Record) Groups() []string { return slices.Sorted(maps.Keys(r.Devices)) }

// Classes are the device classes the replay's claims held devices of, sorted.
func (r *Record) Classes() []string {
	seen := map[string]bool{}
	for _, s := range r.Samples {
		for c := range s.AllocatedByClass {
			seen[c] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Comparison is how two replays of one trace differ: the time-compression error when they ran
// at different speeds.
type Comparison struct {
	// SameOrder: the jobs started in the same order in both (jobs starting at the same
	// simulated second in one are not ordered).
	SameOrder bool `json:"sameOrder"`
	// Jobs compared: started in both.
	Jobs int `json:"jobs"`
	// MaxWaitDiff and MeanWaitDiff are the largest and mean |wait(a) − wait(b)| per job.
	MaxWaitDiff  time.Duration `json:"maxWaitDiff"`
	MeanWaitDiff time.Duration `json:"meanWaitDiff"`
	// Worst is the job with the largest difference.
	Worst string `json:"worst,omitempty"`
	// Faults are the two runs' fault counts, side by side (nil when neither set faults).
	Faults *[2]FaultCounts `json:"faults,omitempty"`
}

// FaultCounts are one run's faults applied and cleared, the jobs holding a device a fault hit
// (each counted once) and the jobs that waited while devices were unavailable.
type FaultCounts struct {
	Applied int `json:"applied"`
	Cleared int `json:"cleared"`
	JobsHit int `json:"jobsHit"`
	Delayed int `json:"delayed"`
}

func faultCounts(r *Record) FaultCounts {
	f := summarizeFaults(r)
	if f == nil {
		return FaultCounts{}
	}
	hit := map[string]bool{}
	for _, h := range f.Hit {
		hit[h.Job] = true
	}
	return FaultCounts{Applied: f.Applied, Cleared: f.Cleared, JobsHit: len(hit), Delayed: len(f.Delayed)}
}

// Compare compares two records of one trace.
func Compare(a, b *Record) Comparison {
	var c Comparison
	waitB, startB := map[string]time.Duration{}, map[string]time.Duration{}
	for _, j := range b.Jobs {
		if w, ok := j.Wait(); ok {
			waitB[j.Key()], startB[j.Key()] = w, *j.Started
		}
	}
	type started struct {
		key  string
		a, b time.Duration
	}
	var both []started
	var sum time.Duration
	for _, j := range a.Jobs {
		wa, ok := j.Wait()
		wb, okb := waitB[j.Key()]
		if !ok || !okb {
			continue
		}
		both = append(both, started{j.Key(), *j.Started, startB[j.Key()]})
		d := wa - wb
		if d < 0 {
			d = -d
		}
		sum += d
		if d >= c.MaxWaitDiff {
			c.MaxWaitDiff, c.Worst = d, j.Key()
		}
	}
	if len(a.Faults) > 0 || len(b.Faults) > 0 {
		c.Faults = &[2]FaultCounts{faultCounts(a), faultCounts(b)}
	}
	c.Jobs = len(both)
	if c.Jobs > 0 {
		c.MeanWaitDiff = sum / time.Duration(c.Jobs)
	}
	// Same order: no pair of jobs that one run started a second or more apart is swapped in
	// the other.
	c.SameOrder = true
	for i := range both {
		for k := range both {
			x, y := both[i], both[k]
			if x.a+time.Second <= y.a && x.b > y.b+time.Second {
				c.SameOrder = false
			}
		}
	}
	return c
}

// sizeLabel names a bucket for tables.
func sizeLabel(b string) string {
	if b == "1" {
		return "1 device"
	}
	return b + " devices"
}
