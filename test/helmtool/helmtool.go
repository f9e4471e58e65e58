// Package helmtool runs the Helm CLI pinned in tools/helm (a separate module, so the main
// go.mod does not carry Helm's dependencies). Binary builds helm once into the DRAForge cache
// ($DRAFORGE_CACHE, else the user cache dir), keyed by tools/helm/go.mod and go.sum, so later
// test runs reuse it. Run isolates Helm's config, cache and data directories per process.
package helmtool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// helmPackage is the command tools/helm/go.mod declares as a tool.
const helmPackage = "helm.sh/helm/v4/cmd/helm"

// RepoRoot returns the directory of the github.com/draforge/draforge go.mod above the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/draforge/draforge\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("helmtool: repository root (go.mod of github.com/draforge/draforge) not found")
		}
		dir = parent
	}
}

// ChartDir is deploy/helm/draforge in the repository.
func ChartDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy", "helm", "draforge"), nil
}

func cacheDir() string {
	if d := os.Getenv("DRAFORGE_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "draforge")
	}
	return filepath.Join(os.TempDir(), "draforge-cache")
}

var (
	once    sync.Once
	binPath string
	binErr  error
)

// Binary returns the path of the pinned helm, building it on first use.
func Binary() (string, error) {
	once.Do(func() { binPath, binErr = build() })
	return binPath, binErr
}

func build() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, "tools", "helm", f))
		if err != nil {
			return "", fmt.Errorf("helmtool: %w", err)
		}
		h.Write(b)
	}
	version, err := pinnedVersion(root)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cacheDir(), "helm-"+version+"-"+hex.EncodeToString(h.Sum(nil))[:12], "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(bin), "helm-*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	ldflags := "-s -w -X helm.sh/helm/v4/internal/version.version=" + version
	cmd := exec.Command("go", "build", "-modfile="+filepath.Join("tools", "helm", "go.mod"),
		"-ldflags", ldflags, "-o", tmp.Name(), helmPackage)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("helmtool: build helm %s: %v\n%s", version, err, out)
	}
	// Rename is atomic, so concurrent test binaries building at once both end up with a whole file.
	return bin, os.Rename(tmp.Name(), bin)
}

// pinnedVersion reads the helm.sh/helm/v4 version from tools/helm/go.mod.
func pinnedVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "tools", "helm", "go.mod"))
	if err != nil {
		return "", fmt.Errorf("helmtool: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require"))
		if len(f) >= 2 && f[0] == "helm.sh/helm/v4" {
			return f[1], nil
		}
	}
	return "", errors.New("helmtool: helm.sh/helm/v4 not required in tools/helm/go.mod")
}

// Result is one helm invocation.
type Result struct {
	Stdout, Stderr string
}

// Run runs helm with args. Helm's config, cache and data homes point into the DRAForge cache
// so the user's repositories and plugins are neither read nor changed.
func Run(ctx context.Context, args ...string) (Result, error) {
	bin, err := Binary()
	if err != nil {
		return Result{}, err
	}
	homeDir := filepath.Join(filepath.Dir(bin), "home")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(homeDir, "config"),
		"HELM_CACHE_HOME="+filepath.Join(homeDir, "cache"),
		"HELM_DATA_HOME="+filepath.Join(homeDir, "data"),
	)
	err = cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		return res, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(res.Stderr))
	}
	return res, nil
}
