package containerimage

import (
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// buildinfoPackage holds the variables `draforge version` reports.
const buildinfoPackage = "github.com/draforge/draforge/cmd/draforge/internal/buildinfo"

// LDFlags are the linker flags of a release binary: no symbol table or DWARF, an empty build
// ID, and the source's version, revision and date stamped into buildinfo.
func LDFlags(src Source) string {
	return fmt.Sprintf("-s -w -buildid= -X %[1]s.Version=%[2]s -X %[1]s.Commit=%[3]s -X %[1]s.Date=%[4]s",
		buildinfoPackage, src.Version, src.Revision, src.Created.Format(time.RFC3339))
}

// buildArgs are the go build arguments for ./cmd/draforge written to out.
func buildArgs(src Source, out string) []string {
	// -trimpath drops the checkout path, -buildvcs=false keeps git state (untracked files
	// among it) out of the binary: the revision comes from the ldflags instead.
	return []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", LDFlags(src), "-o", out, "./cmd/draforge"}
}

// buildEnv pins everything of the environment that changes the output for one platform:
// a static binary (no cgo) and the baseline instruction sets.
func buildEnv(p v1.Platform) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GOFLAGS", "GOWORK", "GOEXPERIMENT":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture,
		"GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-mod=readonly", "GOWORK=off", "GOEXPERIMENT=")
}

// buildBinary compiles ./cmd/draforge of the module in dir for p into out.
func buildBinary(ctx context.Context, dir string, p v1.Platform, src Source, out string) error {
	cmd := exec.CommandContext(ctx, "go", buildArgs(src, out)...)
	cmd.Dir = dir
	cmd.Env = buildEnv(p)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/draforge for %s: %v\n%s", p, err, b)
	}
	return nil
}
