package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers/replay"
	"github.com/draforge/draforge/drivers/trace"
	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// snapshotScenarios are the example scenarios the round trip reproduces: counter sets and
// partitions (MIG, device groups), consumable capacity, device taints from faults, PCIe
// alignment, several nodes, CEL selectors, first-available and claims that must stay pending.
var snapshotScenarios = []string{
	"nvidia-mig-a100", "nvidia-mig-h100", "nvidia-gpu-shares", "example-net", "capacity-exhausted", "device-groups-partitions",
	"gpu-nic-alignment", "multi-node", "cel-selectors", "first-available", "insufficient-capacity", "google-tpu",
}

// TestSnapshotRoundTrip: `draforge snapshot` of a cluster running example scenarios, applied
// with `draforge scenario apply` to a fresh control plane, snapshots to the same documents; and
// the scenarios' claims, each used by a pod, get the same kube-scheduler verdicts (their outcome
// lines) on both, the second cluster having only the snapshot's nodes, slices and classes.
func TestSnapshotRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes")
	}
	if e2eutil.ExistingCluster(os.Getenv) != "" {
		t.Skip("needs fresh control planes")
	}
	dir := t.TempDir()
	type file struct {
		src    []byte
		docs   []*unstructured.Unstructured
		claims []*unstructured.Unstructured
	}
	var files []file
	for _, name := range snapshotScenarios {
		src, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "scenarios", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		f := file{src: src}
		for _, u := range decodeDocs(t, src) {
			if u.GetKind() == "ResourceClaim" {
				f.claims = append(f.claims, u)
			} else {
				f.docs = append(f.docs, u)
			}
		}
		files = append(files, f)
	}
	start := func(name string) *env {
		c, err := cluster.Start(t.Context(), cluster.Options{Dir: filepath.Join(dir, name), Log: os.Stderr, Extra: cluster.Workloads})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop() })
		return &env{e2eutil.NewEnv(t, c.Kubeconfig)}
	}
	// verdicts applies each scenario's claims in order and checks its outcome lines.
	verdicts := func(e *env) {
		for i, f := range files {
			outcomes := outcomeLine.FindAllStringSubmatch(string(f.src), -1)
			for _, c := range f.claims {
				// A pod that uses the claim, created first: kube-scheduler allocates the claim
				// for it on both clusters (on the copy DRAForge publishes none of the devices,
				// so it never allocates a claim there itself, as beside a real driver).
				e.Apply(t, "", verdictPod(c.GetNamespace(), c.GetName()))
				e.Apply(t, "", c)
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("explain %s/%s:\n%s", c.GetNamespace(), c.GetName(), runCLIAt(t, e.Kubeconfig, "explain", "-n", c.GetNamespace(), c.GetName()).stdout)
					}
				})
				want := outcomeFor(outcomes, c.GetName())
				if want == nil {
					t.Fatalf("%s: claim %s has no outcome line", snapshotScenarios[i], c.GetName())
				}
				if want[2] == "pending" {
					// Decided: kube-scheduler found no room for the pod, and the claim has none.
					eventually(t, 30*time.Second, func() (bool, string) {
						p, err := e.Kube.CoreV1().Pods(c.GetNamespace()).Get(t.Context(), "verdict-"+c.GetName(), metav1.GetOptions{})
						if err != nil {
							return false, err.Error()
						}
						return unschedulable(p), fmt.Sprintf("pod verdict-%s: %+v", c.GetName(), p.Status.Conditions)
					})
				}
				e.checkOutcome(t, c.GetNamespace(), c.GetName(), want[2], want[3], want[4])
			}
		}
	}

	// A: the example nodes and the scenarios' pools, classes and taint rules.
	a := start("a")
	a.Setup(t)
	e2eutil.StartController(t, a.Kubeconfig)
	for _, f := range files {
		for _, u := range f.docs {
			a.Apply(t, "", u)
		}
	}
	for _, f := range files {
		for _, u := range f.docs {
			if u.GetKind() == "SimulatedDevicePool" {
				a.WaitPoolReady(t, u.GetNamespace(), u.GetName())
			}
		}
	}
	// A workload that stays pending (its class matches no device), queued and with a run-for:
	// the trace of the workloads in flight must carry it as it is.
	for _, u := range decodeDocs(t, []byte(inFlightJob)) {
		a.Apply(t, "", u)
	}
	first := filepath.Join(dir, "first.yaml")
	mustCLIAt(t, a.Kubeconfig, "snapshot", "-o", first)
	verdicts(a)
	inFlight := filepath.Join(dir, "in-flight.yaml")
	snap := mustCLIAt(t, a.Kubeconfig, "snapshot", "-o", filepath.Join(dir, "after.yaml"), "--trace", inFlight, "--trace-duration", "2m")
	tr, ranOnA := inFlightTrace(t, a, inFlight, snap.stderr)

	// B: nothing but the snapshot (and the CRDs the controller serves).
	b := start("b")
	b.InstallCRDs(t)
	e2eutil.StartController(t, b.Kubeconfig)
	mustCLIAt(t, b.Kubeconfig, "scenario", "apply", "-f", first)
	s1 := documents(t, first)
	slices, err := a.Kube.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		l, err := b.Kube.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == len(slices.Items), fmt.Sprintf("%d slices in the copy, %d in the original", len(l.Items), len(slices.Items))
	})
	second := filepath.Join(dir, "second.yaml")
	mustCLIAt(t, b.Kubeconfig, "snapshot", "-o", second)
	if s2 := documents(t, second); s1 != s2 {
		t.Fatalf("the snapshot of the copy differs from the snapshot it was made from:\n%s", lineDiff(s1, s2))
	}
	if !strings.Contains(s1, "kind: ResourceSlice") || !strings.Contains(s1, "sharedCounters") || !strings.Contains(s1, "kind: SimulatedNodes") {
		t.Fatalf("the snapshot lacks slices, counters or nodes:\n%s", s1)
	}
	// The workloads in flight on A, replayed on the copy of A at 60x: the verdict pods run
	// there as jobs of their own; the pending job stays pending.
	rec := replayedAt(t, b.Kubeconfig, inFlight, "60", filepath.Join(dir, "replay"))
	sum := replay.Summarize(rec)
	never := map[string]bool{}
	for _, n := range sum.NeverStarted {
		never[n.Job] = true
	}
	if !never["draforge-inflight/inflight"] || sum.Finished != sum.Started {
		t.Errorf("replay of the %d workloads in flight: %+v", len(tr.Jobs), sum)
	}
	// What ran on A runs on its copy.
	for job := range ranOnA {
		if never[job] {
			t.Errorf("%s ran on the original but never started on its copy: %+v", job, sum.NeverStarted)
		}
	}

	// The scenarios' namespaces, for their claims; no pool.
	for _, f := range files {
		for _, u := range f.docs {
			if u.GetKind() == "Namespace" {
				b.Apply(t, "", u)
			}
		}
	}
	verdicts(b)
}

