package replay

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteFiles writes a record into dir: record.json (the record and its summary), jobs.csv,
// samples.csv, faults.csv (when the trace set faults) and report.html.
func WriteFiles(dir string, r *Record) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, fn func(io.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		return f.Close()
	}
	var faults error
	if len(r.Faults) > 0 {
		faults = write("faults.csv", func(w io.Writer) error { return WriteFaultsCSV(w, r) })
	}
	return errors.Join(faults,
		write("record.json", func(w io.Writer) error { return WriteJSON(w, r) }),
		write("jobs.csv", func(w io.Writer) error { return WriteJobsCSV(w, r) }),
		write("samples.csv", func(w io.Writer) error { return WriteSamplesCSV(w, r) }),
		write("report.html", func(w io.Writer) error { return WriteHTML(w, r) }),
	)
}

// ReadRecord reads a record.json.
func ReadRecord(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Record *Record `json:"record"`
	}
	if err := json.Unmarshal(b, &f); err != nil || f.Record == nil {
		return nil, fmt.Errorf("%s: not a replay record: %v", path, err)
	}
	return f.Record, nil
}

// WriteJSON writes the record with its summary.
func WriteJSON(w io.Writer, r *Record) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Record  *Record `json:"record"`
		Summary Summary `json:"summary"`
	}{r, Summarize(r)})
}

