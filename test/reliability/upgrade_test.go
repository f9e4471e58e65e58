//go:build reliability

package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/pools"
	"github.com/draforge/draforge/machines"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// v2Machines writes the "next version" machines: the embedded ones with a new Ready message
// for published pools and an extra state (paused, derived while a pool carries the label
// paused). Both must observably take effect, or --machines would be ignored unnoticed.
func v2Machines(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// Every machine the controller runs: a --machines directory replaces the embedded ones.
	for _, name := range machines.Names {
		n := name + ".cue"
		b, err := os.ReadFile(filepath.Join(e2eutil.RepoRoot(), "machines", n))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if n == "pool.cue" {
			for _, r := range [][2]string{
				{`{type: "Ready", status: "True", reason: "Published"},`, `{type: "Ready", status: "True", reason: "Published", message: "` + v2Message + `"},`},
				{"\t\tfinalizing: conditions: [", "\t\tpaused: conditions: [\n\t\t\t{type: \"Ready\", status: \"False\", reason: \"Paused\"},\n\t\t\t{type: \"Synced\", status: \"True\", reason: \"Published\"},\n\t\t]\n\t\tfinalizing: conditions: ["},
				{`{state: "synced", when: condition:`, `{state: "paused", when: label: "paused"},` + "\n\t\t" + `{state: "synced", when: condition:`},
			} {
				if !strings.Contains(s, r[0]) {
					t.Fatalf("machines/pool.cue no longer contains %q: update the v2 variant", r[0])
				}
				s = strings.Replace(s, r[0], r[1], 1)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const v2Message = "published by the v2 machines"

// publishedPools counts the pools of the whole cluster showing Ready=True Published.
func publishedPools(t *testing.T, e *e2eutil.Env) int {
	t.Helper()
	list, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if c := e2eutil.Condition(&list.Items[i], "Ready"); c != nil && c["status"] == "True" && c["reason"] == "Published" && list.Items[i].GetDeletionTimestamp() == nil {
			n++
		}
	}
	return n
}

// readyIs waits until pool name's Ready condition has status, reason and message.
func readyIs(t *testing.T, e *e2eutil.Env, name, status, reason, message string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		u := getPool(t, e, name)
		c := e2eutil.Condition(u, "Ready")
		return c != nil && c["status"] == status && c["reason"] == reason && fmt.Sprint(c["message"]) == message,
			fmt.Sprintf("pool %s Ready %v", name, c)
	})
}

// TestUpgradeRollback switches a converged controller v1 → v2 (a second build, different
// machines) → v1. Each switch leaves every slice spec and claim allocation byte-identical; the
// new process writes only what its machines changed: v2 writes its new Ready message on each
// published pool (one status write each) and enters its paused state when a pool is labelled; the
// rollback writes the v1 message back. Then the CRD is replaced by an older one (schema-version
// N-1): every pool shows Degraded=True SchemaPredatesController with Ready still True; the
// current CRD turns it back to Degraded=False SchemaCurrent. After each switch the new process
// allocates (and, with kube-scheduler allocating, hands over) two new claims.
func TestUpgradeRollback(t *testing.T) { forEachAllocator(t, testUpgradeRollback) }

func testUpgradeRollback(t *testing.T, allocator string) {
	e := newEnv(t)
	class := "rel-upgrade-" + e.Namespace
	deviceClass(t, e, class, class)
	v1 := e2eutil.DraforgeBinary(t)
	v2 := e2eutil.DraforgeBinaryWith(t, "-X github.com/draforge/draforge/cmd/draforge/internal/buildinfo.Version=v2-reliability")
	v2dir := v2Machines(t)

	createPool(t, e, "a", pool(5, class, "node-a", "node-b"))
	createPool(t, e, "b", pool(3, class, "node-c"))
	ctrl := e2eutil.Run(t, e2eutil.ControllerSpec{Bin: v1, Kubeconfig: e.Kubeconfig, Args: []string{allocatorFlag, allocator}})
	createClaims(t, e, "c", class, 0, 8, 0)
	var allocs map[string]string
	eventually(t, 60*time.Second, func() (bool, string) {
		allocs = allocations(t, e)
		return len(allocs) == 8, fmt.Sprintf("%d of 8 allocated", len(allocs))
	})
	eventually(t, 60*time.Second, func() (bool, string) { return handedOver(t, e, allocator) })
	eventually(t, 30*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "a", 5, "node-a", "node-b") })
	eventually(t, 30*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "b", 3, "node-c") })
	slices := sliceSpecs(t, e)
	if ctrl.Writes(t) == 0 {
		t.Fatal("v1 made no writes: the test would prove nothing")
	}

	for _, step := range []struct {
		name    string
		spec    e2eutil.ControllerSpec
		message string
	}{
		{"upgrade to v2", e2eutil.ControllerSpec{Bin: v2, Kubeconfig: e.Kubeconfig, Args: []string{allocatorFlag, allocator, "--machines", v2dir}}, v2Message},
		{"rollback to v1", e2eutil.ControllerSpec{Bin: v1, Kubeconfig: e.Kubeconfig, Args: []string{allocatorFlag, allocator}}, ""},
	} {
		// Other tests' pools may still exist on the shared cluster: every published pool gets
		// the new message, so count them all.
		published := publishedPools(t, e)
		ctrl.Signal(syscall.SIGTERM)
		<-ctrl.Exited
		heartbeats := e.CountHeartbeats(t)
		start := time.Now()
		ctrl = e2eutil.Run(t, step.spec)
		ready := time.Since(start)
		// The machines of this version take effect: every pool shows its Ready message.
		for _, p := range []string{"a", "b"} {
			readyIs(t, e, p, "True", "Published", step.message)
		}
		eventually(t, 30*time.Second, func() (bool, string) {
			n := ctrl.Metric(t, "draforge_controller_sync_attempts_total")
			return n >= 10, fmt.Sprintf("%v sync attempts", n)
		})
		time.Sleep(2 * time.Second)
		w := ctrl.Writes(t)
		hb := heartbeats()
		t.Logf("FIGURE upgrade (%s): %s ready in %s, %v writes (%d node heartbeats due meanwhile), %v GETs", allocator, step.name, ready.Round(time.Millisecond), w, hb,
			ctrl.Metric(t, "rest_client_requests_total", `method="GET"`))
		// One status write per published pool (the message), nothing else: no slice, no claim;
		// the simulated nodes' Lease renewals and heartbeats are due by time and counted apart.
		if w < float64(published) || w > float64(published+hb) {
			t.Errorf("%s: %v writes, want %d (the Ready message of each published pool) plus at most the %d node heartbeats", step.name, w, published, hb)
		}
		if got := sliceSpecs(t, e); fmt.Sprint(got) != fmt.Sprint(slices) {
			t.Errorf("%s: slices changed:\n before %v\n after  %v", step.name, slices, got)
		}
		now := allocations(t, e)
		if len(now) != len(allocs) {
			t.Errorf("%s: %d allocations, want %d", step.name, len(now), len(allocs))
		}
		sameAllocations(t, step.name, allocs, now)
		// This version allocates new claims next to the old ones.
		createClaims(t, e, fmt.Sprintf("%s-%d", strings.Fields(step.name)[0], len(allocs)), class, 0, 2, 0)
		want := len(allocs) + 2
		eventually(t, 60*time.Second, func() (bool, string) {
			allocs = allocations(t, e)
			return len(allocs) == want, fmt.Sprintf("%s: %d of %d allocated", step.name, len(allocs), want)
		})
		eventually(t, 60*time.Second, func() (bool, string) { return handedOver(t, e, allocator) })
		if n := checkUnique(t, allocs); n != want {
			t.Errorf("%s: %d claims hold %d distinct devices", step.name, want, n)
		}
		if step.message != v2Message {
			continue
		}
		// v2's extra state: labelling a pool enters paused; removing the label leaves it.
		label := func(v any) {
			t.Helper()
			patch := fmt.Sprintf(`{"metadata":{"labels":{"paused":%s}}}`, map[bool]string{true: `"yes"`, false: "null"}[v != nil])
			if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Patch(t.Context(), "a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		label("yes")
		readyIs(t, e, "a", "False", "Paused", "")
		label(nil)
		readyIs(t, e, "a", "True", "Published", v2Message)
	}

	// Schema skew: an older CRD (schema-version N-1) under the running controller.
	crd, err := os.ReadFile(filepath.Join(e2eutil.RepoRoot(), "deploy", "crds", "simulateddevicepool-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	current := fmt.Sprintf(`%s: "%d"`, pools.SchemaAnnotation, pools.SchemaVersion)
	if !strings.Contains(string(crd), current) {
		t.Fatalf("deploy/crds does not carry %s", current)
	}
	older := strings.Replace(string(crd), current, fmt.Sprintf(`%s: "%d"`, pools.SchemaAnnotation, pools.SchemaVersion-1), 1)
	degraded := func(status, reason string) {
		t.Helper()
		start := time.Now()
		for _, p := range []string{"a", "b"} {
			eventually(t, 30*time.Second, func() (bool, string) {
				u := getPool(t, e, p)
				d := e2eutil.Condition(u, "Degraded")
				return d != nil && d["status"] == status && d["reason"] == reason && e2eutil.ConditionIs(u, "Ready", "True"),
					fmt.Sprintf("pool %s conditions %v", p, u.Object["status"])
			})
		}
		t.Logf("FIGURE schema: Degraded=%s %s on every pool %s after the CRD apply", status, reason, time.Since(start).Round(time.Millisecond))
	}
	degraded("False", pools.ReasonSchemaCurrent)
	e.ApplyCRDs(t, []byte(older))
	degraded("True", pools.ReasonSchemaPredates)
	e.ApplyCRDs(t, crd)
	degraded("False", pools.ReasonSchemaCurrent)
	if got := sliceSpecs(t, e); fmt.Sprint(got) != fmt.Sprint(slices) {
		t.Errorf("schema skew changed slices")
	}
	sameAllocations(t, "schema skew", allocs, allocations(t, e))
}
