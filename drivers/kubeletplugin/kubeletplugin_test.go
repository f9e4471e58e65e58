package kubeletplugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/simdevice"
)

func pool(name string, spec simdevice.PoolSpec) *simdevice.Pool {
	p := &simdevice.Pool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}, Spec: spec}
	p.Default()
	return p
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestDevicesOn(t *testing.T) {
	n := node("n1", map[string]string{"gpu": "yes"})
	gpus := pool("gpus", simdevice.PoolSpec{DeviceCount: 3, DeviceType: "gpu", Profile: simdevice.ProfileNvidiaGPU,
		NodeSelector: map[string]string{"gpu": "yes"},
		Faults: []simdevice.Fault{{Device: intstr.FromString("gpu-1"), Mode: simdevice.FaultUnhealthy},
			{Device: intstr.FromInt32(2), Mode: simdevice.FaultDisappear}}})
	nics := pool("nics", simdevice.PoolSpec{DeviceCount: 1, DeviceType: "nic", DriverName: "net.example.com", TargetNodes: []string{"n1"}})
	elsewhere := pool("elsewhere", simdevice.PoolSpec{DeviceCount: 1, DeviceType: "fpga", DriverName: "fpga.example.com", TargetNodes: []string{"n2"}})
	snap := devicesOn(n, []*simdevice.Pool{nics, gpus, elsewhere}, zerolog.Nop())
	if got := snap.drivers(); strings.Join(got, ",") != "net.example.com,sim.draforge.oaslananka" {
		t.Fatalf("drivers %v", got)
	}
	gpuPool := simdevice.PoolNameFor("ns", "gpus", "n1")
	g := snap[simdevice.DefaultDriverName]
	if len(g) != 2 || g[key(gpuPool, "gpu-0")] == nil || g[key(gpuPool, "gpu-1")] == nil {
		t.Fatalf("gpu devices %v (gpu-2 disappeared)", g)
	}
	if g[key(gpuPool, "gpu-0")].Unhealthy || !g[key(gpuPool, "gpu-1")].Unhealthy {
		t.Error("unhealthy fault not on gpu-1 alone")
	}
	// The nvidia-gpu profile publishes no index attribute (the real driver does not).
	if d := g[key(gpuPool, "gpu-1")]; d.Index != -1 || d.Type != "gpu" || d.SDP != "ns/gpus" || d.Network != nil {
		t.Errorf("gpu-1 %+v", d)
	}
	nic := snap["net.example.com"][key(simdevice.PoolNameFor("ns", "nics", "n1"), "nic-0")]
	if nic == nil || nic.Index != 0 || nic.Network == nil || nic.Network.InterfaceName != "nic0" {
		t.Errorf("nic %+v", nic)
	}
	// No Node object: no devices, whatever the pools say.
	if len(devicesOn(nil, []*simdevice.Pool{gpus}, zerolog.Nop())) != 0 {
		t.Error("devices without a node")
	}
	// A pool being deleted publishes nothing on the node any more.
	gone := pool("gone", simdevice.PoolSpec{DeviceCount: 1, DeviceType: "gpu", TargetNodes: []string{"n1"}})
	gone.DeletionTimestamp = ptr.To(metav1.Now())
	if len(devicesOn(n, []*simdevice.Pool{gone}, zerolog.Nop())) != 0 {
		t.Error("a deleted pool's devices")
	}
}

func TestHealthReport(t *testing.T) {
	now := time.Unix(100, 0)
	r := healthReport(map[string]*device{
		key("p", "b"): {Pool: "p", Name: "b", Unhealthy: true, SDP: "ns/x"},
		key("p", "a"): {Pool: "p", Name: "a"},
	}, now)
	if len(r.Devices) != 2 || r.Devices[0].DeviceName != "a" || r.Devices[0].Health != kubeletplugin.HealthStatusHealthy ||
		r.Devices[1].Health != kubeletplugin.HealthStatusUnhealthy || !strings.Contains(r.Devices[1].Message, "ns/x") ||
		!r.Devices[1].LastUpdated.Equal(now) {
		t.Errorf("report %+v", r)
	}
	if r := healthReport(nil, now); r.Devices == nil || len(r.Devices) != 0 {
		t.Errorf("empty report %+v", r)
	}
}

