package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/devicestatus"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

const netDriver = "net.sim.draforge.oaslananka"

// kubeletDirs are the three node directories the plugin uses, in one short temporary directory
// (unix socket paths are limited to 107 bytes).
type kubeletDirs struct{ plugins, registry, cdi string }

func newKubeletDirs(t *testing.T) kubeletDirs {
	t.Helper()
	root, err := os.MkdirTemp("", "kp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	return kubeletDirs{filepath.Join(root, "plugins"), filepath.Join(root, "registry"), filepath.Join(root, "cdi")}
}

const fpgaDriver = "fpga.sim.draforge.oaslananka"

// startKubeletPlugin runs `draforge kubelet-plugin` for node with the dirs, allowed the driver
// names the tests' pools use; it is killed at test end.
func startKubeletPlugin(t *testing.T, kubeconfig, node string, d kubeletDirs) *controller {
	t.Helper()
	return startKubeletPluginFor(t, kubeconfig, node, d, simdevice.DefaultDriverName, netDriver, fpgaDriver)
}

func startKubeletPluginFor(t *testing.T, kubeconfig, node string, d kubeletDirs, driverNames ...string) *controller {
	t.Helper()
	return e2eutil.Run(t, e2eutil.ControllerSpec{Kubeconfig: kubeconfig, Subcommand: "kubelet-plugin",
		Args: []string{"--node-name", node, "--plugins-dir", d.plugins, "--registry-dir", d.registry, "--cdi-dir", d.cdi,
			"--health-interval", "1s", "--driver-names", strings.Join(driverNames, ",")}})
}

// fakeKubelet does what the kubelet's plugin manager and DRA manager do with a DRA plugin:
// read the registration socket, check the plugin's info, tell it it is registered, then call
// the DRA and health services on the endpoint it named.
type fakeKubelet struct {
	dra    drapbv1.DRAPluginClient
	health drahealthv1.DRAResourceHealthClient
}

func dialUnix(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func registerWith(t *testing.T, d kubeletDirs, driver string) *fakeKubelet {
	t.Helper()
	sock := filepath.Join(d.registry, driver+"-reg.sock")
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Sprintf("registration socket %s: %v", sock, err)
	})
	reg := registerapi.NewRegistrationClient(dialUnix(t, sock))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo %s: %v", driver, err)
	}
	want := filepath.Join(d.plugins, driver, "dra.sock")
	if info.Type != registerapi.DRAPlugin || info.Name != driver || info.Endpoint != want {
		t.Fatalf("GetInfo: type %q name %q endpoint %q; want %q %q %q", info.Type, info.Name, info.Endpoint, registerapi.DRAPlugin, driver, want)
	}
	for _, v := range []string{drapbv1.DRAPluginService, drahealthv1.DRAResourceHealthService} {
		if !slices.Contains(info.SupportedVersions, v) {
			t.Errorf("GetInfo: supported versions %v lack %s", info.SupportedVersions, v)
		}
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatalf("NotifyRegistrationStatus: %v", err)
	}
	conn := dialUnix(t, info.Endpoint)
	return &fakeKubelet{dra: drapbv1.NewDRAPluginClient(conn), health: drahealthv1.NewDRAResourceHealthClient(conn)}
}

func (k *fakeKubelet) prepare(t *testing.T, c *resourcev1.ResourceClaim) *drapbv1.NodePrepareResourceResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := k.dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{
		{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}})
	if err != nil {
		t.Fatalf("NodePrepareResources %s: %v", c.Name, err)
	}
	r := resp.Claims[string(c.UID)]
	if r == nil {
		t.Fatalf("NodePrepareResources %s: no answer for the claim: %v", c.Name, resp)
	}
	return r
}

