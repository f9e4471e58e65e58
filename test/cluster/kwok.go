package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KwokVersion is the KWOK release the benchmarks compare simulated nodes with; its binary and
// stage file are cached under <cache>/kwok-<version>.
const KwokVersion = "v0.8.0"

// KwokStages are KWOK's default stages, the ones kwokctl writes into its configuration when
// the user gives none (sigs.k8s.io/kwok pkg/kwokctl/runtime/cluster.go getDefaultNodeStages
// with a node lease, getDefaultPodStages) and the in-cluster deployment's
// kustomize/stage/fast: node initialisation, node heartbeat with a Lease, pod ready, pod
// complete and pod delete. The kwok binary itself applies no stage when none is configured
// ("no stages found"), so they are passed with -c.
var KwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// KwokLeaseDurationSeconds is kwokctl's default --node-lease-duration-seconds (the
// KwokctlConfiguration default, pkg/apis/config/v1alpha1); KWOK renews a quarter of it, every
// 10s, as a kubelet does.
const KwokLeaseDurationSeconds = 40

// Kwok returns the kwok binary and a configuration file holding KwokStages, building the binary
// from the Go module proxy (outside this module) into cacheDir when absent.
func Kwok(ctx context.Context, cacheDir string, log io.Writer) (bin, stages string, err error) {
	root := filepath.Join(cacheDir, "kwok-"+KwokVersion)
	bin, stages = filepath.Join(root, "kwok"), filepath.Join(root, "default-stages.yaml")
	if fileExists(bin) && fileExists(stages) {
		return bin, stages, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", "", err
	}
	if !fileExists(bin) {
		fmt.Fprintf(log, "building kwok %s (first run only)\n", KwokVersion)
		if err := goInstall(ctx, "sigs.k8s.io/kwok/cmd/kwok@"+KwokVersion, root, log); err != nil {
			return "", "", err
		}
	}
	dir, err := moduleDir(ctx, "sigs.k8s.io/kwok@"+KwokVersion, log)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	for i, f := range KwokStages {
		doc, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", "", fmt.Errorf("kwok default stage: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(doc)
	}
	tmp := stages + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return "", "", err
	}
	return bin, stages, os.Rename(tmp, stages)
}

// goInstall builds pkg@version from the Go module proxy, outside this module, into gobin.
func goInstall(ctx context.Context, pkg, gobin string, log io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "install", "-ldflags", "-s -w", pkg)
	cmd.Dir, cmd.Stdout, cmd.Stderr = os.TempDir(), log, log
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOBIN="+gobin, "GOFLAGS=-mod=mod")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	return nil
}

// moduleDir downloads mod (module@version) into the module cache and returns its directory.
func moduleDir(ctx context.Context, mod string, log io.Writer) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir, cmd.Stdout, cmd.Stderr = os.TempDir(), &out, log
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("download %s: %w", mod, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return "", err
	}
	return info.Dir, nil
}
