package trace

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
)

// Model is what a synthetic trace follows: one published GPU cluster trace's shares of jobs by
// GPUs requested, cumulative distribution of run times and hour-of-day shape of arrivals
// (Models).
type Model struct {
	Name string
	// Source cites where the numbers come from; a generated trace's header repeats it.
	Source string
	// Sizes are GPUs per job with their percent of jobs (normalized when drawn).
	Sizes []Share
	// Durations are points of the run time's cumulative distribution, increasing: Percent of
	// jobs ran at most Seconds. Run times are drawn between two points log-linearly, and those
	// below the first point take its time.
	Durations []Point
	// Hourly are the relative arrival rates of the hours of the day, hour 0 first.
	Hourly [24]float64
	// PerDay is the trace's mean jobs per day: a generated trace spreads its jobs over the
	// time the model's cluster took to submit as many, unless told another span.
	PerDay float64
}

// Share is the percent of jobs that request GPUs GPUs.
type Share struct {
	GPUs    int
	Percent float64
}

// Point is one point of a cumulative distribution: Percent of jobs ran at most Seconds.
type Point struct {
	Seconds float64
	Percent float64
}

// GenerateOptions shape a synthetic trace.
type GenerateOptions struct {
	// Name is the trace's metadata.name (default: "<model>-<jobs>").
	Name string
	// Jobs is how many jobs arrive (1 to 100,000).
	Jobs int
	// Span is the time the arrivals are spread over (default: as long as the model's cluster
	// took to submit Jobs jobs, PerDay).
	Span time.Duration
	// StartHour is the hour of the day the trace starts at (the model's hours).
	StartHour int
	// DevicesPerNode is the most devices one pod asks for: a bigger job is split into pods of
	// at most that many (default 8, a node of 8 GPUs).
	DevicesPerNode int
	// MaxDuration cuts longer run times to it (0: none). Published traces have jobs of weeks.
	MaxDuration time.Duration
	// Gangs makes every job of several pods a gang (a PodGroup: the dra-all profile).
	Gangs       bool
	Namespace   string
	DeviceClass string
	Seed        uint64
}

// Generated describes a generated trace.
type Generated struct {
	Jobs, Pods, Devices int
	// BySize counts jobs by GPUs requested.
	BySize map[int]int
	// Cut is how many run times MaxDuration cut.
	Cut int
	// Span is the arrivals' span; MedianDuration the median run time.
	Span, MedianDuration time.Duration
}

