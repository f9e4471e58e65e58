// Package e2e runs DRAForge against a real kube-apiserver. TestMain starts one local control
// plane for the package (test/cluster) unless DRAFORGE_E2E_KUBECONFIG names an existing cluster;
// every test gets its own namespace. An ambient KUBECONFIG is never used: tests create and delete
// objects, so a shell pointed at a real cluster must not be enough to aim them at it.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// kubeconfigPath is the cluster every test in this package talks to.
var kubeconfigPath string

func TestMain(m *testing.M) {
	code := run(m)
	e2eutil.RemoveBinaries()
	os.Exit(code)
}

func run(m *testing.M) int {
	// Child processes (the CLI, kubectl plugins) must not fall back to an ambient cluster either.
	os.Unsetenv("KUBECONFIG")
	if kc := e2eutil.ExistingCluster(os.Getenv); kc != "" {
		fmt.Fprintln(os.Stderr, "e2e: using the existing cluster from", e2eutil.ExistingClusterEnv, kc)
		kubeconfigPath = kc
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "draforge-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// kube-controller-manager (cluster.Controllers: namespace and garbage collectors, service
	// account tokens, node lifecycle at its upstream timing, ...) and kube-scheduler run as on
	// a real cluster. The claim machine leaves claims of unscheduled pods to the scheduler.
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: dir, Log: os.Stderr, Extra: cluster.Workloads})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start local control plane:", err)
		return 1
	}
	defer c.Stop()
	kubeconfigPath = c.Kubeconfig
	return m.Run()
}
