package replay

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"
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
