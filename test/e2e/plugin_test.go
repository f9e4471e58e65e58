package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubectlPlugin runs draforge under the name kubectl looks for (kubectl-draforge, a link
// as `go tool task build` makes it): usage and errors name `kubectl draforge`, and commands
// reach the cluster. When kubectl is installed, `kubectl draforge ...` itself is run through
// kubectl's plugin mechanism and must print the same as the binary run directly.
func TestKubectlPlugin(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	plugin := filepath.Join(dir, "kubectl-draforge")
	if err := os.Symlink(draforgeBinary(t), plugin); err != nil {
		t.Fatal(err)
	}
	run := func(name string, env []string, args ...string) (string, string, error) {
		cmd := exec.CommandContext(t.Context(), name, args...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}

	help, _, err := run(plugin, nil, "explain", "--help")
	if err != nil || !strings.Contains(help, "Usage:\n  kubectl draforge explain [claim/]CLAIM | pod/POD") {
		t.Errorf("kubectl-draforge explain --help: %v\n%s", err, help)
	}
	_, stderr, err := run(plugin, nil, "no-such-command")
	if err == nil || !strings.Contains(stderr, `kubectl draforge: unknown command "no-such-command" for "kubectl draforge"`) {
		t.Errorf("unknown command: %v\n%s", err, stderr)
	}
	direct, stderr, err := run(plugin, []string{"KUBECONFIG=" + kubeconfigPath}, "claims", "-n", e.Namespace, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl-draforge claims: %v\n%s", err, stderr)
	}
	if !json.Valid([]byte(direct)) {
		t.Fatalf("kubectl-draforge claims -o json printed %q", direct)
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl is not installed; the plugin was checked by its name only")
		return
	}
	env := []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfigPath}
	viaKubectl, stderr, err := run(kubectl, env, "draforge", "claims", "-n", e.Namespace, "-o", "json")
	if err != nil || viaKubectl != direct {
		t.Errorf("kubectl draforge claims: %v\n%s\nstdout %q, want %q", err, stderr, viaKubectl, direct)
	}
	list, _, err := run(kubectl, env, "plugin", "list")
	if err != nil || !strings.Contains(list, plugin) {
		t.Errorf("kubectl plugin list does not show %s: %v\n%s", plugin, err, list)
	}
	help, _, err = run(kubectl, env, "draforge", "--help")
	if err != nil || !strings.Contains(help, "Usage:\n  kubectl draforge [command]") {
		t.Errorf("kubectl draforge --help: %v\n%s", err, help)
	}
}