// documents is a snapshot file without its header comment.
func documents(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(l, "# ") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

// lineDiff shows the first lines where two texts differ.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			lo, hi := max(0, i-5), i+10
			return fmt.Sprintf("line %d:\n--- first\n", i+1) + strings.Join(al[min(lo, len(al)):min(hi, len(al))], "\n") + "\n--- second\n" + strings.Join(bl[min(lo, len(bl)):min(hi, len(bl))], "\n")
		}
	}
	return "(equal)"
}

// verdictPod is a pod using claim name, for kube-scheduler to decide.
func verdictPod(ns, claim string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "verdict-" + claim, "namespace": ns},
		"spec": map[string]any{
			"resourceClaims": []any{map[string]any{"name": "devices", "resourceClaimName": claim}},
			"containers": []any{map[string]any{"name": "c", "image": "registry.k8s.io/pause:3.10",
				"resources": map[string]any{"claims": []any{map[string]any{"name": "devices"}}}}},
		},
	}}
}

// inFlightJob is a queued Job of 2 pods × 3 devices of a class no device matches: it stays
// pending, as a workload in flight.
const inFlightJob = `
apiVersion: v1
kind: Namespace
metadata: {name: draforge-inflight}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: draforge-inflight-none}
spec:
  selectors:
    - cel: {expression: 'device.driver == "none.draforge.oaslananka"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: three, namespace: draforge-inflight}
spec:
  spec:
    devices:
      requests:
        - name: d
          exactly: {deviceClassName: draforge-inflight-none, count: 3}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: inflight
  namespace: draforge-inflight
  labels: {kueue.x-k8s.io/queue-name: team-a}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations: {draforge.oaslananka/run-for: 10m}
    spec:
      restartPolicy: Never
      resourceClaims: [{name: d, resourceClaimTemplateName: three}]
      containers:
        - name: c
          image: registry.k8s.io/pause:3.10
          resources: {claims: [{name: d}]}
`

// inFlightTrace reads the trace of the workloads in flight on e: a valid trace that holds the
// pending Job as it is and each running verdict pod (a pod of its own with a claim) as a job of
// one pod, running for the --trace-duration. It returns the trace and the jobs that ran on e.
func inFlightTrace(t *testing.T, e *env, path, stderr string) (*trace.Trace, map[string]bool) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Decode(path, src)
	if err != nil {
		t.Fatalf("the trace of the workloads in flight: %v\n%s", err, src)
	}
	pods, err := e.Kube.CoreV1().Pods(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "verdict-") && p.Status.Phase == corev1.PodRunning {
			running[p.Namespace+"/"+p.Name] = true
		}
	}
	var inflight *trace.Job
	verdictJobs := 0
	for i, j := range tr.Jobs {
		switch {
		case j.Key() == "draforge-inflight/inflight":
			inflight = &tr.Jobs[i]
		case running[j.Key()]:
			verdictJobs++
			if j.Pods != 1 || j.Duration != 2*time.Minute || j.Arrival >= tr.Jobs[len(tr.Jobs)-1].Arrival {
				t.Errorf("verdict job %+v: want 1 pod for 2m, before the pending job", j)
			}
		}
	}
	if inflight == nil || inflight.Pods != 2 || inflight.Devices != 3 || inflight.DeviceClass != "draforge-inflight-none" ||
		inflight.Queue != "team-a" || inflight.Duration != 10*time.Minute {
		t.Errorf("the pending Job in the trace: %+v\n%s", inflight, src)
	}
	// Each running verdict pod is a job of the trace, or left out with its reason.
	for key := range running {
		if !slices.ContainsFunc(tr.Jobs, func(j trace.Job) bool { return j.Key() == key }) {
			if !strings.Contains(stderr, "left out: "+key+": ") {
				t.Errorf("running pod %s is neither in the trace nor left out:\n%s", key, stderr)
			}
			delete(running, key)
		}
	}
	if verdictJobs == 0 || verdictJobs != len(running) {
		t.Errorf("%d running verdict pods in the trace, %d expected", verdictJobs, len(running))
	}
	return tr, running
}
