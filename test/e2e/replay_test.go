package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/draforge/draforge/drivers/replay"
	"github.com/draforge/draforge/drivers/trace"
	"github.com/draforge/draforge/test/browser"
)

// replayTolerance is the largest difference of a job's wait (simulated time) between
// examples/traces/compression.yaml replayed at 1x and at 60x that the test accepts;
// docs/your-cluster.md states it with the measured error. At 60x a wall second is a simulated
// minute: the control plane's own latency (a Job's pods created, scheduled, started; a pod's end
// noticed and its claim freed) and the simulated kubelet's second-resolution start time are the
// error.
const replayTolerance = 30 * time.Second

// replayCluster applies the cluster of the example traces and a controller on the e2e cluster.
func replayCluster(t *testing.T) {
	e := newEnv(t)
	installCRD(t, e)
	startController(t)
	applyTraceCluster(t, e)
}

// applyTraceCluster applies examples/traces/small-cluster.yaml, the cluster the example traces
// run on, and more (repository paths, e.g. queues-cluster.yaml) on e, deleted when the test
// ends, and waits until its pool is Ready.
func applyTraceCluster(t *testing.T, e *env, more ...string) {
	t.Helper()
	files := []string{filepath.Join(repoRoot(), "examples", "traces", "small-cluster.yaml")}
	for _, f := range more {
		files = append(files, filepath.Join(repoRoot(), f))
	}
	docs := e.ApplyFiles(t, "", files...)
	t.Cleanup(func() { e.DeleteDocs(t, docs) })
	e.WaitPoolReady(t, "draforge-replay", "replay-gpus")
}

// replayed replays trace at speed into dir on the shared cluster and reads its record.
func replayed(t *testing.T, trace, speed, dir string) *replay.Record {
	t.Helper()
	return replayedAt(t, kubeconfigPath, trace, speed, dir, "--group-by", "draforge.test/rack")
}