func (k *fakeKubelet) unprepare(t *testing.T, ns, name string, uid types.UID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := k.dra.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{
		{Namespace: ns, Name: name, Uid: string(uid)}}})
	if err != nil {
		t.Fatalf("NodeUnprepareResources %s: %v", name, err)
	}
	if r := resp.Claims[string(uid)]; r == nil || r.Error != "" {
		t.Fatalf("NodeUnprepareResources %s: %v", name, r)
	}
}

// allocatedClaim creates a claim and writes its allocation as kube-scheduler would: the devices
// on node, admin access per request when asked for.
func allocatedClaim(t *testing.T, e *env, name, node string, admin bool, devs ...[3]string) *resourcev1.ResourceClaim {
	t.Helper()
	ctx := t.Context()
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "req",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "sim", AllocationMode: resourcev1.DeviceAllocationModeExactCount,
				Count: int64(len(devs)), AdminAccess: ptr.To(admin)}}}}}}
	if !admin {
		c.Spec.Devices.Requests[0].Exactly.AdminAccess = nil
	}
	c, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create claim %s: %v", name, err)
	}
	var results []resourcev1.DeviceRequestAllocationResult
	for _, d := range devs {
		r := resourcev1.DeviceRequestAllocationResult{Request: "req", Driver: d[0], Pool: d[1], Device: d[2]}
		if admin {
			r.AdminAccess = ptr.To(true)
		}
		results = append(results, r)
	}
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	c, err = e.Kube.ResourceV1().ResourceClaims(e.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("allocate claim %s: %v", name, err)
	}
	return c
}

