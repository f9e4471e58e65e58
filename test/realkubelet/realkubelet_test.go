//go:build realkubelet

// Package realkubelet runs `draforge kubelet-plugin` against a real kubelet: kubelet and the
// control plane built from k8s.io/kubernetes (test/cluster), containerd built from its Go
// module, runc from the system, and a locally built image imported into containerd (no
// registry is needed). A pod on that node claims a simulated device; the kubelet asks the
// plugin to prepare it, containerd applies the plugin's CDI spec, and the pod prints the
// DRAFORGE_* environment. See docs/kubelet-plugin.md, "Against a real kubelet".
package realkubelet

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

const (
	nodeName = "rk-node"
	// image is both the pod sandbox (containerd's pinned sandbox image) and the test container.
	image = "draforge.local/testimage:1"
)

func TestMain(m *testing.M) {
	code := m.Run()
	e2eutil.RemoveBinaries()
	os.Exit(code)
}

// requireNode skips unless this host can run a kubelet: root, runc on PATH, cgroups mounted.
func requireNode(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("TestRealKubelet runs containerd, runc and a kubelet: it needs root")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("TestRealKubelet needs runc on PATH (Debian: apt-get install runc)")
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skipf("TestRealKubelet needs cgroups mounted at /sys/fs/cgroup: %v", err)
	}
	return runc
}

