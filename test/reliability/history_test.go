//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// sliceObjects returns the ResourceSlices of the namespace's pools by name.
func sliceObjects(t *testing.T, e *e2eutil.Env) map[string]*resourcev1.ResourceSlice {
	t.Helper()
	list, err := e.Kube.ResourceV1().ResourceSlices().List(bg(), metav1.ListOptions{LabelSelector: simdevice.LabelSDPNamespace + "=" + e.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*resourcev1.ResourceSlice{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// previousRelease is the release the upgrade test starts from and rolls back to: the last
// commit of the session before this one (there are no tags yet). DRAFORGE_PREVIOUS_RELEASE
// overrides it with any commit or tag of the repository's history that has the controller's
// --allocator and --debug-address flags (75e3810 and later).
const previousRelease = "abb5833"

// previousBuilds holds the previous release's binary per revision, built once per test process
// into a directory removeBinaries removes.
var (
	previousBuilds = map[string]string{}
	previousDirs   []string
)

// buildPreviousRelease exports the previous release's tree from git history (git archive, so
// the repository's worktrees and index are left alone) and builds its cmd/draforge.
func buildPreviousRelease(t *testing.T) (bin, rev string) {
	t.Helper()
	rev = previousRelease
	if r := os.Getenv("DRAFORGE_PREVIOUS_RELEASE"); r != "" {
		rev = r
	}
	if bin, ok := previousBuilds[rev]; ok {
		return bin, rev
	}
	dir, err := os.MkdirTemp("", "draforge-previous-")
	if err != nil {
		t.Fatal(err)
	}
	previousDirs = append(previousDirs, dir)
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", e2eutil.RepoRoot(), rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("export %s from git history (the test needs a clone with history): %v\n%s", rev, err, out)
	}
	bin = filepath.Join(dir, "draforge-"+rev)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/draforge")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", rev, err, out)
	}
	previousBuilds[rev] = bin
	return bin, rev
}

// TestUpgradeRollbackFromPreviousRelease: the previous release (built from git history)
// converges pools and claims; the current build replaces it, then the previous release comes
// back. Each process runs behind a recording proxy: the current build writes no ResourceSlice
// and no claim, on its restart or while it runs, and the rollback writes no claim (only pool
// status may change between machine versions; the previous release's own occasional slice
// rewrites under load are logged, their content checked equal). The previous release
// published attribute names qualified with the driver's domain; the current build reads them as
// the same IDs (simdevice.SlicesEqual) instead of rewriting every slice on upgrade, as it did
// before. Allocations stay byte-identical, slices equal, and each version allocates new claims
// without reusing a device (with kube-scheduler allocating, each version hands over its own).
func TestUpgradeRollbackFromPreviousRelease(t *testing.T) {
	forEachAllocator(t, testUpgradeRollbackFromPreviousRelease)
}

func testUpgradeRollbackFromPreviousRelease(t *testing.T, allocator string) {
	e := newEnv(t)
	class := "rel-history-" + e.Namespace
	deviceClass(t, e, class, class)
	prev, rev := buildPreviousRelease(t)
	cur := e2eutil.DraforgeBinary(t)

	createPool(t, e, "a", pool(6, class, "node-a", "node-b"))
	createPool(t, e, "b", pool(3, class, "node-c"))
	run := func(bin string) (*e2eutil.Controller, *recordingProxy) {
		p, kc := newRecordingProxy(t, shared.Dir, shared.Server)
		return e2eutil.Run(t, e2eutil.ControllerSpec{Bin: bin, Kubeconfig: kc, Args: []string{allocatorFlag, allocator}}), p
	}
	ctrl, _ := run(prev)
	createClaims(t, e, "v0", class, 0, 5, 0)
	var allocs map[string]string
	eventually(t, 60*time.Second, func() (bool, string) {
		allocs = allocations(t, e)
		return len(allocs) == 5, fmt.Sprintf("%d of 5 allocated by %s", len(allocs), rev)
	})
	eventually(t, 60*time.Second, func() (bool, string) { return handedOver(t, e, allocator) })
	eventually(t, 30*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "a", 6, "node-a", "node-b") })
	eventually(t, 30*time.Second, func() (bool, string) { return checkPoolSlices(t, e, "b", 3, "node-c") })
	slices := sliceObjects(t, e)

	for i, step := range []struct{ name, bin string }{{"upgrade " + rev + " -> current", cur}, {"rollback current -> " + rev, prev}} {
		ctrl.Signal(syscall.SIGTERM)
		<-ctrl.Exited
		var proxy *recordingProxy
		ctrl, proxy = run(step.bin)
		// Only the writes of the restart itself: counted before new claims arrive.
		eventually(t, 30*time.Second, func() (bool, string) {
			n := ctrl.Metric(t, "draforge_controller_sync_attempts_total")
			return n >= 7, fmt.Sprintf("%v sync attempts", n)
		})
		time.Sleep(2 * time.Second)
		for _, w := range proxy.accepted() {
			switch {
			case strings.Contains(w.path, "/resourceclaims"),
				strings.Contains(w.path, "/resourceslices") && step.bin == cur:
				t.Errorf("%s: restart wrote %s %s", step.name, w.method, w.path)
			case strings.Contains(w.path, "/resourceslices"):
				// The previous release sometimes rewrites a few of its own slices on a restart
				// under load (seen in about one run of four with other suites running; its slices
				// keep their content, checked below). It is the old binary's behaviour, which a
				// rollback cannot change; the current build must never do it (case above).
				t.Logf("%s: the previous release rewrote %s %s", step.name, w.method, w.path)
			}
		}
		now := sliceObjects(t, e)
		if len(now) != len(slices) {
			t.Errorf("%s: %d slices, want %d", step.name, len(now), len(slices))
		}
		for name, before := range slices {
			if !simdevice.SlicesEqual(before, now[name]) {
				t.Errorf("%s: slice %s changed:\n before %v\n after  %v", step.name, name, before.Spec, now[name])
			}
		}
		sameAllocations(t, step.name, allocs, allocations(t, e))
		restartWrites := proxy.accepted()
		// The new version allocates new claims next to the old ones.
		prefix := fmt.Sprintf("v%d", i+1)
		createClaims(t, e, prefix, class, 0, 2, 0)
		want := len(allocs) + 2
		eventually(t, 60*time.Second, func() (bool, string) {
			now := allocations(t, e)
			return len(now) == want, fmt.Sprintf("%s: %d of %d allocated", step.name, len(now), want)
		})
		allocs = allocations(t, e)
		// Nor while this version runs on: a later rewrite (on a resync, on new claims) would
		// make the other version rewrite every slice back on the next switch. Only the writes
		// after the restart's: the previous release's restart rewrites were judged above.
		time.Sleep(2 * time.Second)
		for _, w := range proxy.accepted()[len(restartWrites):] {
			if strings.Contains(w.path, "/resourceslices") {
				t.Errorf("%s: while running, wrote %s %s", step.name, w.method, w.path)
			}
		}
		if n := checkUnique(t, allocs); n != want {
			t.Errorf("%s: %d claims hold %d distinct devices", step.name, want, n)
		}
		eventually(t, 60*time.Second, func() (bool, string) { return handedOver(t, e, allocator) })
		t.Logf("FIGURE history (%s): %s: %d writes after the restart (none to slices or claims)", allocator, step.name, len(restartWrites))
	}
}