func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cp, err := loadCheckpoint(dir)
	if err != nil || len(cp.Claims) != 0 {
		t.Fatalf("missing checkpoint: %v %v", cp, err)
	}
	cp.Claims["u1"] = &preparedClaim{Namespace: "ns", Name: "c", Devices: []preparedDevice{{Request: "r", Pool: "p", Device: "d", AdminAccess: true, CDIDeviceID: "x/device=y"}}}
	if err := cp.save(); err != nil {
		t.Fatal(err)
	}
	back, err := loadCheckpoint(dir)
	if err != nil || back.Claims["u1"] == nil || !back.Claims["u1"].Devices[0].AdminAccess || back.Claims["u1"].Devices[0].CDIDeviceID != "x/device=y" {
		t.Fatalf("reloaded %+v %v", back, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	path := filepath.Join(dir, checkpointFile)
	for content, want := range map[string]string{
		"{not json":                 "checkpoint " + path,
		`{"version":7,"claims":{}}`: "version 7",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want an error with %q, got %v", content, want, err)
		}
	}
}

func TestWantedDriversKeepsCheckpointedDrivers(t *testing.T) {
	dir := t.TempDir()
	for name, claims := range map[string]int{"old.example.com": 1, "empty.example.com": 0} {
		cp, _ := loadCheckpoint(filepath.Join(dir, name))
		for i := range claims {
			cp.Claims[types.UID(rune('a'+i))] = &preparedClaim{}
		}
		if err := cp.save(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := wantedDrivers(dir, snapshot{"new.example.com": {}})
	if err != nil || strings.Join(got, ",") != "new.example.com,old.example.com" {
		t.Errorf("wanted %v %v", got, err)
	}
}

func testDriver(t *testing.T, devs ...*device) *driver {
	t.Helper()
	snap := snapshot{"sim.example.com": {}}
	for _, d := range devs {
		snap["sim.example.com"][key(d.Pool, d.Name)] = d
	}
	cp, err := loadCheckpoint(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &driver{name: "sim.example.com", node: "n1", cdiDir: t.TempDir(), cp: cp,
		inv: &inventory{snap: snap, change: make(chan struct{})}, now: time.Now, log: zerolog.Nop()}
}

func allocated(uid, name string, admin bool, devs ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{}}}
	for _, d := range devs {
		r := resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "sim.example.com", Pool: "p", Device: d}
		if admin {
			r.AdminAccess = ptr.To(true)
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	// A device of another driver is not this driver's business.
	c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
		resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "other.example.com", Pool: "p", Device: "x"})
	return c
}

func TestPlanSharingRules(t *testing.T) {
	d := testDriver(t, &device{Pool: "p", Name: "gpu-0"}, &device{Pool: "p", Name: "gpu-1"})
	take := func(c *resourcev1.ResourceClaim) error {
		pc, err := d.plan(c)
		if err == nil {
			d.cp.Claims[c.UID] = pc
		}
		return err
	}
	if err := take(allocated("a", "a", false, "gpu-0")); err != nil {
		t.Fatal(err)
	}
	if pc := d.cp.Claims["a"]; len(pc.Devices) != 1 || pc.Devices[0].CDIDeviceID != "sim.example.com/device=a-0-gpu-0" {
		t.Errorf("planned %+v", pc)
	}
	if err := take(allocated("b", "b", true, "gpu-0")); err != nil {
		t.Errorf("admin access beside an exclusive claim: %v", err)
	}
	if err := take(allocated("c", "c", false, "gpu-0")); err == nil || !strings.Contains(err.Error(), "already prepared for ResourceClaim ns/a") {
		t.Errorf("second exclusive claim: %v", err)
	}
	if err := take(allocated("e", "e", false, "gpu-9")); err == nil || !strings.Contains(err.Error(), "device gpu-9 of pool p (driver sim.example.com) is not on node n1") {
		t.Errorf("missing device: %v", err)
	}
	if _, err := d.plan(&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u"}}); err == nil || !strings.Contains(err.Error(), "not allocated") {
		t.Errorf("unallocated: %v", err)
	}
	// Replanning the same claim does not conflict with itself.
	if _, err := d.plan(allocated("a", "a", false, "gpu-0")); err != nil {
		t.Errorf("same claim again: %v", err)
	}
}

