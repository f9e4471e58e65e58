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

// startCluster starts a local control plane (etcd + kube-apiserver) in a fresh directory.
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

// allocatorFlag is given to every current controller of this suite with the value "simulator":
// its control planes run no kube-scheduler (nor kube-controller-manager), so the simulator's own
// allocator is the only one there, and the suite measures that allocator under failover,
// faults and outages.
const allocatorFlag = "--allocator"

func startCluster() (*cluster.Cluster, error) {
	dir, err := os.MkdirTemp("", "draforge-rel-")
	if err != nil {
		return nil, err
	}
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: dir, Log: os.Stderr})
	if err != nil {
		return nil, fmt.Errorf("start local control plane: %w", err)
	}
	return c, nil
}
