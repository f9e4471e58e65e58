//go:build reliability

// Package reliability is DRAForge's reliability suite: leader failover under load, an API
// server outage (with and without leader election), a Lease taken from a live leader, fault
// injection on writes, reads and watches between the controller and the API server, controller
// upgrade/rollback (also against the previous release built from git history) with schema-skew
// detection, and invalid input. It runs real `draforge controller` processes against a local
// control plane (test/cluster) that TestMain starts; the two outage tests each start a
// dedicated one because they stop kube-apiserver.
//
// It takes several minutes, so it carries the build tag `reliability` and runs with
// `go tool task test:reliability`, not with `go tool task test`.
package reliability

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// shared is the cluster every test but the outage tests uses.
var shared *cluster.Cluster

func TestMain(m *testing.M) {
	code := run(m)
	e2eutil.RemoveBinaries()
	for _, d := range previousDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

func run(m *testing.M) int {
	c, err := startCluster()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		return 1
	}
	defer c.Stop()
	shared = c
	return m.Run()
}

// dedicatedCluster starts a control plane of the test's own (for tests that stop
// kube-apiserver), stopped at cleanup, and an env on it.
func dedicatedCluster(t *testing.T) (*cluster.Cluster, *e2eutil.Env) {
	t.Helper()
	c, err := startCluster()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	e := e2eutil.NewEnv(t, c.Kubeconfig)
	e.Setup(t)
	return c, e
}

// allocators are the controller's two modes for standalone claims. Every test that allocates
// runs in both (forEachAllocator): `simulator`, the controller's own allocator, and
// `kube-scheduler`, the default, where each standalone claim gets an allocation pod that the
// real kube-scheduler allocates and the controller then hands over (docs/allocator.md). So the
// control planes here run kube-scheduler and kube-controller-manager too (its resourceclaim
// controller drops a deleted pod from reservedFor, and the controller if it has not 3 s later); the
// simulator tests create no pods, so neither acts on their claims.
var allocators = []string{"simulator", "kube-scheduler"}

const allocatorFlag = "--allocator"

// forEachAllocator runs test once per allocator mode, as subtests named after the mode.
func forEachAllocator(t *testing.T, test func(t *testing.T, allocator string)) {
	for _, a := range allocators {
		t.Run(a, func(t *testing.T) { test(t, a) })
	}
}

// startCluster starts a local control plane (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager) in a fresh directory.
func startCluster() (*cluster.Cluster, error) {
	dir, err := os.MkdirTemp("", "draforge-rel-")
	if err != nil {
		return nil, err
	}
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: dir, Log: os.Stderr, Extra: cluster.Workloads})
	if err != nil {
		return nil, fmt.Errorf("start local control plane: %w", err)
	}
	return c, nil
}