// replayedAt replays trace at speed into dir on the cluster of kubeconfig and reads its record.
func replayedAt(t *testing.T, kubeconfig, trace, speed, dir string, args ...string) *replay.Record {
	t.Helper()
	r := mustCLIAt(t, kubeconfig, append([]string{"replay", trace, "--speed", speed, "--out", dir}, args...)...)
	t.Logf("replay of %s at %sx:\n%s%s", trace, speed, r.stderr, r.stdout)
	rec, err := replay.ReadRecord(filepath.Join(dir, "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestReplayTimeCompression replays the same trace at 1x and at 60x through kube-scheduler:
// the jobs start in the same order and each job's wait differs by at most replayTolerance.
func TestReplayTimeCompression(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace for three minutes")
	}
	replayCluster(t)
	dir := t.TempDir()
	slow := replayed(t, "examples/traces/compression.yaml", "1", filepath.Join(dir, "1x"))
	fast := replayed(t, "examples/traces/compression.yaml", "60", filepath.Join(dir, "60x"))
	for _, r := range []*replay.Record{slow, fast} {
		if s := replay.Summarize(r); s.Finished != 6 || r.Ended != "complete" || s.Wait.Max == 0 {
			t.Errorf("%gx: ended %q, %d of 6 finished, longest wait %s (jobs 4-6 wait for a node)", r.Speed, r.Ended, s.Finished, s.Wait.Max)
		}
	}
	// At 1x the waits are the trace's own: job-4 waits for job-2 to end (at 70s), job-5 and
	// job-6 for job-1 (90s) and job-3 (100s), give or take the control plane's second.
	for i, want := range map[int]time.Duration{3: 40 * time.Second, 4: 50 * time.Second, 5: 50 * time.Second} {
		if w, ok := slow.Jobs[i].Wait(); !ok || w < want-3*time.Second || w > want+3*time.Second {
			t.Errorf("1x: %s waited %s, want %s ± 3s", slow.Jobs[i].Name, w, want)
		}
	}
	c := replay.Compare(slow, fast)
	t.Logf("time-compression error of examples/traces/compression.yaml, 60x against 1x: %d jobs, same order %v, wait difference max %s (%s), mean %s",
		c.Jobs, c.SameOrder, c.MaxWaitDiff, c.Worst, c.MeanWaitDiff)
	if c.Jobs != 6 || !c.SameOrder || c.MaxWaitDiff > replayTolerance {
		t.Errorf("60x against 1x: %+v; want the same order and waits within %s", c, replayTolerance)
	}
	if out := mustCLI(t, "replay", "--compare", filepath.Join(dir, "1x"), filepath.Join(dir, "60x"), "--out", filepath.Join(dir, "compare")); !strings.Contains(out, "6 jobs started in both; same start order: true") {
		t.Errorf("compare printed %q", out)
	}
}

// TestReplaySmallTrace replays examples/traces/small.yaml through kube-scheduler at 60x, checks
// what it recorded, and that the report's and a comparison's charts render with data in
// Chromium.
func TestReplaySmallTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace")
	}
	replayCluster(t)
	dir := t.TempDir()
	r := replayed(t, "examples/traces/small.yaml", "60", filepath.Join(dir, "60x"))
	s := replay.Summarize(r)
	// 13 jobs fit; too-big asks one pod for 8 GPUs where nodes have 4.
	if s.Started != 13 || s.Finished != 13 || len(s.NeverStarted) != 1 || s.NeverStarted[0].Job != "draforge-replay/too-big" ||
		!strings.Contains(s.NeverStarted[0].Reason, "cannot allocate all claims") || !strings.HasPrefix(r.Ended, "stuck") {
		t.Errorf("ended %q, summary %+v", r.Ended, s)
	}
	// Some jobs wait for others to end (train-d, 3 pods × 4 GPUs, needs every GPU).
	if s.Wait.Max == 0 || s.PeakPending == 0 {
		t.Errorf("max wait %s, peak pending %d: the trace should contend", s.Wait.Max, s.PeakPending)
	}
	if s.Utilization["r1"] <= 0 || s.Utilization["r2"] <= 0 || r.Devices["r1"] < 8 || r.Devices["r2"] < 4 {
		t.Errorf("devices %v, utilization %v", r.Devices, s.Utilization)
	}
	// Fragmentation: pair waits with 3 GPUs free, one on each node.
	f := replay.Summarize(replayed(t, "examples/traces/fragmentation.yaml", "60", filepath.Join(dir, "fragmentation"))).Fragmentation
	if w := f.Worst; w == nil || w.Blocked != "draforge-replay/pair" || w.Free != 3 || w.LargestFree != 1 || !strings.Contains(w.Reason, "cannot allocate all claims") {
		t.Errorf("fragmentation %+v, worst sample %+v: want pair blocked with 3 GPUs free, 1 per node, and kube-scheduler's reason", f, w)
	}
	r2 := replayed(t, "examples/traces/small.yaml", "120", filepath.Join(dir, "120x"))
	if out := mustCLI(t, "replay", "--compare", filepath.Join(dir, "60x"), filepath.Join(dir, "120x"), "--out", filepath.Join(dir, "compare")); !strings.Contains(out, "13 jobs started in both") {
		t.Errorf("compare of %s and %s printed %q", r.Run, r2.Run, out)
	}

	if ok, why := browser.Available(); !ok {
		if os.Getenv(browser.SkipEnv) == "1" {
			t.Skip(why)
		}
		t.Fatal(why)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// Every line of every chart is drawn: a polyline of several points with a rendered width.
	drawn := `[...document.querySelectorAll("svg.chart polyline")].length >= 4 && [...document.querySelectorAll("svg.chart polyline")].every(p => p.points.length > 2 && p.getBBox().width > 100)`
	small := []string{"draforge-replay/too-big", "cannot allocate all claims", "group r1", "pending pods"}
	for page, want := range map[string][]string{
		"/60x/report.html":           small,
		"/compare/compare.html":      small,
		"/fragmentation/report.html": {"free devices were split across nodes", "<b>draforge-replay/pair</b> waited", "cannot allocate all claims", "group r1"},
	} {
		dom, err := browser.RenderedDOM(ctx, srv.URL+page, drawn)
		if err != nil {
			t.Fatalf("%s: %v\n%s", page, err, dom)
		}
		for _, s := range want {
			if !strings.Contains(dom, s) {
				t.Errorf("%s lacks %q", page, s)
			}
		}
	}
}

// TestReplayGeneratedTrace generates a Helios-shaped trace with `draforge trace generate` for
// the 12 GPUs of the example cluster (nodes of 4, so bigger jobs are split into pods of 4) and
// replays it at 60x through kube-scheduler: every job is submitted, starts and ends (a job of
// several pods that is not a gang runs pod by pod when the cluster is smaller than it).
func TestReplayGeneratedTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace")
	}
	replayCluster(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "helios.yaml")
	r := mustCLIAt(t, kubeconfigPath, "trace", "generate", "--model", "helios", "--jobs", "24", "--span", "3m",
		"--max-duration", "90s", "--devices-per-node", "4", "--seed", "5", "-o", file)
	if !strings.Contains(r.stderr, "24 jobs") {
		t.Errorf("generate said %q", r.stderr)
	}
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Decode(file, src)
	if err != nil {
		t.Fatal(err)
	}
	split := 0
	for _, j := range tr.Jobs {
		if j.Pods > 1 {
			split++
		}
	}
	if split == 0 {
		t.Fatal("seed 5 no longer draws a job bigger than a node: pick a seed that does")
	}
	rec := replayed(t, file, "60", filepath.Join(dir, "60x"))
	s := replay.Summarize(rec)
	submitted := 0
	for _, j := range rec.Jobs {
		if j.Submitted != nil {
			submitted++
		}
	}
	if rec.Ended != "complete" || submitted != 24 || s.Started != 24 || s.Finished != 24 {
		t.Errorf("ended %q: %d submitted, %d started, %d finished (%d jobs split into pods of 4); want all 24",
			rec.Ended, submitted, s.Started, s.Finished, split)
	}
}