func (e *env) claim(t *testing.T, name string) *resourcev1.ResourceClaim {
	t.Helper()
	c, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cdiEnv reads the claim's CDI spec and returns its environment: spec-wide then per device.
func cdiEnv(t *testing.T, d kubeletDirs, driver string, uid types.UID) (kind string, env map[string]string, devices []string) {
	t.Helper()
	path := filepath.Join(d.cdi, driver+"-device_"+string(uid)+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("CDI spec: %v", err)
	}
	var spec struct {
		Version        string `json:"cdiVersion"`
		Kind           string `json:"kind"`
		ContainerEdits struct{ Env []string }
		Devices        []struct {
			Name           string
			ContainerEdits struct{ Env []string }
		}
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatalf("CDI spec %s: %v", path, err)
	}
	if spec.Version != "0.6.0" {
		t.Errorf("CDI spec %s: cdiVersion %q", path, spec.Version)
	}
	env = map[string]string{}
	add := func(kvs []string) {
		for _, kv := range kvs {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	add(spec.ContainerEdits.Env)
	for _, dev := range spec.Devices {
		devices = append(devices, spec.Kind+"="+dev.Name)
		add(dev.ContainerEdits.Env)
	}
	return spec.Kind, env, devices
}

func cdiSpecExists(d kubeletDirs, driver string, uid types.UID) bool {
	_, err := os.Stat(filepath.Join(d.cdi, driver+"-device_"+string(uid)+".json"))
	return err == nil
}

func readyEntries(c *resourcev1.ResourceClaim, driver string) []resourcev1.AllocatedDeviceStatus {
	var out []resourcev1.AllocatedDeviceStatus
	for _, d := range c.Status.Devices {
		if d.Driver == driver && len(d.Conditions) == 1 && d.Conditions[0].Type == "Ready" && d.Conditions[0].Status == metav1.ConditionTrue {
			out = append(out, d)
		}
	}
	return out
}

func checkpointClaims(t *testing.T, d kubeletDirs, driver string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(d.plugins, driver, "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cp struct{ Claims map[string]any }
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatal(err)
	}
	return cp.Claims
}

// TestKubeletPlugin acts as the kubelet towards `draforge kubelet-plugin` on a node without a
// kubelet: registration and DRA gRPC over the plugin's sockets, CDI files on disk, claim status
// and the checkpoint across a restart, against the real API server.
func TestKubeletPlugin(t *testing.T) {
	e := newEnv(t)
	installCRDs(t, e)
	ctx := t.Context()
	// Admin access needs the namespace label (kube-apiserver checks it on create and on status).
	nsObj, err := e.Kube.CoreV1().Namespaces().Get(ctx, e.Namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["resource.kubernetes.io/admin-access"] = "true"
	if _, err := e.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := "kp-" + e.Namespace
	n, err := e.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"kp-test": e.Namespace}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	// A GPU pool chosen by nodeSelector and a NIC pool with its own driver chosen by name: the
	// plugin registers both drivers. Both write status.devices: the GPU pool by deviceStatus
	// (k8s-dra-driver-gpu itself writes none), the NIC pool by its profile.
	e.Apply(t, e.Namespace, newPool(e.Namespace, "gpus", map[string]any{"deviceCount": int64(2), "deviceType": "gpu",
		"profile": "nvidia-gpu", "deviceStatus": true, "nodeSelector": map[string]any{"kp-test": e.Namespace}}))
	e.Apply(t, e.Namespace, newPool(e.Namespace, "nics", map[string]any{"deviceCount": int64(1), "deviceType": "nic",
		"profile": "mellanox-nic", "driverName": netDriver, "targetNodes": []any{node}}))
	gpuPool := simdevice.PoolNameFor(e.Namespace, "gpus", node)
	nicPool := simdevice.PoolNameFor(e.Namespace, "nics", node)
	gpu := simdevice.DefaultDriverName

	dirs := newKubeletDirs(t)
	plugin := startKubeletPlugin(t, e.Kubeconfig, node, dirs)
	k := registerWith(t, dirs, gpu)
	kn := registerWith(t, dirs, netDriver)

	// One claim on gpu-0: a CDI device per allocated device, the env describing it, Ready status.
	a := allocatedClaim(t, e, "a", node, false, [3]string{gpu, gpuPool, "gpu-0"})
	ra := k.prepare(t, a)
	if ra.Error != "" || len(ra.Devices) != 1 || ra.Devices[0].DeviceName != "gpu-0" || ra.Devices[0].PoolName != gpuPool ||
		!slices.Equal(ra.Devices[0].RequestNames, []string{"req"}) || len(ra.Devices[0].CdiDeviceIds) != 1 {
		t.Fatalf("prepare a: %v", ra)
	}
	kind, envA, ids := cdiEnv(t, dirs, gpu, a.UID)
	if kind != gpu+"/device" || !slices.Equal(ids, ra.Devices[0].CdiDeviceIds) {
		t.Errorf("CDI spec of a: kind %q devices %v, prepare answered %v", kind, ids, ra.Devices[0].CdiDeviceIds)
	}
	for k, v := range map[string]string{"DRAFORGE_NODE_NAME": node, "DRAFORGE_DRIVER": gpu, "DRAFORGE_CLAIM": e.Namespace + "/a",
		"DRAFORGE_CLAIM_UID": string(a.UID), "DRAFORGE_DEVICE_COUNT": "1", "DRAFORGE_DEVICE_0": "gpu-0", "DRAFORGE_DEVICE_0_POOL": gpuPool,
		"DRAFORGE_DEVICE_0_REQUEST": "req", "DRAFORGE_DEVICE_0_TYPE": "gpu", "DRAFORGE_DEVICE_0_PRODUCT_NAME": "NVIDIA A100-SXM4-80GB",
		"DRAFORGE_DEVICE_0_PCI_BUS_ID": "0000:08:00.0"} {
		if envA[k] != v {
			t.Errorf("CDI env of a: %s=%q, want %q", k, envA[k], v)
		}
	}
	if _, ok := envA["DRAFORGE_DEVICE_0_INDEX"]; ok {
		t.Error("CDI env of a: an index for a device whose profile (nvidia-gpu) publishes none")
	}
	if !strings.HasPrefix(envA["DRAFORGE_DEVICE_0_UUID"], "GPU-") {
		t.Errorf("CDI env of a: DRAFORGE_DEVICE_0_UUID=%q, want the device's GPU- uuid attribute", envA["DRAFORGE_DEVICE_0_UUID"])
	}
	var statusRV string
	eventually(t, 10*time.Second, func() (bool, string) {
		c := e.claim(t, "a")
		statusRV = c.ResourceVersion
		got := readyEntries(c, gpu)
		return len(got) == 1 && got[0].Pool == gpuPool && got[0].Device == "gpu-0", fmt.Sprintf("status.devices %+v", c.Status.Devices)
	})

	// Preparing again (a kubelet restart does that) answers the same and writes nothing.
	if again := k.prepare(t, a); again.Error != "" || !slices.Equal(again.Devices[0].CdiDeviceIds, ra.Devices[0].CdiDeviceIds) {
		t.Errorf("repeated prepare of a: %v, first %v", again, ra)
	}
	if rv := e.claim(t, "a").ResourceVersion; rv != statusRV {
		t.Errorf("repeated prepare wrote the claim: resourceVersion %s -> %s", statusRV, rv)
	}

	// A second claim on gpu-0 with admin access shares it; a third without admin access is
	// refused while a holds the device.
	b := allocatedClaim(t, e, "b", node, true, [3]string{gpu, gpuPool, "gpu-0"})
	if rb := k.prepare(t, b); rb.Error != "" || len(rb.Devices) != 1 || rb.Devices[0].DeviceName != "gpu-0" {
		t.Fatalf("prepare b (admin access on gpu-0): %v", rb)
	}
	if _, envB, _ := cdiEnv(t, dirs, gpu, b.UID); envB["DRAFORGE_DEVICE_0_ADMIN_ACCESS"] != "true" || envB["DRAFORGE_DEVICE_0"] != "gpu-0" {
		t.Errorf("CDI env of b: %v", envB)
	}
	c := allocatedClaim(t, e, "c", node, false, [3]string{gpu, gpuPool, "gpu-0"})
	if rc := k.prepare(t, c); !strings.Contains(rc.Error, "already prepared for ResourceClaim "+e.Namespace+"/a") {
		t.Errorf("prepare c (gpu-0 without admin access, held by a): error %q", rc.Error)
	}
	if cdiSpecExists(dirs, gpu, c.UID) {
		t.Error("a refused claim left a CDI spec")
	}

	// The NIC driver: network data in status.devices and in the env.
	nic := allocatedClaim(t, e, "nic", node, false, [3]string{netDriver, nicPool, "nic-0"})
	if rn := kn.prepare(t, nic); rn.Error != "" || len(rn.Devices) != 1 {
		t.Fatalf("prepare nic: %v", rn)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		c := e.claim(t, "nic")
		got := readyEntries(c, netDriver)
		return len(got) == 1 && got[0].NetworkData != nil && got[0].NetworkData.InterfaceName == "nic0" && len(got[0].NetworkData.IPs) == 1 &&
			got[0].NetworkData.HardwareAddress != "", fmt.Sprintf("status.devices %+v", c.Status.Devices)
	})
	if _, envN, _ := cdiEnv(t, dirs, netDriver, nic.UID); envN["DRAFORGE_DEVICE_0_INTERFACE"] != "nic0" || envN["DRAFORGE_DEVICE_0_IP"] == "" {
		t.Errorf("CDI env of nic: %v", envN)
	}

	// Health: all healthy, then an "unhealthy" fault on gpu-1 turns it Unhealthy.
	hctx, hcancel := context.WithTimeout(ctx, 30*time.Second)
	defer hcancel()
	stream, err := k.health.NodeWatchResources(hctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	healthOf := func(want drahealthv1.HealthStatus) {
		t.Helper()
		for {
			r, err := stream.Recv()
			if err != nil {
				t.Fatalf("health stream waiting for gpu-1 %v: %v", want, err)
			}
			got := map[string]drahealthv1.HealthStatus{}
			for _, d := range r.Devices {
				got[d.Device.PoolName+"|"+d.Device.DeviceName] = d.Health
			}
			if len(got) == 2 && got[gpuPool+"|gpu-0"] == drahealthv1.HealthStatus_HEALTHY && got[gpuPool+"|gpu-1"] == want {
				return
			}
		}
	}
	healthOf(drahealthv1.HealthStatus_HEALTHY)
	e.Apply(t, e.Namespace, newPool(e.Namespace, "gpus", map[string]any{"deviceCount": int64(2), "deviceType": "gpu",
		"profile": "nvidia-gpu", "deviceStatus": true, "nodeSelector": map[string]any{"kp-test": e.Namespace},
		"faults": []any{map[string]any{"device": "gpu-1", "mode": "unhealthy"}}}))
	healthOf(drahealthv1.HealthStatus_UNHEALTHY)

	// d is prepared on gpu-1; then gpu-1 disappears from the pool. A new claim for it is
	// refused with a clear error; d still unprepares from the checkpoint.
	d := allocatedClaim(t, e, "d", node, false, [3]string{gpu, gpuPool, "gpu-1"})
	if rd := k.prepare(t, d); rd.Error != "" {
		t.Fatalf("prepare d: %v", rd)
	}
	e.Apply(t, e.Namespace, newPool(e.Namespace, "gpus", map[string]any{"deviceCount": int64(2), "deviceType": "gpu",
		"profile": "nvidia-gpu", "deviceStatus": true, "nodeSelector": map[string]any{"kp-test": e.Namespace},
		"faults": []any{map[string]any{"device": "gpu-1", "mode": "disappear"}}}))
	gone := allocatedClaim(t, e, "gone", node, false, [3]string{gpu, gpuPool, "gpu-1"})
	eventually(t, 10*time.Second, func() (bool, string) {
		r := k.prepare(t, gone)
		return strings.Contains(r.Error, "device gpu-1 of pool "+gpuPool+" (driver "+gpu+") is not on node "+node), "prepare gone: " + r.Error
	})

	gpuLabel := `driver="` + gpu + `"`
	if n := plugin.Metric(t, "draforge_kubelet_plugin_operations_total", gpuLabel, `operation="prepare"`, `result="error"`); n < 2 {
		t.Errorf("prepare errors counted: %v, want >= 2 (c and gone)", n)
	}
	if n := plugin.Metric(t, "draforge_kubelet_plugin_prepared_claims", gpuLabel); n != 3 {
		t.Errorf("prepared claims of %s: %v, want 3 (a, b, d)", gpu, n)
	}
	if n := plugin.Metric(t, "draforge_kubelet_plugin_registered_drivers"); n != 2 {
		t.Errorf("registered drivers: %v, want 2", n)
	}

	// Restart the plugin between prepare and unprepare (SIGKILL: no chance to tidy up). The
	// new process re-registers, answers a repeated prepare from its checkpoint and unprepares
	// what the old one prepared.
	plugin.Kill()
	plugin = startKubeletPlugin(t, e.Kubeconfig, node, dirs)
	k = registerWith(t, dirs, gpu)
	// b's spec went missing meanwhile: the repeated prepare restores it.
	if err := os.Remove(filepath.Join(dirs.cdi, gpu+"-device_"+string(b.UID)+".json")); err != nil {
		t.Fatal(err)
	}
	if again := k.prepare(t, b); again.Error != "" || len(again.Devices) != 1 || again.Devices[0].DeviceName != "gpu-0" {
		t.Errorf("prepare b after restart: %v", again)
	}
	if _, envB, _ := cdiEnv(t, dirs, gpu, b.UID); envB["DRAFORGE_DEVICE_0"] != "gpu-0" || envB["DRAFORGE_DEVICE_0_ADMIN_ACCESS"] != "true" {
		t.Errorf("restored CDI env of b: %v", envB)
	}
	k.unprepare(t, e.Namespace, "a", a.UID)
	if cdiSpecExists(dirs, gpu, a.UID) {
		t.Error("unprepare a left its CDI spec")
	}
	if _, ok := checkpointClaims(t, dirs, gpu)[string(a.UID)]; ok {
		t.Error("unprepare a left it in the checkpoint")
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		c := e.claim(t, "a")
		return len(c.Status.Devices) == 0, fmt.Sprintf("status.devices of a after unprepare: %+v", c.Status.Devices)
	})
	// With a unprepared, c (exclusive on gpu-0) may now use gpu-0 beside the admin claim b.
	if rc := k.prepare(t, c); rc.Error != "" {
		t.Errorf("prepare c after a was unprepared: %v", rc)
	}
	// d's device is gone and d itself is deleted before the unprepare: still a clean undo.
	if err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	k.unprepare(t, e.Namespace, "d", d.UID)
	if cdiSpecExists(dirs, gpu, d.UID) {
		t.Error("unprepare d left its CDI spec")
	}
	// The status write carries the claim UID: a claim re-created under the same name (another
	// UID) is never written (kube-apiserver refuses the apply: metadata.uid is immutable).
	before := e.claim(t, "b")
	if err := devicestatus.ApplyByName(ctx, e.Kube.ResourceV1(), e.Namespace, "b", "00000000-1111-2222-3333-444444444444", gpu, nil); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.uid") {
		t.Errorf("status write with another UID: want Invalid metadata.uid, got %v", err)
	}
	if after := e.claim(t, "b"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("status write with another UID changed the claim: %+v", after.Status.Devices)
	}
	// Unpreparing twice, or a claim never prepared, succeeds.
	k.unprepare(t, e.Namespace, "d", d.UID)
	k.unprepare(t, e.Namespace, "never", "00000000-0000-0000-0000-000000000000")
	// After the restart: b and c are prepared; the restarted process counted from its checkpoint.
	if n := plugin.Metric(t, "draforge_kubelet_plugin_prepared_claims", gpuLabel); n != 2 {
		t.Errorf("prepared claims of %s after the restart: %v, want 2 (b, c)", gpu, n)
	}
	if n := plugin.Metric(t, "draforge_kubelet_plugin_operations_total", gpuLabel, `operation="unprepare"`, `result="success"`); n != 4 {
		t.Errorf("unprepares counted after the restart: %v, want 4", n)
	}

	// Drivers follow the pools: a pool with a new driver registers it; once the pool is gone
	// (and the driver has nothing prepared) it is unregistered again.
	const fpga = fpgaDriver
	e.Apply(t, e.Namespace, newPool(e.Namespace, "fpgas", map[string]any{"deviceCount": int64(1), "deviceType": "fpga",
		"driverName": fpga, "targetNodes": []any{node}}))
	registerWith(t, dirs, fpga)
	if err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Delete(ctx, "fpgas", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(dirs.registry, fpga+"-reg.sock"))
		return os.IsNotExist(err), fmt.Sprintf("registration socket of %s after its pool was deleted: %v", fpga, err)
	})
	if !plugin.Running() {
		t.Fatalf("plugin exited: %s", plugin.Log())
	}
}

