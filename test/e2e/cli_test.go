package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/machines"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

type cliResult struct {
	stdout, stderr string
	code           int
}

func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLIAt(t, kubeconfigPath, args...)
}

// runCLIAt runs draforge from the repository root against the cluster of kubeconfig.
func runCLIAt(t *testing.T, kubeconfig string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), draforgeBinary(t), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Dir = repoRoot()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run draforge %v: %v", args, err)
	}
	return r
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	return mustCLIAt(t, kubeconfigPath, args...).stdout
}

// mustCLIAt is runCLIAt, failing the test unless draforge exits 0.
func mustCLIAt(t *testing.T, kubeconfig string, args ...string) cliResult {
	t.Helper()
	r := runCLIAt(t, kubeconfig, args...)
	if r.code != 0 {
		t.Fatalf("draforge %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// installCRD applies the SDP CRD and the simulated nodes (see env.installCRDs).
func installCRD(t *testing.T, e *env) { e.Setup(t) }

// createNodes returns node-a/b/c (cluster-scoped, from examples/simulated-nodes.yaml, shared by tests).
func createNodes(t *testing.T, e *env) []*corev1.Node {
	t.Helper()
	e.Setup(t)
	var out []*corev1.Node
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		n, err := e.Kube.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// publish writes the pool's desired slices (what the controller would publish).
func publish(t *testing.T, e *env, p *simdevice.Pool, nodes []*corev1.Node) []*resourcev1.ResourceSlice {
	t.Helper()
	slices, err := simdevice.DesiredSlices(p, nodes)
	if err != nil {
		t.Fatal(err)
	}
	var out []*resourcev1.ResourceSlice
	for _, s := range slices {
		s.Spec.Pool.Generation = 1
		got, err := e.Kube.ResourceV1().ResourceSlices().Create(t.Context(), s, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create slice: %v", err)
		}
		t.Cleanup(func() {
			_ = e.Kube.ResourceV1().ResourceSlices().Delete(context.Background(), got.Name, metav1.DeleteOptions{})
		})
		out = append(out, got)
	}
	return out
}

func getPool(t *testing.T, e *env, ns, name string) *simdevice.Pool {
	t.Helper()
	u, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := simdevice.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIScenarioDiscoverClaimsGraph(t *testing.T) {
	e := newEnv(t)
	installCRD(t, e)
	nodes := createNodes(t, e)
	const ns = "draforge-basic-gpu"
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		// TestScenarios applies the same scenario: a namespace still terminating would vanish
		// under it.
		eventually(t, 60*time.Second, func() (bool, string) {
			_, err := e.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprintf("namespace %s: %v", ns, err)
		})
	})
	t.Cleanup(func() {
		_ = e.Kube.ResourceV1().DeviceClasses().Delete(t.Context(), "draforge-basic-gpu", metav1.DeleteOptions{})
	})

	out := mustCLI(t, "scenario", "apply", "-f", "examples/scenarios/basic-gpu.yaml")
	// Apply order: namespace, class, pool, claim.
	want := []string{"Namespace draforge-basic-gpu", "DeviceClass draforge-basic-gpu", "SimulatedDevicePool draforge-basic-gpu/basic-gpu", "ResourceClaim draforge-basic-gpu/single-gpu"}
	last := -1
	for _, w := range want {
		i := strings.Index(out, w+" serverside-applied")
		if i <= last {
			t.Fatalf("apply output out of order or missing %q:\n%s", w, out)
		}
		last = i
	}
	// Re-applying is idempotent.
	mustCLI(t, "scenario", "apply", "-f", "examples/scenarios/basic-gpu.yaml")

	publish(t, e, getPool(t, e, ns, "basic-gpu"), nodes)

	var disc struct {
		Pools []struct {
			Driver, Pool, Node, SDP, Health string
			Generation                      int64
			Consistent                      bool
			DeviceCount                     int `json:"deviceCount"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "discover", "-n", ns, "-o", "json")), &disc); err != nil {
		t.Fatal(err)
	}
	if len(disc.Pools) != 1 {
		t.Fatalf("want 1 pool in %s, got %+v", ns, disc.Pools)
	}
	p := disc.Pools[0]
	if p.Pool != simdevice.PoolNameFor(ns, "basic-gpu", "node-a") || p.Node != "node-a" || p.DeviceCount != 2 || !p.Consistent || p.Health != "Healthy" || p.SDP != ns+"/basic-gpu" || p.Generation != 1 {
		t.Errorf("pool %+v", p)
	}
	if table := mustCLI(t, "discover", "-n", ns, "--devices"); !strings.Contains(table, "gpu-1") || !strings.Contains(table, "HEALTH") {
		t.Errorf("discover table:\n%s", table)
	}

	var claims []struct {
		Namespace, Name, State string
		Requests               []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "claims", "-n", ns, "-o", "json")), &claims); err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].Name != "single-gpu" || claims[0].State != "Pending" || len(claims[0].Requests) != 1 {
		t.Errorf("claims %+v", claims)
	}
	if all := mustCLI(t, "claims", "-A"); !strings.Contains(all, "NAMESPACE") || !strings.Contains(all, "single-gpu") {
		t.Errorf("claims -A:\n%s", all)
	}

	// Without the controller the claim is pending; explain says it fits on node-a.
	if ex := mustCLI(t, "explain", "-n", ns, "single-gpu"); !strings.Contains(ex, "claim fits on node node-a") {
		t.Errorf("explain:\n%s", ex)
	}

	var g struct {
		Nodes []struct{ ID, Kind string }
		Edges []struct{ From, To, Kind string }
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "graph", "-o", "json")), &g); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, n := range g.Nodes {
		ids[n.ID] = n.Kind
	}
	for id, kind := range map[string]string{
		"sdp:" + ns + "/basic-gpu": "SimulatedDevicePool",
		"pool:" + simdevice.DefaultDriverName + "/" + simdevice.PoolNameFor(ns, "basic-gpu", "node-a"): "ResourcePool",
		"node:node-a":                 "Node",
		"class:draforge-basic-gpu":    "DeviceClass",
		"claim:" + ns + "/single-gpu": "ResourceClaim",
		"device:" + simdevice.DefaultDriverName + "/" + simdevice.PoolNameFor(ns, "basic-gpu", "node-a") + "/gpu-0": "Device",
	} {
		if ids[id] != kind {
			t.Errorf("graph lacks %s %s", kind, id)
		}
	}
	// The graph is not silently limited to the default namespace: the per-test namespace's
	// objects are cluster-wide neighbours, and -n limits.
	if dot := mustCLI(t, "graph", "-n", ns, "-o", "dot"); !strings.Contains(dot, "single-gpu") || strings.Contains(dot, "harness-") {
		t.Errorf("graph -n:\n%s", dot)
	}
	if mmd := mustCLI(t, "graph", "-o", "mermaid"); !strings.HasPrefix(mmd, "flowchart LR") {
		t.Errorf("mermaid:\n%s", mmd)
	}

	// inject-fault changes the SDP spec; clear-faults removes it.
	mustCLI(t, "inject-fault", "basic-gpu", "-n", ns, "--device", "gpu-1", "--node", "node-a", "--mode", "unhealthy")
	pool := getPool(t, e, ns, "basic-gpu")
	if len(pool.Spec.Faults) != 1 || pool.Spec.Faults[0].Device.String() != "gpu-1" || pool.Spec.Faults[0].Mode != simdevice.FaultUnhealthy || pool.Spec.Faults[0].Node != "node-a" {
		t.Fatalf("faults after inject: %+v", pool.Spec.Faults)
	}
	mustCLI(t, "inject-fault", "basic-gpu", "-n", ns, "--device", "1", "--node", "node-a", "--mode", "disappear")
	if pool = getPool(t, e, ns, "basic-gpu"); len(pool.Spec.Faults) != 1 || pool.Spec.Faults[0].Mode != simdevice.FaultDisappear {
		t.Fatalf("fault not replaced: %+v", pool.Spec.Faults)
	}
	if r := runCLI(t, "inject-fault", "basic-gpu", "-n", ns, "--device", "gpu-7", "--mode", "unhealthy"); r.code != 1 || !strings.Contains(r.stderr, "no device gpu-7") {
		t.Errorf("bad device: %+v", r)
	}
	mustCLI(t, "clear-faults", "basic-gpu", "-n", ns)
	if pool = getPool(t, e, ns, "basic-gpu"); len(pool.Spec.Faults) != 0 {
		t.Fatalf("faults after clear: %+v", pool.Spec.Faults)
	}

	// reset deletes what the file declares; a second reset finds nothing and succeeds.
	out = mustCLI(t, "scenario", "reset", "-f", "examples/scenarios/basic-gpu.yaml")
	if !strings.Contains(out, "DeviceClass draforge-basic-gpu deleted") {
		t.Errorf("reset:\n%s", out)
	}
	if out = mustCLI(t, "scenario", "reset", "-f", "examples/scenarios/basic-gpu.yaml"); !strings.Contains(out, "DeviceClass draforge-basic-gpu not found") {
		t.Errorf("second reset:\n%s", out)
	}
}

func TestCLIDoctor(t *testing.T) {
	e := newEnv(t)
	installCRD(t, e)
	rep := doctorJSON(t, e.Namespace)
	status := map[string]string{}
	for _, res := range rep.Results {
		status[res.ID] = res.Status
	}
	for id, want := range map[string]string{"DRA001": "PASS", "DRA002": "PASS", "DRA003": "PASS", "DRA004": "SKIP", "DRA011": "PASS"} {
		if status[id] != want {
			t.Errorf("%s = %s, want %s (%+v)", id, status[id], want, rep.Results)
		}
	}
	// The default profile: DRA's GA gate on, DRAWorkloadResourceClaims (beta, off by default) off.
	for _, res := range rep.Results {
		if res.ID == "DRA011" && (!strings.Contains(res.Message, "DRA and workload-scheduling gates on") ||
			!slices.Contains(res.Evidence, "gate DRAWorkloadResourceClaims=false (BETA)") ||
			!slices.Contains(res.Evidence, "gate DRAConsumableCapacity=true (BETA)")) {
			t.Errorf("DRA011: %s %v", res.Message, res.Evidence)
		}
	}
	// A controller URL that does not answer is a FAIL and exit code 1.
	r := runCLI(t, "doctor", "-n", e.Namespace, "--controller-url", "http://127.0.0.1:1", "--request-timeout", "2s")
	if r.code != 1 || !strings.Contains(r.stdout, "DRA004") || !strings.Contains(r.stdout, "FAIL") {
		t.Errorf("unreachable controller: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// doctorResult is one check of `draforge doctor -o json`.
type doctorResult struct {
	ID, Status, Message string
	Evidence            []string
}

// doctorJSON runs `draforge doctor -n ns -o json` and decodes its report.
func doctorJSON(t *testing.T, ns string) struct{ Results []doctorResult } {
	t.Helper()
	r := runCLI(t, "doctor", "-n", ns, "-o", "json")
	var rep struct{ Results []doctorResult }
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return rep
}

func TestCLIExplainMissingClassAndNotFound(t *testing.T) {
	e := newEnv(t)
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan-class", Namespace: e.Namespace},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "does-not-exist-" + e.Namespace},
		}}}},
	}
	if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "explain", "-n", e.Namespace, "orphan-class")
	for _, want := range []string{"ClassNotFound", `create DeviceClass "does-not-exist-` + e.Namespace + `"`} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	var res struct {
		ReasonCounts map[string]int `json:"reasonCounts"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "explain", "-n", e.Namespace, "orphan-class", "-o", "json")), &res); err != nil || res.ReasonCounts["ClassNotFound"] != 1 {
		t.Errorf("json reasonCounts %v (%v)", res.ReasonCounts, err)
	}

	r := runCLI(t, "explain", "-n", e.Namespace, "nope")
	if r.code != 1 || strings.TrimSpace(r.stderr) != `draforge: ResourceClaim "nope" not found in namespace "`+e.Namespace+`"` {
		t.Errorf("not found: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestCLIScenarioVet(t *testing.T) {
	r := runCLI(t, "scenario", "vet", "test/scenarios/invalid/claim-typo.yaml")
	if r.code != 1 || !strings.Contains(r.stderr, "test/scenarios/invalid/claim-typo.yaml:13:11: ") || !strings.Contains(r.stderr, "deviceClasName: field not allowed") {
		t.Errorf("vet invalid: exit %d\n%s", r.code, r.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(repoRoot(), "examples/scenarios/*.yaml"))
	if len(files) == 0 {
		t.Fatal("no example scenarios")
	}
	if out := mustCLI(t, append([]string{"scenario", "vet"}, files...)...); strings.Count(out, ": ok") != len(files) {
		t.Errorf("vet examples:\n%s", out)
	}
	// apply refuses invalid files before talking to the server.
	r = runCLI(t, "scenario", "apply", "-f", "test/scenarios/invalid/unknown-kind.yaml")
	if r.code != 1 || !strings.Contains(r.stderr, "unknown-kind.yaml:") {
		t.Errorf("apply invalid: exit %d\n%s", r.code, r.stderr)
	}
	// apply refuses, before applying anything, what the cluster does not serve: the suite's
	// control plane has the default profile, without PodGroups.
	if e2eutil.ExistingCluster(os.Getenv) == "" {
		r = runCLI(t, "scenario", "apply", "-f", "examples/scenarios/gang.yaml")
		if r.code != 1 || !strings.Contains(r.stderr, "(PodGroup draforge-gang/train): scheduling.k8s.io/v1beta1 PodGroup is not served by this cluster") ||
			!strings.Contains(r.stderr, "PROFILE=dra-all") {
			t.Errorf("apply gang on the default profile: exit %d\n%s", r.code, r.stderr)
		}
		if _, err := newEnv(t).Kube.CoreV1().Namespaces().Get(t.Context(), "draforge-gang", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("apply of an unserved scenario created its namespace: %v", err)
		}
	}
}

func TestCLIMachines(t *testing.T) {
	out := mustCLI(t, "machines", "vet")
	if !strings.Contains(out, "machine pool ok") || !strings.Contains(out, "machine claim ok") || !strings.Contains(out, "machine node ok") ||
		!strings.Contains(out, "machine pod ok") || !strings.Contains(out, "machine computedomain ok") {
		t.Errorf("machines vet:\n%s", out)
	}
	if g := mustCLI(t, "machines", "graph"); strings.Count(g, "stateDiagram-v2") != len(machines.Names) {
		t.Errorf("machines graph:\n%s", g)
	}
	dir := t.TempDir()
	bad := "package machines\n\nmachine: x: {\n\tresource: {group: \"a\", version: \"v1\", resource: \"b\"}\n\tnamespaced: true\n\tstates: {a: {}, failed: terminal: true}\n\tinitial: \"a\"\n\tterminalState: \"failed\"\n\tanyState: [{event: \"e\", to: \"a\",\n\t\twhen: observe: \"noSuchObservation\"}]\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "x.cue"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "machines", "vet", dir)
	if r.code != 1 || !strings.Contains(r.stderr, filepath.Join(dir, "x.cue")+":10:") || !strings.Contains(r.stderr, "noSuchObservation") {
		t.Errorf("machines vet bad dir: exit %d\n%s", r.code, r.stderr)
	}
}