func TestCDISpecAndEnv(t *testing.T) {
	uuid := "GPU-1234"
	d := testDriver(t, &device{Pool: "p", Name: "gpu-0", Type: "gpu", Index: 0,
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"uuid": {StringValue: &uuid},
			"resource.kubernetes.io/pciBusID": {StringValue: ptr.To("0000:08:00.0")}}})
	c := allocated("u1", "c", true, "gpu-0")
	pc, err := d.plan(c)
	if err != nil {
		t.Fatal(err)
	}
	s := d.spec(c.UID, pc)
	if s.Kind != "sim.example.com/device" || len(s.Devices) != 1 || s.Devices[0].Name != "u1-0-gpu-0" {
		t.Fatalf("spec %+v", s)
	}
	env := strings.Join(append(s.ContainerEdits.Env, s.Devices[0].ContainerEdits.Env...), "\n")
	for _, want := range []string{"DRAFORGE_NODE_NAME=n1", "DRAFORGE_CLAIM=ns/c", "DRAFORGE_DEVICE_COUNT=1", "DRAFORGE_DEVICE_0=gpu-0",
		"DRAFORGE_DEVICE_0_POOL=p", "DRAFORGE_DEVICE_0_TYPE=gpu", "DRAFORGE_DEVICE_0_UUID=GPU-1234", "DRAFORGE_DEVICE_0_PCI_BUS_ID=0000:08:00.0", "DRAFORGE_DEVICE_0_ADMIN_ACCESS=true"} {
		if !strings.Contains(env, want+"\n") && !strings.HasSuffix(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if err := writeCDISpec(d.cdiDir, d.name, c.UID, s); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.cdiDir, "sim.example.com-device_u1.json")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := removeCDISpec(d.cdiDir, d.name, c.UID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("spec still there: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	err := (&Config{PluginsDir: "rel", RegistryDir: "/r", CDIDir: "/c"}).validate()
	for _, want := range []string{"node name is required", `--plugins-dir must be an absolute path, got "rel"`, "--health-interval must be positive",
		"--driver-names must name at least one driver"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	if err := (&Config{NodeName: "n", PluginsDir: "/p", RegistryDir: "/r", CDIDir: "/c", HealthInterval: time.Second,
		DriverNames: []string{"sim.example.com"}}).validate(); err != nil {
		t.Error(err)
	}
}

func TestAttributeLookup(t *testing.T) {
	a := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"uuid":                {StringValue: ptr.To("own")},
		"other.example/model": {StringValue: ptr.To("qualified")},
	}
	if v := attribute(a, "uuid"); v == nil || *v.StringValue != "own" {
		t.Errorf("unqualified: %v", v)
	}
	if v := attribute(a, "model"); v == nil || *v.StringValue != "qualified" {
		t.Errorf("qualified: %v", v)
	}
	if attribute(a, "missing") != nil {
		t.Error("missing attribute found")
	}
}

// Devices of pools that do not report device status get no status.devices entry: the prepare
// and the unprepare make no request for them; a reporting pool's devices get theirs written
// and cleared. A checkpoint of a release that always wrote them (no noStatus) still clears.
func TestStatusOnlyForReportingPools(t *testing.T) {
	d := testDriver(t, &device{Pool: "p", Name: "gpu-0"}, &device{Pool: "p", Name: "nic-0", ReportsStatus: true})
	quiet, nic := allocated("a", "a", false, "gpu-0"), allocated("b", "b", false, "nic-0")
	client := fake.NewClientset(quiet, nic)
	d.claims = client.ResourceV1()
	ctx := t.Context()
	for _, c := range []*resourcev1.ResourceClaim{quiet, nic} {
		if _, err := d.prepare(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if pc := d.cp.Claims["a"]; !pc.Devices[0].NoStatus || pc.reportsStatus() {
		t.Errorf("quiet pool's claim planned %+v", pc.Devices)
	}
	writes := func() (n []string) {
		for _, a := range client.Actions() {
			if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
				n = append(n, a.GetVerb()+" "+a.(interface{ GetName() string }).GetName())
			}
		}
		client.ClearActions()
		return n
	}
	if got := writes(); strings.Join(got, ",") != "patch b" {
		t.Errorf("prepare wrote %v, want only claim b's status", got)
	}
	for _, uid := range []types.UID{"a", "b"} {
		if err := d.unprepare(ctx, kubeletplugin.NamespacedObject{NamespacedName: types.NamespacedName{Namespace: "ns", Name: string(uid)}, UID: uid}); err != nil {
			t.Fatal(err)
		}
	}
	if got := writes(); strings.Join(got, ",") != "patch b" {
		t.Errorf("unprepare wrote %v, want only claim b's status cleared", got)
	}
	old := &preparedClaim{Namespace: "ns", Name: "a", Devices: []preparedDevice{{Pool: "p", Device: "gpu-0"}}}
	if !old.reportsStatus() {
		t.Error("a checkpoint without noStatus does not clear the status it wrote")
	}
}
