package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/replay"
	"github.com/draforge/draforge/drivers/simdevice"
)

// TestReplayDriverFaults replays, at 10x through kube-scheduler, a trace whose faults put the
// NVIDIA driver's XID 79 on both GPUs of an nvidia-gpu pool at t+1m and clear it at t+3m:
// hold holds a GPU from the start for 4m, later arrives at t+1m30s for one GPU. The record
// shows both faults applied and cleared with the taint gpu.nvidia.com/xid=79:NoSchedule and
// hold as the job holding a faulted GPU; hold keeps running and finishes (NoSchedule never
// evicts), later waits with a GPU free but tainted and starts only once the faults are cleared.
// The pool's own fault (unmonitored on gpu-1), which the trace's replaced, is back during the
// replay after the clear and after it, and the report has the faults section.
func TestReplayDriverFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace")
	}
	r := newPodRigWith(t, 2, nil, map[string]any{"profile": "nvidia-gpu"})
	e, ns := r.e, r.e.Namespace
	mustCLI(t, "inject-fault", "gpus", "-n", ns, "--device", "gpu-1", "--node", r.node, "--mode", "unmonitored")
	own := func() []simdevice.Fault {
		t.Helper()
		u, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(ns).Get(t.Context(), "gpus", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := simdevice.FromUnstructured(u)
		if err != nil {
			t.Fatal(err)
		}
		return p.Spec.Faults
	}
	before := own()

	dir := t.TempDir()
	file := filepath.Join(dir, "faults.yaml")
	doc := fmt.Sprintf(`apiVersion: draforge.oaslananka/v1alpha1
kind: WorkloadTrace
metadata: {name: gpu-faults}
spec:
  namespace: %s
  deviceClass: %s
  jobs:
    - {name: hold, arrival: 0s, duration: 4m}
    - {name: later, arrival: 90s, duration: 30s}
  faults:
    - {at: 1m, clear: 3m, pool: gpus, node: %s, devices: [0, gpu-1], mode: xid, xid: 79}
`, ns, r.class, r.node)
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustCLIAt(t, kubeconfigPath, "replay", file, "--speed", "10", "--out", filepath.Join(dir, "10x"))
	t.Logf("replay:\n%s%s", res.stderr, res.stdout)
	rec, err := replay.ReadRecord(filepath.Join(dir, "10x", "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Ended != "complete" || len(rec.Faults) != 2 {
		t.Fatalf("ended %q with %d faults recorded, want complete with 2", rec.Ended, len(rec.Faults))
	}
	var hitJobs []string
	for _, f := range rec.Faults {
		if f.Applied == nil || f.Cleared == nil || f.Error != "" {
			t.Fatalf("fault %s on %s: applied %v cleared %v error %q", f.Source, f.Device, f.Applied, f.Cleared, f.Error)
		}
		// Sampled within the loop's tick (100ms wall, a simulated second) and a patch.
		if *f.Applied < time.Minute || *f.Applied > time.Minute+10*time.Second || *f.Cleared < 3*time.Minute || *f.Cleared > 3*time.Minute+10*time.Second {
			t.Errorf("fault on %s applied at %s, cleared at %s; want about 1m and 3m", f.Device, *f.Applied, *f.Cleared)
		}
		if f.Taint != "gpu.nvidia.com/xid=79:NoSchedule" || f.Effect != "NoSchedule" || f.Devices != 1 {
			t.Errorf("fault on %s: taint %q effect %q on %d devices", f.Device, f.Taint, f.Effect, f.Devices)
		}
		for _, h := range f.Hits {
			hitJobs = append(hitJobs, h.Job)
		}
	}
	hold, later := rec.Jobs[0], rec.Jobs[1]
	if !slices.Equal(hitJobs, []string{ns + "/hold"}) {
		t.Errorf("jobs holding a faulted GPU %v, want only hold", hitJobs)
	}
	if hold.Finished == nil || hold.Failed {
		t.Errorf("hold: finished %v failed %v; NoSchedule does not evict", hold.Finished, hold.Failed)
	}
	cleared := *rec.Faults[0].Cleared
	if later.Started == nil || *later.Started < cleared {
		t.Errorf("later started at %v, before the faults were cleared at %s: the tainted GPU was allocated", later.Started, cleared)
	}
	s := replay.Summarize(rec)
	f := s.Faults
	if f == nil || f.Applied != 2 || f.Cleared != 2 || f.PeakUnavailable < 2 || len(f.Hit) != 1 || f.Hit[0].Outcome != "finished" ||
		!slices.ContainsFunc(f.Delayed, func(d replay.DelayedJob) bool { return d.Job == ns+"/later" && d.Unavailable >= time.Minute }) {
		t.Errorf("fault summary %+v", f)
	}
	if !strings.Contains(res.stdout, "faults: 2 of 2 applied, 2 cleared, 0 failed; 1 jobs held a faulted device") {
		t.Errorf("replay printed %q", res.stdout)
	}
	// The pool's own fault is as it was: replaced during the fault, put back at the clear.
	if after := own(); len(after) != 1 || len(before) != 1 || after[0].Mode != before[0].Mode || after[0].Node != before[0].Node || after[0].Device.String() != before[0].Device.String() {
		t.Errorf("the pool's faults after the replay %+v, before %+v", after, before)
	}
	page, err := os.ReadFile(filepath.Join(dir, "10x", "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="faults"`, "gpu.nvidia.com/xid=79:NoSchedule", ns + "/hold", ns + "/later", "keeps running: NoSchedule"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "10x", "faults.csv")); err != nil {
		t.Error(err)
	}
}