func secs(d *time.Duration) string {
	if d == nil {
		return ""
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
}

// WriteJobsCSV writes one row per job; times are simulated seconds from the trace's start.
func WriteJobsCSV(w io.Writer, r *Record) error {
	c := csv.NewWriter(w)
	_ = c.Write([]string{"namespace", "job", "queue", "gang", "pods", "devices", "class", "arrival_s", "duration_s", "submitted_s", "admitted_s", "started_s", "finished_s", "wait_s", "failed", "reason"})
	for _, j := range r.Jobs {
		wait := ""
		if d, ok := j.Wait(); ok {
			wait = secs(&d)
		}
		_ = c.Write([]string{j.Namespace, j.Name, j.Queue, strconv.FormatBool(j.Gang), strconv.Itoa(j.Pods), strconv.Itoa(j.Devices), j.DeviceClass,
			secs(&j.Arrival), secs(&j.Duration), secs(j.Submitted), secs(j.Admitted), secs(j.Started), secs(j.Finished), wait, strconv.FormatBool(j.Failed), j.Reason})
	}
	c.Flush()
	return c.Error()
}

// WriteSamplesCSV writes one row per sample: pending and running pods, devices held per node
// group and per class.
func WriteSamplesCSV(w io.Writer, r *Record) error {
	c := csv.NewWriter(w)
	groups, classes := r.Groups(), r.Classes()
	head := []string{"t_s", "pending", "running", "free", "largest_free_on_a_node", "fragmented", "blocked_job", "unavailable", "faults"}
	for _, g := range groups {
		head = append(head, "allocated_group_"+g)
	}
	for _, cl := range classes {
		head = append(head, "allocated_class_"+cl)
	}
	_ = c.Write(head)
	for _, s := range r.Samples {
		row := []string{secs(&s.T), strconv.Itoa(s.Pending), strconv.Itoa(s.Running), strconv.Itoa(s.Free),
			strconv.Itoa(s.LargestFree), strconv.Itoa(s.Fragmented), s.Blocked, strconv.Itoa(s.Unavailable), strconv.Itoa(s.Faults)}
		for _, g := range groups {
			row = append(row, strconv.Itoa(s.AllocatedByGroup[g]))
		}
		for _, cl := range classes {
			row = append(row, strconv.Itoa(s.AllocatedByClass[cl]))
		}
		_ = c.Write(row)
	}
	c.Flush()
	return c.Error()
}

// WriteFaultsCSV writes one row per fault the trace set: its times (simulated seconds), where,
// what it published and the jobs holding its devices then (namespace/name, space-separated).
func WriteFaultsCSV(w io.Writer, r *Record) error {
	c := csv.NewWriter(w)
	_ = c.Write([]string{"source", "pool", "node", "device", "mode", "xid", "due_s", "applied_s", "clear_due_s", "cleared_s", "taint", "effect", "devices", "jobs_hit", "error"})
	for _, f := range r.Faults {
		var jobs []string
		for _, h := range f.Hits {
			jobs = append(jobs, h.Job)
		}
		_ = c.Write([]string{f.Source, f.Pool, f.Node, f.Device, string(f.Mode), fmtXID(f), secs(&f.Due), secs(f.Applied), secs(f.ClearDue), secs(f.Cleared),
			f.Taint, f.Effect, strconv.Itoa(f.Devices), strings.Join(slices.Compact(jobs), " "), f.Error})
	}
	c.Flush()
	return c.Error()
}

// series is one line of a chart.
type series struct {
	Name   string
	Points [][2]float64 // x: simulated seconds, y
}

var palette = []string{"#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d"}

// lineChart draws series as an SVG of width × height with axes labelled in simulated minutes
// and yLabel; ymax 0 scales to the data.
func lineChart(title, yLabel string, ss []series, ymax float64) template.HTML {
	const w, h, left, bottom, top, right = 640.0, 240.0, 48.0, 28.0, 24.0, 12.0
	var xmax float64
	for _, s := range ss {
		for _, p := range s.Points {
			xmax, ymax = max(xmax, p[0]), max(ymax, p[1])
		}
	}
	xmax, ymax = max(xmax, 1), max(ymax, 1)
	x := func(v float64) float64 { return left + v/xmax*(w-left-right) }
	y := func(v float64) float64 { return h - bottom - v/ymax*(h-bottom-top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" aria-label="%s" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f">`, template.HTMLEscapeString(title), w, h, w, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="16" class="title">%s</text>`, left, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" class="axis"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" class="axis"/>`, left, top, left, h-bottom)
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" class="tick" text-anchor="end">%s</text>`, left-4, y(v)+4, strconv.FormatFloat(v, 'g', 3, 64))
		xv := xmax * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" class="tick" text-anchor="middle">%s</text>`, x(xv), h-bottom+16, (time.Duration(xv) * time.Second).Round(time.Second).String())
	}
	fmt.Fprintf(&b, `<text x="4" y="%.0f" class="tick">%s</text>`, top-8, template.HTMLEscapeString(yLabel))
	for i, s := range ss {
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
		}
		color := palette[i%len(palette)]
		fmt.Fprintf(&b, `<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, template.HTMLEscapeString(s.Name), color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" class="legend" fill="%s">%s</text>`, w-right-150, top+14*float64(i+1), color, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// view is one replay in the page.
type view struct {
	R            *Record
	S            Summary
	Utilization  template.HTML
	Pending      template.HTML
	Unavailable  template.HTML
	Faults       []faultRow
	MoreFaults   int
	Queues, Size []pctRow
	Groups       []groupRow
}

// faultRow is one fault in the page's timeline.
type faultRow struct {
	Due, Applied, Cleared string
	FaultRecord
}

// maxFaultRows bounds the page's fault timeline; faults.csv has them all.
const maxFaultRows = 200

type pctRow struct {
	Name          string
	N             int
	P50, P90, P99 string
}

type groupRow struct {
	Name              string
	Devices           int
	Utilization, Idle string
}

func rows(m map[string]Percentiles, order []string, label func(string) string) []pctRow {
	var out []pctRow
	for _, k := range order {
		p, ok := m[k]
		if !ok {
			continue
		}
		out = append(out, pctRow{label(k), p.N, p.P50.Round(time.Second).String(), p.P90.Round(time.Second).String(), p.P99.Round(time.Second).String()})
	}
	return out
}

func newView(r *Record) view {
	s := Summarize(r)
	v := view{R: r, S: s}
	var util, pend []series
	for _, g := range r.Groups() {
		sr := series{Name: "group " + g}
		for _, sm := range r.Samples {
			if n := r.Devices[g]; n > 0 {
				sr.Points = append(sr.Points, [2]float64{sm.T.Seconds(), 100 * float64(sm.AllocatedByGroup[g]) / float64(n)})
			}
		}
		util = append(util, sr)
		v.Groups = append(v.Groups, groupRow{g, r.Devices[g], fmt.Sprintf("%.0f%%", 100*s.Utilization[g]), fmt.Sprintf("%.1f", s.IdleWhilePending[g])})
	}
	for _, c := range r.Classes() {
		sr := series{Name: "class " + c + " (devices)"}
		for _, sm := range r.Samples {
			sr.Points = append(sr.Points, [2]float64{sm.T.Seconds(), float64(sm.AllocatedByClass[c])})
		}
		pend = append(pend, sr)
	}
	p, run := series{Name: "pending pods"}, series{Name: "running pods"}
	for _, sm := range r.Samples {
		p.Points = append(p.Points, [2]float64{sm.T.Seconds(), float64(sm.Pending)})
		run.Points = append(run.Points, [2]float64{sm.T.Seconds(), float64(sm.Running)})
	}
	pend = append([]series{p, run}, pend...)
	v.Utilization = lineChart("Device utilization by node group", "% of devices held", util, 100)
	v.Pending = lineChart("Pods and devices held over simulated time", "count", pend, 0)
	v.Queues = rows(s.ByQueue, slices.Sorted(maps.Keys(s.ByQueue)), func(k string) string { return k })
	var buckets []string
	for _, b := range sizeBuckets {
		buckets = append(buckets, b.name)
	}
	v.Size = rows(s.BySize, buckets, sizeLabel)
	if len(r.Faults) > 0 {
		un, act := series{Name: "devices unavailable"}, series{Name: "faults of the trace in effect"}
		for _, sm := range r.Samples {
			un.Points = append(un.Points, [2]float64{sm.T.Seconds(), float64(sm.Unavailable)})
			act.Points = append(act.Points, [2]float64{sm.T.Seconds(), float64(sm.Faults)})
		}
		v.Unavailable = lineChart("Devices unavailable (NoSchedule/NoExecute taint or removed) and faults in effect", "count", []series{un, act}, 0)
		simTime := func(d *time.Duration) string {
			if d == nil {
				return "–"
			}
			return "t+" + d.Round(time.Second).String()
		}
		for i, f := range r.Faults {
			if i == maxFaultRows {
				v.MoreFaults = len(r.Faults) - i
				break
			}
			v.Faults = append(v.Faults, faultRow{Due: simTime(&f.Due), Applied: simTime(f.Applied), Cleared: simTime(f.Cleared), FaultRecord: f})
		}
	}
	return v
}

// WriteHTML writes one self-contained page (inline CSS and SVG, no script, no network) with
// the replays side by side: one record, or two to compare (the second also gets the
// comparison with the first).
func WriteHTML(w io.Writer, records ...*Record) error {
	var views []view
	for _, r := range records {
		views = append(views, newView(r))
	}
	data := struct {
		Views   []view
		Compare *Comparison
	}{Views: views}
	if len(records) == 2 {
		c := Compare(records[0], records[1])
		data.Compare = &c
	}
	return page.Execute(w, data)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"dur": func(d time.Duration) string { return d.Round(time.Second).String() },
	"pct": func(p Percentiles) string {
		return fmt.Sprintf("p50 %s · p90 %s · p99 %s", p.P50.Round(time.Second), p.P90.Round(time.Second), p.P99.Round(time.Second))
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>DRAForge replay report</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111}
.runs{display:flex;gap:32px;flex-wrap:wrap}
.run{flex:1;min-width:660px}
table{border-collapse:collapse;margin:8px 0 16px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
.chart .axis{stroke:#555}.chart .tick{font-size:10px;fill:#555}.chart .title{font-weight:600}.chart .legend{font-size:11px}
.compare{background:#f3f4f6;padding:8px 12px;border-radius:6px}
</style></head><body>
<h1>DRAForge replay report</h1>
{{with .Compare}}<p class="compare" id="comparison">Compared: {{.Jobs}} jobs started in both runs; same start order: <b>{{.SameOrder}}</b>;
wait difference per job: max <b>{{dur .MaxWaitDiff}}</b>{{if .Worst}} ({{.Worst}}){{end}}, mean {{dur .MeanWaitDiff}} (simulated time).</p>
{{with .Faults}}<table class="compare-faults"><tr><th></th><th>first run</th><th>second run</th></tr>
<tr><td>faults applied</td><td>{{(index . 0).Applied}}</td><td>{{(index . 1).Applied}}</td></tr>
<tr><td>faults cleared</td><td>{{(index . 0).Cleared}}</td><td>{{(index . 1).Cleared}}</td></tr>
<tr><td>jobs holding a faulted device</td><td>{{(index . 0).JobsHit}}</td><td>{{(index . 1).JobsHit}}</td></tr>
<tr><td>jobs waiting while devices were unavailable</td><td>{{(index . 0).Delayed}}</td><td>{{(index . 1).Delayed}}</td></tr></table>{{end}}{{end}}
<div class="runs">
{{range .Views}}{{$v := .}}<section class="run" data-run="{{.R.Run}}">
<h2>{{.R.Trace}} at {{.R.Speed}}×</h2>
<p>Run {{.R.Run}}: {{dur .R.Simulated}} simulated in {{dur .R.Wall}} wall; ended: {{.R.Ended}}.
{{.S.Jobs}} jobs, {{.S.Started}} started, {{.S.Finished}} finished{{if .S.Failed}}, {{.S.Failed}} failed{{end}}; peak pending pods {{.S.PeakPending}}.</p>
<p>Queue wait (arrival to all pods placed), all jobs: {{pct .S.Wait}}{{if .S.Gang.N}}; gangs ({{.S.Gang.N}}): {{pct .S.Gang}}{{end}}.</p>
{{.Utilization}}
{{.Pending}}
<h3>Node groups</h3>
<table><tr><th>group</th><th>devices</th><th>mean utilization</th><th>free devices while pods pend (fragmentation)</th></tr>
{{range .Groups}}<tr><td>{{.Name}}</td><td>{{.Devices}}</td><td>{{.Utilization}}</td><td>{{.Idle}}</td></tr>{{end}}</table>
<h3>Fragmentation</h3>
{{with .S.Fragmentation}}{{if .Worst}}<p class="fragmentation">In {{.Samples}} of {{.PendingSamples}} samples with pods pending, free devices were split across nodes:
a pending pod that one node could hold found too few free on every node (mean {{printf "%.1f" .MeanFree}} devices free then).
Worst at {{dur .Worst.T}}: {{.Worst.Free}} devices free, at most {{.Worst.LargestFree}} on one node, while <b>{{.Worst.Blocked}}</b> waited;
kube-scheduler: <i>{{.Worst.Reason}}</i></p>{{else}}<p>None: no pending pod ever found the free devices split across nodes ({{.PendingSamples}} samples with pods pending).</p>{{end}}{{end}}
<h3>Wait by queue</h3>
<table><tr><th>queue</th><th>jobs</th><th>p50</th><th>p90</th><th>p99</th></tr>
{{range .Queues}}<tr><td>{{.Name}}</td><td>{{.N}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td></tr>{{end}}</table>
<h3>Wait by job size</h3>
<table><tr><th>size</th><th>jobs</th><th>p50</th><th>p90</th><th>p99</th></tr>
{{range .Size}}<tr><td>{{.Name}}</td><td>{{.N}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td></tr>{{end}}</table>
{{with .S.Faults}}<section class="faults" id="faults"><h3>Faults</h3>
<p>{{.Faults}} faults (one per device) set by the trace: {{.Applied}} applied, {{.Cleared}} cleared by the trace{{if .Failed}}, <b>{{.Failed}} could not be written</b>{{end}}{{if .NotApplied}}, {{.NotApplied}} due after the replay ended{{end}}.
By mode: {{range $m, $n := .ByMode}}{{$m}} {{$n}}; {{end}}by effect: {{range $e, $n := .ByEffect}}{{$e}} {{$n}}; {{end}}at most {{.PeakUnavailable}} devices unavailable at once.
Faults the trace does not clear are removed when the replay ends (not with --keep).</p>
{{$v.Unavailable}}
<h4>Jobs holding a device when a fault hit it</h4>
{{if .Hit}}<table class="hit"><tr><th>job</th><th>at</th><th>fault</th><th>device</th><th>taint</th><th>expected</th><th>what happened</th></tr>
{{range .Hit}}<tr><td>{{.Job}}</td><td>t+{{dur .At}}</td><td>{{.Source}}: {{.Fault}}</td><td>{{.Where}}</td><td>{{.Taint}}</td><td>{{.Expected}}</td><td>{{.Outcome}}</td></tr>{{end}}</table>{{else}}<p>None: no job of the replay held a device when a fault changed it.</p>{{end}}
<h4>Jobs that waited while devices were unavailable</h4>
{{if .Delayed}}<table class="delayed"><tr><th>job</th><th>wait</th><th>of it while devices were unavailable</th><th>started</th></tr>
{{range .Delayed}}<tr><td>{{.Job}}</td><td>{{dur .Wait}}</td><td>{{dur .Unavailable}}</td><td>{{.Started}}</td></tr>{{end}}</table>
<p>Overlap, not cause: a job listed here waited while some devices were tainted or removed; kube-scheduler's reason for it is in jobs.csv.</p>{{else}}<p>None.</p>{{end}}
<h4>Timeline</h4>
<table class="timeline"><tr><th>due</th><th>applied</th><th>cleared</th><th>source</th><th>pool</th><th>node</th><th>device</th><th>fault</th><th>taint (effect)</th><th>devices</th><th>jobs holding them</th></tr>
{{range $v.Faults}}<tr><td>{{.Due}}</td><td>{{.Applied}}</td><td>{{.Cleared}}</td><td>{{.Source}}</td><td>{{.Pool}}</td><td>{{or .Node "every node"}}</td><td>{{.Device}}</td><td>{{.Describe}}</td><td>{{.Taint}}{{if eq .Effect "removed"}}removed{{end}}{{if .Error}} <b>error: {{.Error}}</b>{{end}}</td><td>{{.Devices}}</td><td>{{len .Hits}}</td></tr>{{end}}</table>
{{if $v.MoreFaults}}<p>…and {{$v.MoreFaults}} more in faults.csv.</p>{{end}}
</section>{{end}}
<h3>Jobs that never started</h3>
{{if .S.NeverStarted}}<table class="never"><tr><th>job</th><th>devices</th><th>first reason</th></tr>
{{range .S.NeverStarted}}<tr><td>{{.Job}}</td><td>{{.Size}}</td><td>{{.Reason}}</td></tr>{{end}}</table>{{else}}<p>None.</p>{{end}}
</section>{{end}}
</div></body></html>
`))
