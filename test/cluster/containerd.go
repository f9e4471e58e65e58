package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ContainerdVersion is the containerd the real-kubelet test runs (built from its Go module:
// Debian's containerd 1.6 has no CDI support, 1.7 and later do).
const ContainerdVersion = "v2.2.10"

// ContainerdBinaries are the commands ContainerdBinDir builds.
var ContainerdBinaries = []string{"containerd", "containerd-shim-runc-v2", "ctr"}

// ContainerdBinDir builds containerd, its runc shim and ctr into cacheDir/containerd-<version>/bin
// when absent and returns that directory. They are static (CGO_ENABLED=0, without the btrfs,
// devmapper and zfs snapshotters, which need cgo); runc itself comes from the system.
func ContainerdBinDir(ctx context.Context, cacheDir string, log io.Writer) (string, error) {
	root := filepath.Join(cacheDir, "containerd-"+ContainerdVersion)
	bin := filepath.Join(root, "bin")
	missing := false
	for _, b := range ContainerdBinaries {
		missing = missing || !fileExists(filepath.Join(bin, b))
	}
	if !missing {
		return bin, nil
	}
	src := filepath.Join(root, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	const mod = "github.com/containerd/containerd/v2"
	if !fileExists(filepath.Join(src, "go.sum")) {
		var b strings.Builder
		fmt.Fprintf(&b, "module draforge.local/containerdbin\n\ngo 1.26.0\n\nrequire %s %s\n\ntool (\n", mod, ContainerdVersion)
		for _, c := range ContainerdBinaries {
			fmt.Fprintf(&b, "\t%s/cmd/%s\n", mod, c)
		}
		b.WriteString(")\n")
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(b.String()), 0o644); err != nil {
			return "", err
		}
		if err := goCmd(ctx, src, log, "mod", "tidy"); err != nil {
			return "", fmt.Errorf("resolve containerd %s modules: %w", ContainerdVersion, err)
		}
	}
	ldflags := fmt.Sprintf("-s -w -X %[1]s/version.Version=%[2]s -X %[1]s/version.Package=%[1]s", mod, ContainerdVersion)
	for _, c := range ContainerdBinaries {
		out := filepath.Join(bin, c)
		if fileExists(out) {
			continue
		}
		fmt.Fprintf(log, "building %s %s (first run only)\n", c, ContainerdVersion)
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", "no_btrfs no_devmapper no_zfs urfave_cli_no_docs",
			"-ldflags", ldflags, "-o", out+".tmp", mod+"/cmd/"+c)
		cmd.Dir = src
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("build %s: %w", c, err)
		}
		if err := os.Rename(out+".tmp", out); err != nil {
			return "", err
		}
	}
	return bin, nil
}