// fakeRegistration is another vendor's kubelet plugin as the kubelet's plugin watcher sees it:
// a registration socket answering GetInfo with its driver name.
type fakeRegistration struct {
	registerapi.UnimplementedRegistrationServer
	name string
}

func (f fakeRegistration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: f.name, Endpoint: "/elsewhere/dra.sock",
		SupportedVersions: []string{drapbv1.DRAPluginService}}, nil
}

func serveFakeRegistration(t *testing.T, path, driver string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, fakeRegistration{name: driver})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
}

// foreignSlice publishes a ResourceSlice of driver on node as a real driver would: no DRAForge
// label. It is deleted at test end.
func foreignSlice(t *testing.T, e *env, name, driver, node string) {
	t.Helper()
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: []resourcev1.Device{{Name: "gpu-0"}}}}
	if _, err := e.Kube.ResourceV1().ResourceSlices().Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceSlice %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = e.Kube.ResourceV1().ResourceSlices().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// TestKubeletPluginRefusesForeignDriverNames: beside pools of its own driver, the node has
// pools naming drivers another plugin serves there (a registration socket of a running plugin,
// slices that DRAForge did not publish) and one outside --driver-names. The plugin serves its
// own name, refuses the others and says why (log, metric), never touches the other plugin's
// socket, and re-judges a name at each registration: once the foreign slice is gone the name is
// served, once one appears again it is unregistered.
func TestKubeletPluginRefusesForeignDriverNames(t *testing.T) {
	e := newEnv(t)
	installCRDs(t, e)
	ctx := t.Context()
	node := "kpg-" + e.Namespace
	if _, err := e.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	const (
		sliced  = "gpu.real-vendor.com"   // another driver publishes slices of it on the node
		socket  = "nic.real-vendor.com"   // another plugin's registration socket is live
		outside = "fpga.not-allowed.test" // not in --driver-names
	)
	sim := simdevice.DefaultDriverName
	for name, driver := range map[string]string{"sims": sim, "sliced": sliced, "socket": socket, "outside": outside} {
		e.Apply(t, e.Namespace, newPool(e.Namespace, name, map[string]any{"deviceCount": int64(1), "deviceType": "gpu",
			"driverName": driver, "targetNodes": []any{node}}))
	}
	foreignSlice(t, e, "real-"+e.Namespace, sliced, node)
	// A slice of the same driver on another node is no evidence about this one.
	foreignSlice(t, e, "real-elsewhere-"+e.Namespace, socket, "elsewhere-"+e.Namespace)

	dirs := newKubeletDirs(t)
	if err := os.MkdirAll(dirs.registry, 0o750); err != nil {
		t.Fatal(err)
	}
	// The other vendor's plugin uses a rolling-update registration socket name.
	realSock := filepath.Join(dirs.registry, socket+"-0123-reg.sock")
	serveFakeRegistration(t, realSock, socket)
	plugin := startKubeletPluginFor(t, e.Kubeconfig, node, dirs, sim, sliced, socket)

	// Its own name is served.
	registerWith(t, dirs, sim)
	refused := func(driver, reason string) float64 {
		return plugin.Metric(t, "draforge_kubelet_plugin_refused_drivers", `driver="`+driver+`"`, `reason="`+reason+`"`)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		got := map[string]float64{sliced: refused(sliced, "foreign-slice"), socket: refused(socket, "socket"), outside: refused(outside, "not-allowed")}
		return got[sliced] == 1 && got[socket] == 1 && got[outside] == 1, fmt.Sprintf("refused_drivers %v", got)
	})
	if n := plugin.Metric(t, "draforge_kubelet_plugin_refused_drivers", `driver="`+sim+`"`); n != 0 {
		t.Errorf("%s refused: %v", sim, n)
	}
	// Exactly its reasons: the socket name is allowed and has no foreign slice on this node.
	if n := refused(socket, "foreign-slice") + refused(socket, "not-allowed") + refused(sliced, "socket"); n != 0 {
		t.Errorf("refusals with reasons that do not hold: %v", n)
	}
	// The log says which slice, which socket, which list.
	log := plugin.Log()
	for _, want := range []string{
		"ResourceSlice real-" + e.Namespace + " of driver " + sliced + " on node " + node + " was not published by DRAForge",
		"registration socket " + realSock + " is served by a running kubelet plugin of driver " + socket,
		"driver name " + outside + " is not in --driver-names [" + sim + ", " + sliced + ", " + socket + "]",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if n := strings.Count(log, "driver name refused"); n != 3 {
		t.Errorf("%d refusal lines, want 3 (one per name, not one per pass):\n%s", n, log)
	}
	// Nothing registered for the refused names; the other plugin's socket is intact and answers.
	for _, d := range []string{sliced, socket, outside} {
		if _, err := os.Stat(filepath.Join(dirs.registry, d+"-reg.sock")); !os.IsNotExist(err) {
			t.Errorf("registration socket of refused %s: %v", d, err)
		}
		if _, err := os.Stat(filepath.Join(dirs.plugins, d, "dra.sock")); !os.IsNotExist(err) {
			t.Errorf("plugin socket of refused %s: %v", d, err)
		}
	}
	info, err := registerapi.NewRegistrationClient(dialUnix(t, realSock)).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil || info.Name != socket {
		t.Errorf("the other plugin's socket after the plugin started: %v %v", info, err)
	}
	if n := plugin.Metric(t, "draforge_kubelet_plugin_registered_drivers"); n != 1 {
		t.Errorf("registered drivers %v, want 1 (%s)", n, sim)
	}

	// The foreign slice goes: the name is served (judged again at its registration).
	if err := e.Kube.ResourceV1().ResourceSlices().Delete(ctx, "real-"+e.Namespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	registerWith(t, dirs, sliced)
	if n := refused(sliced, "foreign-slice"); n != 0 {
		t.Errorf("%s still counted as refused: %v", sliced, n)
	}
	// A foreign slice appears while the name is served: the plugin unregisters it.
	foreignSlice(t, e, "real-again-"+e.Namespace, sliced, node)
	eventually(t, 20*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(dirs.registry, sliced+"-reg.sock"))
		return os.IsNotExist(err) && refused(sliced, "foreign-slice") == 1, fmt.Sprintf("registration socket of %s: %v", sliced, err)
	})
	if !strings.Contains(plugin.Log(), "ResourceSlice real-again-"+e.Namespace) {
		t.Error("the unregistration does not name the slice")
	}
	// Its own name is untouched by all this.
	registerWith(t, dirs, sim)
	if !plugin.Running() {
		t.Fatalf("plugin exited: %s", plugin.Log())
	}
}

