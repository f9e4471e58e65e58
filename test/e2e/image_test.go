package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/yaml"

	"github.com/draforge/draforge/build/containerimage"
	"github.com/draforge/draforge/test/e2e/e2eutil"
	"github.com/draforge/draforge/test/helmtool"
)

// TestImage builds the container image once with the program behind `go tool task image`
// (both platforms) and pushes it, as IMAGE=<repository> does, to an OCI registry on loopback;
// checks that a second build of the same commit has the same digest; installs the chart with
// only the image repository pointed there (the tag is the chart's appVersion); checks each
// image of the index against what the Deployments expect; pulls the image back and runs the
// binary from its linux/amd64 layers: `version`, then the controller and the API server with
// exactly the Deployments' arguments.
func TestImage(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	root := repoRoot()
	src, err := containerimage.ReadSource(ctx, root)
	if err != nil {
		t.Fatal(err)
	}

	// An OCI registry on loopback (go-containerregistry's in-memory registry).
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	repo := strings.TrimPrefix(reg.URL, "http://") + "/draforge/draforge"

	start := time.Now()
	layout := filepath.Join(t.TempDir(), "image")
	imagebuild(t, root, "-o", layout, "--push", repo) // a repository alone: pushed with the VERSION tag
	idx, err := containerimage.ReadLayout(layout, src.Version)
	if err != nil {
		t.Fatal(err)
	}
	want := digestOf(t, idx)
	t.Logf("image %s built and pushed in %s", want, time.Since(start).Round(time.Second))

	t.Run("reproducible", func(t *testing.T) {
		// Fresh binaries (other files, other mtimes) from the same commit: the same bytes.
		again := filepath.Join(t.TempDir(), "image")
		imagebuild(t, root, "-o", again)
		idx2, err := containerimage.ReadLayout(again, src.Version)
		if err != nil {
			t.Fatal(err)
		}
		if got := digestOf(t, idx2); got != want {
			a, _ := idx.RawManifest()
			b, _ := idx2.RawManifest()
			t.Fatalf("same commit, digests %s and %s:\n%s\n%s", want, got, a, b)
		}
	})

	rel := "img" + rand.String(5)
	helmRun(t, "install", rel, chartPath(t), "--namespace", e.Namespace,
		"--set", "server.image.repository="+repo, "--set", "controller.image.repository="+repo)
	t.Cleanup(func() {
		if _, err := helmtool.Run(context.Background(), "uninstall", rel, "--namespace", e.Namespace, "--kubeconfig", kubeconfigPath); err != nil {
			t.Log(err)
		}
	})
	var chart struct{ AppVersion string }
	if b, err := os.ReadFile(chartPath(t, "Chart.yaml")); err != nil || yaml.Unmarshal(b, &chart) != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}

	t.Logf("chart installed at %s", time.Since(start).Round(time.Second))
	var amd64 v1.Image
	deployments := map[string]*appsv1.Deployment{}
	for _, component := range []string{"controller", "server"} {
		d, err := e.Kube.AppsV1().Deployments(e.Namespace).Get(ctx, rel+"-draforge-"+component, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deployments[component] = d
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		if wantImage := repo + ":" + chart.AppVersion; c.Image != wantImage || chart.AppVersion != src.Version {
			t.Fatalf("%s image %q, want %q (chart appVersion %q, VERSION %q)", component, c.Image, wantImage, chart.AppVersion, src.Version)
		}
		// What the kubelet would pull.
		pulledRef, err := name.ParseReference(c.Image)
		if err != nil {
			t.Fatal(err)
		}
		pulled, err := remote.Index(pulledRef, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pull %s: %v", c.Image, err)
		}
		if got := digestOf(t, pulled); got != want {
			t.Fatalf("%s resolves to %s, pushed %s", c.Image, got, want)
		}
		im, err := pulled.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []string
		for _, m := range im.Manifests {
			platforms = append(platforms, m.Platform.String())
			img, err := pulled.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImageForContainer(t, component+" "+m.Platform.String(), img, *m.Platform, src, pod, c)
			if m.Platform.Architecture == "amd64" {
				amd64 = img
			}
		}
		slices.Sort(platforms)
		if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("index platforms %v", platforms)
		}
		if im.Annotations[containerimage.LabelRevision] != src.Revision {
			t.Errorf("index annotations %v", im.Annotations)
		}
	}
	if t.Failed() || amd64 == nil {
		t.FailNow()
	}

	t.Logf("images checked at %s", time.Since(start).Round(time.Second))

	// The binary from the pulled image's layers.
	bin := filepath.Join(t.TempDir(), "draforge")
	if err := os.WriteFile(bin, imageFiles(t, amd64, containerimage.BinaryPath)[containerimage.BinaryPath], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("draforge version from the image: %v", err)
	}
	var info struct {
		Version, Commit, BuildDate, GoVersion, Platform, KubernetesClientVersion, KubernetesVersion string
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	clientGo := requiredVersion(t, root, "k8s.io/client-go")
	if info.Version != src.Version || info.Commit != src.Revision || info.BuildDate != src.Created.Format(time.RFC3339) ||
		info.Platform != "linux/amd64" || info.KubernetesClientVersion != clientGo ||
		info.KubernetesVersion != "v1."+strings.TrimPrefix(clientGo, "v0.") || !strings.HasPrefix(info.GoVersion, "go1.") {
		t.Errorf("draforge version from the image:\n%s\nwant version %s, commit %s, date %s, client-go %s",
			out, src.Version, src.Revision, src.Created.Format(time.RFC3339), clientGo)
	}

	// Run the image's binary as the kubelet would run each Deployment's container: entrypoint
	// plus the container args with $(VAR) expanded from the container env, the machines
	// ConfigMap as files, the listen address moved to a free loopback port.
	env := map[string]string{"POD_NAME": rel + "-pod", "POD_NAMESPACE": e.Namespace}
	machines := t.TempDir()
	cm, err := e.Kube.CoreV1().ConfigMaps(e.Namespace).Get(ctx, rel+"-draforge-machines", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range cm.Data {
		if err := os.WriteFile(filepath.Join(machines, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for component, spec := range map[string]struct{ sub, addrFlag string }{
		"controller": {"controller", "--runtime-address"}, "server": {"serve", "--address"},
	} {
		args := deployments[component].Spec.Template.Spec.Containers[0].Args
		if args[0] != spec.sub {
			t.Fatalf("%s args start with %q, want the subcommand %q", component, args[0], spec.sub)
		}
		var rest []string
		for _, a := range args[1:] {
			if strings.HasPrefix(a, spec.addrFlag+"=") {
				continue // e2eutil.Run listens on a free loopback port instead
			}
			a = strings.Replace(a, "--machines=/etc/draforge/machines", "--machines="+machines, 1)
			for k, v := range env {
				a = strings.ReplaceAll(a, "$("+k+")", v)
			}
			rest = append(rest, a)
		}
		c := e2eutil.Run(t, e2eutil.ControllerSpec{Bin: bin, Kubeconfig: kubeconfigPath, Subcommand: spec.sub, AddrFlag: spec.addrFlag, Args: rest})
		if component == "controller" {
			eventually(t, 30*time.Second, func() (bool, string) {
				return c.Gauge("draforge_controller_leader") == 1, "the image's controller did not take the Lease with the chart's leader election arguments"
			})
			lease, err := e.Kube.CoordinationV1().Leases(e.Namespace).Get(ctx, "draforge-controller", metav1.GetOptions{})
			if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != env["POD_NAME"] {
				t.Errorf("Lease: %v %v, want holder %s", lease, err, env["POD_NAME"])
			}
		}
		c.Kill()
	}
}

// checkImageForContainer compares one platform's image with the container the chart renders.
func checkImageForContainer(t *testing.T, what string, img v1.Image, p v1.Platform, src containerimage.Source, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", what, cf.OS, cf.Architecture)
	}
	// The Deployment sets no command, so the image's entrypoint must be draforge and its
	// args (starting with the subcommand) replace an empty Cmd.
	if len(c.Command) != 0 || !slices.Equal(cfg.Entrypoint, []string{containerimage.BinaryPath}) || len(cfg.Cmd) != 0 {
		t.Errorf("%s: container command %q, image entrypoint %q cmd %q", what, c.Command, cfg.Entrypoint, cfg.Cmd)
	}
	sc, psc := c.SecurityContext, pod.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil || psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Fatalf("%s: securityContext %+v, pod %+v", what, sc, psc)
	}
	if want := fmt.Sprintf("%d:%d", *sc.RunAsUser, *sc.RunAsGroup); cfg.User != want {
		t.Errorf("%s: image user %q, the Deployment runs as %s", what, cfg.User, want)
	}
	for k, v := range map[string]string{
		containerimage.LabelSource: containerimage.SourceURL, containerimage.LabelVersion: src.Version,
		containerimage.LabelRevision: src.Revision, containerimage.LabelCreated: src.Created.Format(time.RFC3339),
	} {
		if cfg.Labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q", what, k, cfg.Labels[k], v)
		}
	}
	if !cf.Created.Time.Equal(src.Created) {
		t.Errorf("%s: created %v, want the commit time %v", what, cf.Created, src.Created)
	}
	// readOnlyRootFilesystem: the only writable path is the /tmp emptyDir, which the image has.
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" }) {
		t.Errorf("%s: readOnlyRootFilesystem %v, mounts %v", what, sc.ReadOnlyRootFilesystem, c.VolumeMounts)
	}
	files := imageFiles(t, img, containerimage.BinaryPath, containerimage.CABundlePath)
	f, err := elf.NewFile(bytes.NewReader(files[containerimage.BinaryPath]))
	if err != nil {
		t.Fatalf("%s: binary: %v", what, err)
	}
	defer f.Close()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	if f.Machine != machine {
		t.Errorf("%s: binary for %v, want %v", what, f.Machine, machine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s: the binary asks for a dynamic loader; it must be static", what)
		}
	}
	if !bytes.Contains(files[containerimage.CABundlePath], []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("%s: no CA certificates at %s", what, containerimage.CABundlePath)
	}
}

// imageFiles reads the given absolute paths from the image's flattened file system.
func imageFiles(t *testing.T, img v1.Image, paths ...string) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string][]byte{}
	for len(files) < len(paths) {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%v not all in the image (found %d): %v", paths, len(files), err)
		}
		if p := "/" + strings.TrimPrefix(h.Name, "./"); slices.Contains(paths, p) {
			if files[p], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	return files
}

// imagebuild runs the program behind `go tool task image` in the repository.
func imagebuild(t *testing.T, root string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./build/containerimage/imagebuild"}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("imagebuild %v: %v\n%s", args, err, out)
	}
	t.Logf("imagebuild %v:\n%s", args, out)
}

func digestOf(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	h, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// requiredVersion is the version go.mod requires of module path.
func requiredVersion(t *testing.T, root, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	t.Fatalf("go.mod does not require %s", path)
	return ""
}