// Generate returns a #WorkloadTrace document of o.Jobs jobs following m: sizes and run times
// drawn from its distributions, arrival times a Poisson process whose rate follows its hours of
// the day, given o.Jobs arrivals over o.Span (the arrival times are the order statistics of
// the process's cumulative rate). The same options and seed give the same document.
func Generate(m Model, o GenerateOptions) ([]byte, Generated, error) {
	if err := o.defaults(m); err != nil {
		return nil, Generated{}, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	arrivals := m.arrivals(rng, o.Jobs, o.Span, o.StartHour)
	g := Generated{Jobs: o.Jobs, BySize: map[int]int{}, Span: o.Span}
	durations := make([]time.Duration, o.Jobs)
	var b bytes.Buffer
	comment(&b, "A synthetic workload trace: draforge trace generate "+o.flags(m)+". It follows "+m.Source+
		". Arrivals are a Poisson process at the model's rate for each hour of the day (no inter-arrival "+
		"distribution is published); sizes and run times are drawn independently.")
	fmt.Fprintf(&b, "apiVersion: draforge.oaslananka/v1alpha1\nkind: WorkloadTrace\nmetadata:\n  name: %s\nspec:\n", o.Name)
	fmt.Fprintf(&b, "  namespace: %s\n  deviceClass: %s\n  jobs:\n", o.Namespace, o.DeviceClass)
	width := len(fmt.Sprint(o.Jobs))
	for i, at := range arrivals {
		size := m.size(rng)
		d := m.duration(rng)
		if o.MaxDuration > 0 && d > o.MaxDuration {
			d, g.Cut = o.MaxDuration, g.Cut+1
		}
		durations[i] = d
		pods := (size + o.DevicesPerNode - 1) / o.DevicesPerNode
		devices := (size + pods - 1) / pods
		g.BySize[size]++
		g.Pods += pods
		g.Devices += pods * devices
		fmt.Fprintf(&b, "    - {name: job-%0*d, arrival: %s, duration: %s, pods: %d, devices: %d", width, i+1,
			at.Round(time.Millisecond), d, pods, devices)
		if o.Gangs && pods > 1 {
			b.WriteString(", gang: true")
		}
		b.WriteString("}\n")
	}
	slices.Sort(durations)
	g.MedianDuration = durations[len(durations)/2]
	return b.Bytes(), g, nil
}

func (o *GenerateOptions) defaults(m Model) error {
	switch {
	case o.Jobs < 1 || o.Jobs > 100000:
		return fmt.Errorf("jobs %d: a trace has 1 to 100,000 jobs", o.Jobs)
	case o.Span < 0:
		return fmt.Errorf("span %s: must not be negative", o.Span)
	case o.StartHour < 0 || o.StartHour > 23:
		return fmt.Errorf("start hour %d: must be 0 to 23", o.StartHour)
	case o.DevicesPerNode < 0 || o.DevicesPerNode > 128:
		return fmt.Errorf("devices per node %d: must be 1 to 128", o.DevicesPerNode)
	case o.MaxDuration != 0 && o.MaxDuration < time.Second:
		return fmt.Errorf("max duration %s: must be at least 1s", o.MaxDuration)
	}
	if o.DevicesPerNode == 0 {
		o.DevicesPerNode = 8
	}
	if largest := slices.MaxFunc(m.Sizes, func(a, b Share) int { return a.GPUs - b.GPUs }).GPUs; (largest+o.DevicesPerNode-1)/o.DevicesPerNode > 1000 {
		return fmt.Errorf("devices per node %d: the model's %d-GPU jobs would need more than 1,000 pods", o.DevicesPerNode, largest)
	}
	if o.Span == 0 {
		o.Span = time.Duration(float64(o.Jobs) / m.PerDay * float64(24*time.Hour)).Round(time.Second)
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("%s-%d", m.Name, o.Jobs)
	}
	if o.Namespace == "" {
		o.Namespace = "draforge-replay"
	}
	if o.DeviceClass == "" {
		o.DeviceClass = "draforge-replay-gpu"
	}
	return nil
}

// flags are the command line that generates the same trace.
func (o GenerateOptions) flags(m Model) string {
	f := []string{"--model " + m.Name, fmt.Sprintf("--jobs %d", o.Jobs), "--span " + o.Span.String(),
		fmt.Sprintf("--start-hour %d", o.StartHour), fmt.Sprintf("--devices-per-node %d", o.DevicesPerNode),
		fmt.Sprintf("--seed %d", o.Seed), "--name " + o.Name, "--namespace " + o.Namespace, "--device-class " + o.DeviceClass}
	if o.MaxDuration > 0 {
		f = append(f, "--max-duration "+o.MaxDuration.String())
	}
	if o.Gangs {
		f = append(f, "--gangs")
	}
	return strings.Join(f, " ")
}

// arrivals are n arrival times over span, sorted: uniform draws of the cumulative rate,
// mapped back to time (the hours' rates are constant within each hour).
func (m Model) arrivals(rng *rand.Rand, n int, span time.Duration, startHour int) []time.Duration {
	// cum[i] is the cumulative rate at the end of the i-th hour of the span.
	hours := int(math.Ceil(span.Hours()))
	cum := make([]float64, hours)
	var total float64
	for i := range hours {
		length := min(time.Hour, span-time.Duration(i)*time.Hour)
		total += m.Hourly[(startHour+i)%24] * length.Hours()
		cum[i] = total
	}
	out := make([]time.Duration, n)
	for i := range out {
		u := rng.Float64() * total
		h := sort.SearchFloat64s(cum, u)
		before := 0.0
		if h > 0 {
			before = cum[h-1]
		}
		rate := m.Hourly[(startHour+h)%24]
		out[i] = time.Duration(h)*time.Hour + time.Duration((u-before)/rate*float64(time.Hour))
	}
	slices.Sort(out)
	return out
}

// size draws a job's GPUs.
func (m Model) size(rng *rand.Rand) int {
	var total float64
	for _, s := range m.Sizes {
		total += s.Percent
	}
	u := rng.Float64() * total
	for _, s := range m.Sizes {
		if u < s.Percent {
			return s.GPUs
		}
		u -= s.Percent
	}
	return m.Sizes[len(m.Sizes)-1].GPUs
}

// duration draws a run time from the cumulative distribution, log-linearly between its
// points, at least a second, to the second.
func (m Model) duration(rng *rand.Rand) time.Duration {
	u := rng.Float64() * m.Durations[len(m.Durations)-1].Percent
	secs := m.Durations[0].Seconds
	for i := 1; i < len(m.Durations); i++ {
		a, b := m.Durations[i-1], m.Durations[i]
		if u <= b.Percent && b.Percent > a.Percent {
			f := max(u-a.Percent, 0) / (b.Percent - a.Percent)
			secs = math.Exp(math.Log(a.Seconds) + f*(math.Log(b.Seconds)-math.Log(a.Seconds)))
			break
		}
	}
	return max(time.Duration(math.Round(secs))*time.Second, time.Second)
}

// comment writes text as YAML comment lines of at most about 100 characters.
func comment(b *bytes.Buffer, text string) {
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 100 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}
