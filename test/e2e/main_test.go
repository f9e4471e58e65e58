// Package e2e runs DRAForge against a real kube-apiserver. TestMain starts one local control
// plane for the package (test/cluster) unless DRAFORGE_E2E_KUBECONFIG names an existing cluster;
// every test gets its own namespace. An ambient KUBECONFIG is never used: tests create and delete
// objects, so a shell pointed at a real cluster must not be enough to aim them at it.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// kubeconfigPath is the cluster every test in this package talks to.
var kubeconfigPath string

// auditLogPath is kube-apiserver's audit log of writes to claims and pods; empty on an existing
// cluster (DRAFORGE_E2E_KUBECONFIG), whose audit log the tests cannot read.
var auditLogPath string

// auditPolicy logs, at Metadata level (who, what, which object; no bodies), the writes to
// ResourceClaims and Pods once their response is sent, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: resource.k8s.io
    resources: ["resourceclaims", "resourceclaims/status"]
  - group: ""
    resources: ["pods", "pods/status", "pods/binding"]
- level: None
`

// auditLog writes the audit policy to dir and returns kube-apiserver's flags for it.
func auditLog(dir string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	auditLogPath = filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLogPath, "--audit-log-format=json"}, nil
}

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
	// kube-apiserver's audit log records every write to claims and pods: the scope tests count
	// what DRAForge wrote to objects it must leave alone.
	auditArgs, err := auditLog(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: dir, Log: os.Stderr, Extra: cluster.Workloads,
		Args: map[cluster.Component][]string{cluster.APIServer: auditArgs}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start local control plane:", err)
		return 1
	}
	defer c.Stop()
	kubeconfigPath = c.Kubeconfig
	return m.Run()
}