func TestRealKubelet(t *testing.T) {
	runc := requireNode(t)
	ctx := t.Context()
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	var buildLog bytes.Buffer
	cache := cluster.DefaultCacheDir()
	kubelet, err := cluster.Binary(ctx, cache, cluster.Kubelet, &buildLog)
	if err != nil {
		t.Fatalf("build kubelet: %v\n%s", err, buildLog.String())
	}
	ctrBin, err := cluster.ContainerdBinDir(ctx, cache, &buildLog)
	if err != nil {
		t.Fatalf("build containerd: %v\n%s", err, buildLog.String())
	}
	draforge := e2eutil.DraforgeBinary(t)
	step("binaries ready")

	// Unix socket paths are limited to 107 bytes: everything lives under a short /tmp directory.
	root, err := os.MkdirTemp("/tmp", "rk")
	if err != nil {
		t.Fatal(err)
	}
	kubeletRoot, cdiDir := filepath.Join(root, "kubelet"), filepath.Join(root, "cdi")
	t.Cleanup(func() { removeAll(t, root) })
	// Cleanups run last first: the kubelet stops, containerd's leftover tasks are killed,
	// containerd stops, then the kubelet's cgroups and the directory go.
	t.Cleanup(func() { removeKubeletCgroups(t) })
	for _, d := range []string{kubeletRoot, cdiDir, filepath.Join(root, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	imageTar := buildImage(t, root)
	step("image built")

	sock := startContainerd(t, root, ctrBin, runc, cdiDir)
	step("containerd running")
	if out, err := exec.CommandContext(ctx, filepath.Join(ctrBin, "ctr"), "--address", sock, "-n", "k8s.io",
		"images", "import", imageTar).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
	step("image imported")

	// The API server reaches the kubelet (pods/log) at its InternalIP: the default prefers the
	// Hostname, rk-node, which no resolver knows.
	c, err := cluster.Start(ctx, cluster.Options{Dir: filepath.Join(root, "cp"), Extra: cluster.Workloads, Log: &buildLog,
		Args: map[cluster.Component][]string{cluster.APIServer: {"--kubelet-preferred-address-types=InternalIP,Hostname"}}})
	if err != nil {
		t.Fatalf("start control plane: %v\n%s", err, buildLog.String())
	}
	t.Cleanup(func() { _ = c.Stop() })
	step("control plane running")

	restoreSysctls(t)
	startKubelet(t, root, kubelet, kubeletRoot, sock, c.Kubeconfig)
	e := e2eutil.NewEnv(t, c.Kubeconfig)
	e2eutil.Eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := e.Kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil, fmt.Sprintf("node %s: %v\nkubelet log:\n%s", nodeName, err, tail(filepath.Join(root, "logs", "kubelet.log"), 30))
	})
	step("node registered")

	e.InstallCRDs(t)
	e2eutil.StartController(t, c.Kubeconfig)
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "draforge.oaslananka/v1alpha1", "kind": "SimulatedDevicePool",
		"metadata": map[string]any{"name": "real-node-gpus"},
		"spec":     map[string]any{"deviceType": "gpu", "deviceCount": int64(2), "profile": "nvidia-gpu", "targetNodes": []any{nodeName}},
	}}
	e.Apply(t, e.Namespace, pool)
	e.WaitPoolReady(t, e.Namespace, "real-node-gpus")
	step("pool ready")

	plugin := e2eutil.Run(t, e2eutil.ControllerSpec{Bin: draforge, Kubeconfig: c.Kubeconfig, Subcommand: "kubelet-plugin",
		Args: []string{"--node-name", nodeName, "--plugins-dir", filepath.Join(kubeletRoot, "plugins"),
			"--registry-dir", filepath.Join(kubeletRoot, "plugins_registry"), "--cdi-dir", cdiDir,
			"--driver-names", simdevice.DefaultDriverName}})
	// The plugin's /readyz turns 200 once its registration socket serves, which can be before
	// the kubelet's plugin watcher connected to it; a pod the kubelet syncs in between fails its
	// prepare ("DRA driver ... is not registered") and waits for the next resync (about a
	// minute). So wait for the kubelet's own word.
	kubeletLog := filepath.Join(root, "logs", "kubelet.log")
	e2eutil.Eventually(t, time.Minute, func() (bool, string) {
		b, _ := os.ReadFile(kubeletLog)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"Connection changed"`) && strings.Contains(l, `driverName="`+simdevice.DefaultDriverName+`"`) &&
				strings.Contains(l, "connected=true") {
				return true, ""
			}
		}
		return false, "the kubelet has not connected to the plugin\nkubelet log:\n" + tail(kubeletLog, 30)
	})
	step("kubelet plugin registered with the kubelet")

	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace + "-gpu"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", simdevice.DefaultDriverName)}}}}}
	if _, err := e.Kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.ResourceV1().DeviceClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}}}}}}
	if _, err := e.Kube.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sim-gpu-env"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		// No CNI plugin is installed: a host-network pod needs none, and the node stays
		// NotReady (NetworkPluginNotReady), so the pod tolerates the not-ready taint.
		HostNetwork:                  true,
		AutomountServiceAccountToken: ptr.To(false),
		Tolerations:                  []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}},
		ResourceClaims:               []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl.Name)}},
		Containers: []corev1.Container{{Name: "show-env", Image: image, ImagePullPolicy: corev1.PullNever,
			Command:   []string{"/testimage", "env", "DRAFORGE_"},
			Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
	}}
	// The claim generated from the template is deleted once the pod has terminated: keep the
	// last allocated version seen.
	claims, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Stop()
	var (
		claimMu   sync.Mutex
		lastClaim *resourcev1.ResourceClaim
	)
	go func() {
		for ev := range claims.ResultChan() {
			if rc, ok := ev.Object.(*resourcev1.ResourceClaim); ok && rc.Status.Allocation != nil {
				claimMu.Lock()
				lastClaim = rc
				claimMu.Unlock()
			}
		}
	}()
	e2eutil.Eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, fmt.Sprintf("create pod: %v", err)
	})
	var phase corev1.PodPhase
	e2eutil.Eventually(t, 3*time.Minute, func() (bool, string) {
		p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, fmt.Sprintf("pod phase %s, status %+v\nkubelet log:\n%s\nplugin log:\n%s",
			phase, p.Status, tail(filepath.Join(root, "logs", "kubelet.log"), 40), plugin.Log())
	})
	step("pod " + string(phase))
	logs, err := e.Kube.CoreV1().Pods(e.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Logf("pods/log through the API server: %v (%s); reading the kubelet's log file instead", err, logs)
		logs = podLog(t, root, e.Namespace, pod.Name)
	}
	t.Logf("pod output:\n%s", logs)
	if phase != corev1.PodSucceeded {
		t.Fatalf("pod %s", phase)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	claimMu.Lock()
	claim := lastClaim
	claimMu.Unlock()
	if claim == nil {
		t.Fatal("no allocated ResourceClaim seen in the namespace")
	}
	claimName := claim.Name
	want := map[string]string{
		"DRAFORGE_NODE_NAME":        nodeName,
		"DRAFORGE_DRIVER":           simdevice.DefaultDriverName,
		"DRAFORGE_CLAIM":            e.Namespace + "/" + claimName,
		"DRAFORGE_CLAIM_UID":        string(claim.UID),
		"DRAFORGE_DEVICE_COUNT":     "1",
		"DRAFORGE_DEVICE_0_TYPE":    "gpu",
		"DRAFORGE_DEVICE_0_POOL":    "",
		"DRAFORGE_DEVICE_0_REQUEST": "gpu",
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s allocation: %+v", claimName, claim.Status.Allocation)
	}
	res := claim.Status.Allocation.Devices.Results[0]
	want["DRAFORGE_DEVICE_0"], want["DRAFORGE_DEVICE_0_POOL"] = res.Device, res.Pool
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q in the pod, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"DRAFORGE_DEVICE_0_UUID", "DRAFORGE_DEVICE_0_PRODUCT_NAME"} {
		if got[k] == "" {
			t.Errorf("%s missing in the pod's environment", k)
		}
	}

	// The pod has terminated: the kubelet unprepares the claim, and the plugin removes its CDI spec.
	spec := filepath.Join(cdiDir, simdevice.DefaultDriverName+"-device_"+string(claim.UID)+".json")
	if err := e.Kube.CoreV1().Pods(e.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e2eutil.Eventually(t, time.Minute, func() (bool, string) {
		_, err := os.Stat(spec)
		return os.IsNotExist(err), fmt.Sprintf("CDI spec %s still there after the pod's deletion (%v)\nplugin log:\n%s", spec, err, plugin.Log())
	})
	step("claim unprepared, CDI spec removed")
}

// buildImage compiles ./testimage statically and writes a docker tarball of an image holding
// it as /testimage (entrypoint: the pause mode), tagged image.
func buildImage(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "testimage")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./testimage")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testimage: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "testimage", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config = v1.Config{Entrypoint: []string{"/testimage"}}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(image)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "testimage.tar")
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		t.Fatal(err)
	}
	return out
}

// startContainerd runs containerd with its own root, state and socket under dir, CDI on with
// cdiDir, the test image as sandbox image, runc as the runtime and no NRI; it returns the socket.
func startContainerd(t *testing.T, dir, binDir, runc, cdiDir string) string {
	t.Helper()
	sock := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q

[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  # Sandboxes get oom_score_adj -998 and guaranteed containers -997; lowering it needs
  # CAP_SYS_RESOURCE, which a sandboxed root may lack (runc then fails with "can't get final
  # child's PID from pipe: EOF"). Restricted, no container goes below containerd's own value.
  restrict_oom_score_adj = true
  cdi_spec_dirs = [%[6]q]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[7]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[8]q]
    conf_dir = %[9]q
`, filepath.Join(dir, "containerd", "root"), filepath.Join(dir, "containerd", "state"), sock, sock+".ttrpc",
		image, cdiDir, runc, filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "net.d"))
	cfgPath := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "logs", "containerd.log")
	cmd := exec.Command(filepath.Join(binDir, "containerd"), "--config", cfgPath, "--log-level", "info")
	// The runc shim is found on PATH.
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	startLogged(t, cmd, logPath)
	t.Cleanup(func() { killTasks(t, binDir, sock) })
	e2eutil.Eventually(t, time.Minute, func() (bool, string) {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			conn.Close()
		}
		return err == nil, fmt.Sprintf("containerd socket: %v\ncontainerd log:\n%s", err, tail(logPath, 30))
	})
	return sock
}

