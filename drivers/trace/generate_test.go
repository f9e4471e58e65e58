package trace

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestGenerateFollowsTheModel draws many jobs from each model and checks the shares of sizes,
// points of the run time's distribution and the arrivals per hour of the day against the
// published numbers they come from.
func TestGenerateFollowsTheModel(t *testing.T) {
	const n = 200000
	for _, m := range Models {
		t.Run(m.Name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 0x5eed))
			var total float64
			for _, s := range m.Sizes {
				total += s.Percent
			}
			sizes := map[int]int{}
			for range n {
				sizes[m.size(rng)]++
			}
			for _, s := range m.Sizes {
				got, want := 100*float64(sizes[s.GPUs])/n, 100*s.Percent/total
				if math.Abs(got-want) > 0.4 {
					t.Errorf("%d-GPU jobs: %.2f %%, want %.2f %%", s.GPUs, got, want)
				}
			}
			var runs []time.Duration
			for range n {
				runs = append(runs, m.duration(rng))
			}
			for _, p := range m.Durations[1:] {
				at := 0
				for _, d := range runs {
					if d <= time.Duration(p.Seconds)*time.Second {
						at++
					}
				}
				if got := 100 * float64(at) / n; math.Abs(got-p.Percent) > 0.6 {
					t.Errorf("runs of at most %gs: %.2f %%, want %.2f %%", p.Seconds, got, p.Percent)
				}
			}
			// Four days from midnight: each hour of the day gets its share of the arrivals.
			byHour := [24]int{}
			for _, at := range m.arrivals(rng, n, 96*time.Hour, 0) {
				byHour[int(at.Hours())%24]++
			}
			var day float64
			for _, r := range m.Hourly {
				day += r
			}
			for h, r := range m.Hourly {
				got, want := float64(byHour[h])/n, r/day
				if math.Abs(got-want) > 0.1*want {
					t.Errorf("hour %d: %.4f of arrivals, want %.4f", h, got, want)
				}
			}
		})
	}
}

// TestGenerateWritesATrace: the document is a trace the schema accepts, with the jobs asked
// for, sorted by arrival within the span, big jobs split into pods of at most a node's
// devices (gangs when asked), run times cut to the maximum, the same for the same seed.
func TestGenerateWritesATrace(t *testing.T) {
	o := GenerateOptions{Jobs: 300, Span: 2 * time.Hour, DevicesPerNode: 8, MaxDuration: time.Hour, Gangs: true, Seed: 3}
	doc, g, err := Generate(Models["helios"], o)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Decode("helios.yaml", doc)
	if err != nil {
		t.Fatalf("the generated trace does not vet: %v\n%s", err, doc)
	}
	if len(tr.Jobs) != 300 || g.Jobs != 300 || tr.Name != "helios-300" {
		t.Fatalf("%d jobs (summary %d) named %q, want 300 named helios-300", len(tr.Jobs), g.Jobs, tr.Name)
	}
	pods, cut := 0, 0
	for _, j := range tr.Jobs {
		pods += j.Pods
		if j.Arrival < 0 || j.Arrival > o.Span {
			t.Errorf("%s arrives at %s, outside the span", j.Name, j.Arrival)
		}
		if j.Duration > time.Hour || j.Duration < time.Second {
			t.Errorf("%s runs %s, want 1s to 1h", j.Name, j.Duration)
		}
		if j.Duration == time.Hour {
			cut++
		}
		if j.Devices > 8 || (j.Pods > 1 && j.Devices != 8) || j.Gang != (j.Pods > 1) {
			t.Errorf("%s: %d pods × %d devices, gang %v; want pods of at most 8 devices, whole nodes and a gang when split", j.Name, j.Pods, j.Devices, j.Gang)
		}
		if j.DeviceClass != "draforge-replay-gpu" || j.Namespace != "draforge-replay" {
			t.Errorf("%s: class %q namespace %q", j.Name, j.DeviceClass, j.Namespace)
		}
	}
	if pods != g.Pods || cut < g.Cut {
		t.Errorf("summary: %d pods, %d cut; the trace has %d pods, %d at the maximum", g.Pods, g.Cut, pods, cut)
	}
	header := strings.Join(strings.Fields(strings.ReplaceAll(string(doc[:strings.Index(string(doc), "apiVersion")]), "#", "")), " ")
	if !strings.Contains(header, "draforge trace generate --model helios --jobs 300 --span 2h0m0s") || !strings.Contains(header, "HeliosArtifact") {
		t.Errorf("the header does not say how the trace was made and from what:\n%s", doc[:400])
	}
	again, _, _ := Generate(Models["helios"], o)
	if !bytes.Equal(doc, again) {
		t.Error("the same options wrote another trace")
	}
	o.Seed = 4
	if other, _, _ := Generate(Models["helios"], o); bytes.Equal(doc, other) {
		t.Error("another seed wrote the same trace")
	}
}

// TestGenerateSpansTheModelsRate: without a span, the jobs arrive over as long as the model's
// cluster took to submit as many.
func TestGenerateSpansTheModelsRate(t *testing.T) {
	_, g, err := Generate(Models["philly"], GenerateOptions{Jobs: 850})
	if err != nil {
		t.Fatal(err)
	}
	if g.Span != 24*time.Hour {
		t.Errorf("850 Philly jobs span %s, want 24h (850 a day)", g.Span)
	}
}

func TestGenerateRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o    GenerateOptions
		want string
	}{
		{GenerateOptions{Jobs: 0}, "jobs 0"},
		{GenerateOptions{Jobs: 100001}, "jobs 100001"},
		{GenerateOptions{Jobs: 5, StartHour: 24}, "start hour 24"},
		{GenerateOptions{Jobs: 5, Span: -time.Second}, "span -1s"},
		{GenerateOptions{Jobs: 5, MaxDuration: time.Millisecond}, "max duration 1ms"},
		{GenerateOptions{Jobs: 5, DevicesPerNode: 129}, "devices per node 129"},
	} {
		if _, _, err := Generate(Models["helios"], tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.o, err, tc.want)
		}
	}
}
