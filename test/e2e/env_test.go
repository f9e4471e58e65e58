package e2e

import (
	"testing"

	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// The helpers live in e2eutil, shared with test/reliability; these names keep the tests short.

// env is what a test needs to talk to the cluster (e2eutil.Env plus this package's helpers).
type env struct{ *e2eutil.Env }

// controller is a running `draforge controller` process.
type controller = e2eutil.Controller

var (
	eventually     = e2eutil.Eventually
	decodeDocs     = e2eutil.DecodeDocs
	freeAddr       = e2eutil.FreeAddr
	repoRoot       = e2eutil.RepoRoot
	sumMetric      = e2eutil.SumMetric
	ignoreNotFound = e2eutil.IgnoreNotFound
	conditionIs    = e2eutil.ConditionIs
	newPool        = pooltest.Object
	draforgeBinary = e2eutil.DraforgeBinary
)

// newEnv connects to the package cluster and creates a namespace that is deleted after the test.
func newEnv(t *testing.T) *env { return &env{e2eutil.NewEnv(t, kubeconfigPath)} }

// startController runs the controller against the package cluster; it is killed at test end.
func startController(t *testing.T, args ...string) *controller {
	t.Helper()
	return e2eutil.StartController(t, kubeconfigPath, args...)
}

func installCRDs(t *testing.T, e *env)            { e.InstallCRDs(t) }
func applyCRDs(t *testing.T, e *env, data []byte) { e.ApplyCRDs(t, data) }