// startKubelet runs the kubelet for nodeName with cgroupfs (cgroup v1 allowed), anonymous
// read access for the API server's log requests and its directories under root. It listens on
// the host's first non-loopback IPv4 address, its node IP (the kubelet refuses a loopback one).
func startKubelet(t *testing.T, dir, bin, kubeletRoot, sock, kubeconfig string) {
	t.Helper()
	ip := hostIP(t)
	port, healthz := freePort(t), freePort(t)
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podLogsDir: %s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, ip, port, healthz, sock, filepath.Join(dir, "pod-logs"))
	cfgPath := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath, "--kubeconfig", kubeconfig, "--root-dir", kubeletRoot,
		"--hostname-override", nodeName, "--node-ip", ip, "--v", "2")
	startLogged(t, cmd, filepath.Join(dir, "logs", "kubelet.log"))
}

// startLogged starts cmd with its output in logPath and kills it (and waits) at test end.
func startLogged(t *testing.T, cmd *exec.Cmd, logPath string) {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", logPath, tail(logPath, 40))
		}
	})
}

// killTasks kills and deletes what still runs in containerd's k8s.io namespace (pod sandboxes
// the kubelet did not stop because the test failed before deleting its pod).
func killTasks(t *testing.T, binDir, sock string) {
	t.Helper()
	ctr := func(args ...string) ([]byte, error) {
		return exec.Command(filepath.Join(binDir, "ctr"), append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).Output()
	}
	out, err := ctr("tasks", "ls", "-q")
	if err != nil {
		t.Logf("ctr tasks ls: %v", err)
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_, _ = ctr("tasks", "kill", "-s", "SIGKILL", id)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := ctr("tasks", "delete", id); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// restoreSysctls puts back, at test end, the kernel settings the kubelet changes when it starts
// (pkg/kubelet/cm setupKernelTunables: vm.overcommit_memory, kernel.panic, ...): the host is shared.
func restoreSysctls(t *testing.T) {
	t.Helper()
	keys := []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}
	saved := map[string][]byte{}
	for _, k := range keys {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			saved[k] = b
		}
	}
	t.Cleanup(func() {
		for k, b := range saved {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), b, 0o644); err != nil {
				t.Logf("restore %s: %v", k, err)
			}
		}
	})
}

