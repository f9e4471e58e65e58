// Package cluster runs a real local Kubernetes control plane (etcd, kube-apiserver and optionally
// kube-controller-manager and kube-scheduler) on 127.0.0.1 without Docker. The binaries are built
// from the Go module proxy once and cached outside the repository, keyed by version.
package cluster

import (
	"bufio"
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

// Versions of the control plane we build; the cache is keyed by them.
const (
	KubernetesVersion = "v1.37.2"
	StagingVersion    = "v0.37.2"
	EtcdVersion       = "v3.6.16"
)

// Component names a control-plane binary.
type Component string

// The components the cluster can run.
const (
	Etcd              Component = "etcd"
	APIServer         Component = "kube-apiserver"
	ControllerManager Component = "kube-controller-manager"
	Scheduler         Component = "kube-scheduler"
	// Kubelet is built into its own cache directory (kubelet-<version>): its module graph is
	// larger than the control plane's, and a cached control plane need not be rebuilt for it.
	Kubelet Component = "kubelet"
)

// DefaultCacheDir is where built binaries live: $DRAFORGE_CACHE, else the user cache dir.
func DefaultCacheDir() string {
	if d := os.Getenv("DRAFORGE_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "draforge")
	}
	return filepath.Join(os.TempDir(), "draforge-cache")
}

// Binary returns the path of a component, building it into cacheDir when absent.
func Binary(ctx context.Context, cacheDir string, c Component, log io.Writer) (string, error) {
	if c == Etcd {
		return buildEtcd(ctx, cacheDir, log)
	}
	return buildKube(ctx, cacheDir, c, log)
}

func buildKube(ctx context.Context, cacheDir string, c Component, log io.Writer) (string, error) {
	root, module, tools := filepath.Join(cacheDir, "kubernetes-"+KubernetesVersion), "draforge.local/kubebin", []Component{APIServer, ControllerManager, Scheduler}
	if c == Kubelet {
		root, module, tools = filepath.Join(cacheDir, "kubelet-"+KubernetesVersion), "draforge.local/kubeletbin", []Component{Kubelet}
	}
	bin := filepath.Join(root, "bin", string(c))
	if fileExists(bin) {
		return bin, nil
	}
	src := filepath.Join(root, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if !fileExists(filepath.Join(src, "go.sum")) {
		gomod, err := kubeWrapperGoMod(ctx, module, tools, log)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(src, "go.mod"), gomod, 0o644); err != nil {
			return "", err
		}
		if err := goCmd(ctx, src, log, "mod", "tidy"); err != nil {
			return "", fmt.Errorf("resolve kubernetes %s modules: %w", KubernetesVersion, err)
		}
	}
	// Version stamps so /version reports the real release, as the upstream build does.
	pkg := "k8s.io/component-base/version"
	ldflags := fmt.Sprintf("-s -w -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=%[3]s -X %[1]s.gitTreeState=clean",
		pkg, KubernetesVersion, strings.Split(KubernetesVersion, ".")[1])
	fmt.Fprintf(log, "building %s %s (first run only, a few minutes)\n", c, KubernetesVersion)
	tmp := bin + ".tmp"
	if err := goCmd(ctx, src, log, "build", "-ldflags", ldflags, "-o", tmp, "k8s.io/kubernetes/cmd/"+string(c)); err != nil {
		return "", fmt.Errorf("build %s: %w", c, err)
	}
	return bin, os.Rename(tmp, bin)
}

// kubeWrapperGoMod writes a module that requires k8s.io/kubernetes and replaces every staging
// module it names with the matching published version, the documented way to build it as a dependency.
func kubeWrapperGoMod(ctx context.Context, module string, tools []Component, log io.Writer) ([]byte, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+KubernetesVersion)
	cmd.Stdout, cmd.Stderr = &out, log
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Dir = os.TempDir()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("download k8s.io/kubernetes %s: %w", KubernetesVersion, err)
	}
	var info struct{ GoMod string }
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return nil, err
	}
	upstream, err := os.ReadFile(info.GoMod)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module %s\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", module, KubernetesVersion)
	sc := bufio.NewScanner(bytes.NewReader(upstream))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[1] == "=>" && strings.HasPrefix(f[2], "./staging/") {
			fmt.Fprintf(&b, "\t%s => %s %s\n", f[0], f[0], StagingVersion)
		}
	}
	b.WriteString(")\n\ntool (\n")
	for _, c := range tools {
		fmt.Fprintf(&b, "\tk8s.io/kubernetes/cmd/%s\n", c)
	}
	b.WriteString(")\n")
	return []byte(b.String()), nil
}

func buildEtcd(ctx context.Context, cacheDir string, log io.Writer) (string, error) {
	root := filepath.Join(cacheDir, "etcd-"+EtcdVersion)
	bin := filepath.Join(root, "bin", "etcd")
	if fileExists(bin) {
		return bin, nil
	}
	src := filepath.Join(root, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	gomod := fmt.Sprintf("module draforge.local/etcdbin\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n", EtcdVersion)
	main := "package main\n\nimport (\n\t\"os\"\n\n\t\"go.etcd.io/etcd/server/v3/etcdmain\"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n"
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(main), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "building etcd %s (first run only)\n", EtcdVersion)
	if err := goCmd(ctx, src, log, "mod", "tidy"); err != nil {
		return "", fmt.Errorf("resolve etcd %s: %w", EtcdVersion, err)
	}
	tmp := bin + ".tmp"
	if err := goCmd(ctx, src, log, "build", "-ldflags", "-s -w", "-o", tmp, "."); err != nil {
		return "", fmt.Errorf("build etcd: %w", err)
	}
	return bin, os.Rename(tmp, bin)
}

func goCmd(ctx context.Context, dir string, log io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "GOWORK=off")
	return cmd.Run()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
