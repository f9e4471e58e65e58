package e2eutil

// ExistingClusterEnv opts a test run in to an existing cluster instead of the local control plane
// it would start. It is deliberately not KUBECONFIG: the tests create and delete objects, so a
// shell that happens to point at a real cluster must not be enough to aim them at it.
const ExistingClusterEnv = "DRAFORGE_E2E_KUBECONFIG"

// ExistingCluster returns the kubeconfig path the run was explicitly pointed at, or "" to start a
// local control plane. KUBECONFIG is never consulted.
func ExistingCluster(getenv func(string) string) string {
	return getenv(ExistingClusterEnv)
}