// removeKubeletCgroups removes the kubepods cgroups the kubelet created in every hierarchy
// (empty once its pods are gone), deepest first.
func removeKubeletCgroups(t *testing.T) {
	t.Helper()
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if top, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil && top.IsDir() {
		hierarchies = append(hierarchies, "/sys/fs/cgroup/kubepods")
	}
	for _, h := range hierarchies {
		var dirs []string
		_ = filepath.WalkDir(h, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil {
				t.Logf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	}
}

// removeAll deletes dir after unmounting what containerd and the kubelet left mounted under it.
func removeAll(t *testing.T, dir string) {
	t.Helper()
	mounts, _ := os.ReadFile("/proc/self/mounts")
	var under []string
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			under = append(under, f[1])
		}
	}
	for i := len(under) - 1; i >= 0; i-- {
		if err := syscall.Unmount(under[i], syscall.MNT_DETACH); err != nil {
			t.Logf("unmount %s: %v", under[i], err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Logf("remove %s: %v", dir, err)
	}
}

// podLog reads the container's output from the kubelet's log file (podLogsDir, CRI format:
// "<time> <stream> <tag> <line>"), should pods/log through the API server fail.
func podLog(t *testing.T, root, ns, pod string) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "pod-logs", ns+"_"+pod+"_*", "show-env", "*.log"))
	if len(files) != 1 {
		t.Fatalf("container log files of %s/%s: %v", ns, pod, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if f := strings.SplitN(l, " ", 4); len(f) == 4 && f[1] == "stdout" {
			out.WriteString(f[3] + "\n")
		}
	}
	return out.Bytes()
}

// hostIP is the first global unicast IPv4 address of the host.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("TestRealKubelet needs a non-loopback IPv4 address for the node (the kubelet refuses a loopback node IP)")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(e2eutil.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return n
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