// TestKindExampleApplies applies examples/kind/sim-gpu-pod.yaml (what kind:up runs on a real
// node) to the API server, in the test's namespace, and checks that its pool targets a real
// node labelled as kind:up labels it and none of the simulated ones of
// examples/simulated-nodes.yaml.
func TestKindExampleApplies(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	data, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "kind", "sim-gpu-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, u := range decodeDocs(t, data) {
		kinds[u.GetKind()] = true
		switch {
		case u.GetKind() == "Namespace":
			continue
		case u.GetKind() == "DeviceClass":
			// Cluster-scoped: a name of this test's own, removed afterwards.
			u.SetName(e.Namespace + "-gpu")
			t.Cleanup(func() {
				_ = e.Kube.ResourceV1().DeviceClasses().Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
			})
		case u.GetKind() == "SimulatedDevicePool":
			p, err := simdevice.FromUnstructured(u)
			if err != nil {
				t.Fatal(err)
			}
			real := node("kind-control-plane", map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": "kind-control-plane",
				"draforge.test/real-gpus": "true"})
			if !p.Targets(real) {
				t.Error("the example pool does not target a real node labelled by kind:up")
			}
			for _, n := range []string{"node-a", "node-b", "node-c"} {
				sim, err := e.Kube.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if p.Targets(sim) {
					t.Errorf("the example pool targets simulated node %s", n)
				}
			}
		}
		u.SetNamespace("")
		if u.GetKind() != "DeviceClass" {
			u.SetNamespace(e.Namespace)
		}
		e.Apply(t, e.Namespace, u)
	}
	for _, k := range []string{"Namespace", "SimulatedDevicePool", "DeviceClass", "ResourceClaimTemplate", "Pod"} {
		if !kinds[k] {
			t.Errorf("example has no %s", k)
		}
	}
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}
