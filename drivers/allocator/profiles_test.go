package allocator

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/simdevice"
)

// The tests below run the scheduler's structured allocator (through Allocator) on slices that
// simdevice publishes with real-driver profiles, under the real drivers' names, with the
// drivers' own DeviceClasses and claim shapes.

// realClass is a DeviceClass as the driver's chart installs it, e.g. gpu.nvidia.com:
// device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'
// (kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml).
func realClass(name, driverName, typ string) *resourcev1.DeviceClass {
	e := "device.driver == '" + driverName + "'"
	if typ != "" {
		e += " && device.attributes['" + driverName + "'].type == '" + typ + "'"
	}
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: e}}}},
	}
}

// profileCluster publishes deviceCount devices of profile on each node under driverName.
func profileCluster(t *testing.T, profile simdevice.Profile, driverName string, deviceCount int, nodes ...string) *Allocator {
	t.Helper()
	a := New(Options{})
	p := &simdevice.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "uid"},
		Spec:       simdevice.PoolSpec{DriverName: driverName, DeviceType: "gpu", DeviceCount: deviceCount, Profile: profile, TargetNodes: nodes},
	}
	publishPool(t, a, p, nodes...)
	return a
}

// publishPool defaults p and feeds a its nodes and the slices it publishes on them.
func publishPool(t *testing.T, a *Allocator, p *simdevice.Pool, nodes ...string) {
	t.Helper()
	p.Default()
	var ns []*corev1.Node
	for _, n := range nodes {
		node := newNode(n)
		a.UpsertNode(node)
		ns = append(ns, node)
	}
	slices, err := simdevice.DesiredSlices(p, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices {
		s.Spec.Pool.Generation = 1
		a.UpsertSlice(compactslice.From(s))
	}
}

func withCapacity(r resourcev1.DeviceRequest, requests map[resourcev1.QualifiedName]string) resourcev1.DeviceRequest {
	r.Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{}}
	for k, v := range requests {
		r.Exactly.Capacity.Requests[k] = resource.MustParse(v)
	}
	return r
}

func pending(t *testing.T, a *Allocator, c *resourcev1.ResourceClaim) {
	t.Helper()
	r, err := a.Allocate(context.Background(), c)
	var u *Unsatisfiable
	if !errors.As(err, &u) {
		t.Fatalf("claim %s: want it pending (Unsatisfiable), got %v %v", c.Name, devicesOf(r), err)
	}
}

// The first claim shape: capacity.requests {memory: 4Gi} against the nvidia-gpu profile.
// Real drivers publish their own capacity names unqualified and the allocator compares request
// keys as written, so the slice must say `memory`, not `gpu.nvidia.com/memory`.
func TestCapacityRequestAgainstNvidiaProfile(t *testing.T) {
	claim := func(name string) *resourcev1.ResourceClaim {
		return newClaim(name, withCapacity(exactly("gpu", "gpu.nvidia.com", 1), map[resourcev1.QualifiedName]string{"memory": "4Gi"}))
	}
	for _, drv := range []string{"gpu.nvidia.com", simdevice.DefaultDriverName} {
		a := profileCluster(t, simdevice.ProfileNvidiaGPU, drv, 1, "node-a")
		a.UpsertClass(realClass("gpu.nvidia.com", drv, "gpu"))
		r := mustAllocate(t, a, claim("memory-"+drv))
		if got := devicesOf(r); len(got) != 1 || !strings.HasSuffix(got[0], "/gpu-0") {
			t.Errorf("driver %s: allocated %v", drv, got)
		}
	}

	// The shape published before (own-domain names qualified) stays pending: proof that the
	// unqualified name is what makes the claim fit.
	a := New(Options{})
	a.UpsertNode(newNode("node-a"))
	a.UpsertClass(realClass("gpu.nvidia.com", "gpu.nvidia.com", "gpu"))
	s := newSlice("node-a", 1, func(int) attrs { return attrs{"gpu.nvidia.com/type": str("gpu")} })
	s.Spec.Driver = "gpu.nvidia.com"
	s.Spec.Devices[0].Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"gpu.nvidia.com/memory": {Value: resource.MustParse("80Gi")}}
	a.UpsertSlice(compactslice.From(s))
	pending(t, a, claim("qualified"))
}

// NVIDIA's gpu-test4 (demo/specs/quickstart/v1/gpu-test4.yaml): four MIG devices, 1g.5gb twice,
// 2g.10gb and 3g.20gb, all on one GPU (matchAttribute gpu.nvidia.com/parentUUID). On an
// A100-40GB they fill all 8 memory slices and all 98 multiprocessors of a GPU, so the claim fits
// once per GPU.
func TestMIGClaimLikeGPUTest4(t *testing.T) {
	a := profileCluster(t, simdevice.ProfileNvidiaMIGA100, "gpu.nvidia.com", 2, "node-a")
	a.UpsertClass(realClass("mig.nvidia.com", "gpu.nvidia.com", "mig"))
	profile := func(p string) string { return "device.attributes['gpu.nvidia.com'].profile == '" + p + "'" }
	test4 := func(name string) *resourcev1.ResourceClaim {
		c := newClaim(name,
			exactly("mig-1g-5gb-0", "mig.nvidia.com", 1, profile("1g.5gb")),
			exactly("mig-1g-5gb-1", "mig.nvidia.com", 1, profile("1g.5gb")),
			exactly("mig-2g-10gb", "mig.nvidia.com", 1, profile("2g.10gb")),
			exactly("mig-3g-20gb", "mig.nvidia.com", 1, profile("3g.20gb")),
		)
		c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: new(resourcev1.FullyQualifiedName("gpu.nvidia.com/parentUUID"))}}
		return c
	}
	gpus := map[string]bool{}
	for _, name := range []string{"pod-0", "pod-1"} {
		r := mustAllocate(t, a, test4(name))
		devs := devicesOf(r)
		if len(devs) != 4 {
			t.Fatalf("%s: want 4 MIG devices, got %v", name, devs)
		}
		gpu := ""
		for _, d := range devs {
			dev := d[strings.LastIndex(d, "/")+1:]
			parent := dev[:strings.Index(dev, "-mig-")]
			if gpu != "" && parent != gpu {
				t.Errorf("%s: devices on different GPUs: %v", name, devs)
			}
			gpu = parent
		}
		if gpus[gpu] {
			t.Errorf("%s: GPU %s used twice, its memory slices are all taken", name, gpu)
		}
		gpus[gpu] = true
	}
	pending(t, a, test4("pod-2")) // both GPUs are full
}

// Whole GPU and its partitions exclude each other through the shared counters (H100: both are
// published), in either order; a partition of the other GPU stays free.
func TestWholeGPUAndPartitionsAreExclusive(t *testing.T) {
	mig := func(name, profile string) *resourcev1.ResourceClaim {
		return newClaim(name, exactly("mig", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '"+profile+"'"))
	}
	whole := func(name string) *resourcev1.ResourceClaim {
		return newClaim(name, exactly("gpu", "gpu.nvidia.com", 1))
	}
	setup := func(gpus int) *Allocator {
		a := profileCluster(t, simdevice.ProfileNvidiaMIGH100, "gpu.nvidia.com", gpus, "node-a")
		a.UpsertClass(realClass("gpu.nvidia.com", "gpu.nvidia.com", "gpu"))
		a.UpsertClass(realClass("mig.nvidia.com", "gpu.nvidia.com", "mig"))
		return a
	}

	a := setup(1)
	mustAllocate(t, a, whole("whole"))
	pending(t, a, mig("small", "1g.10gb"))

	a = setup(1)
	mustAllocate(t, a, mig("small", "1g.10gb"))
	pending(t, a, whole("whole"))
	// The remaining memory slices still take partitions, up to the counters: 7g.80gb needs them all.
	mustAllocate(t, a, mig("medium", "3g.40gb"))
	pending(t, a, mig("big", "7g.80gb"))

	a = setup(2)
	mustAllocate(t, a, whole("whole"))
	r := mustAllocate(t, a, mig("small", "1g.10gb"))
	if got := devicesOf(r); !strings.Contains(got[0], "/gpu-1-mig-") {
		t.Errorf("the partition must come from the other GPU, got %v", got)
	}
}

// Capacity requests against consumable devices: the dra-example-driver NIC (bandwidth with a
// request policy) and NVIDIA GPUs with consumable memory shares.
func TestCapacityRequestsAgainstConsumableDevices(t *testing.T) {
	a := profileCluster(t, simdevice.ProfileExampleNet, "net.example.com", 1, "node-a")
	a.UpsertClass(realClass("net.example.com", "net.example.com", ""))
	bw := func(name, q string) *resourcev1.ResourceClaim {
		return newClaim(name, withCapacity(exactly("nic", "net.example.com", 1), map[resourcev1.QualifiedName]string{"ingressBandwidth": q}))
	}
	r := mustAllocate(t, a, bw("a", "60G"))
	res := r.Devices.Results[0]
	if in := res.ConsumedCapacity["ingressBandwidth"]; res.ShareID == nil || in.Cmp(resource.MustParse("60G")) != 0 {
		t.Errorf("want a share consuming 60G, got share %v consumed %v", res.ShareID, res.ConsumedCapacity)
	}
	if got := res.ConsumedCapacity["egressBandwidth"]; got.Cmp(resource.MustParse("1G")) != 0 {
		t.Errorf("unrequested capacity consumes the policy default 1G, got %v", got.String())
	}
	pending(t, a, bw("b", "60G")) // 120G > 100G
	// 150.5M rounds up to the next 1M step above the 100M minimum.
	r = mustAllocate(t, a, bw("c", "150500k"))
	if got := r.Devices.Results[0].ConsumedCapacity["ingressBandwidth"]; got.Cmp(resource.MustParse("151M")) != 0 {
		t.Errorf("want 151M consumed, got %v", got.String())
	}

	g := profileCluster(t, simdevice.ProfileNvidiaGPUShares, "gpu.nvidia.com", 1, "node-a")
	g.UpsertClass(realClass("gpu.nvidia.com", "gpu.nvidia.com", "gpu"))
	mem := func(name, q string) *resourcev1.ResourceClaim {
		return newClaim(name, withCapacity(exactly("gpu", "gpu.nvidia.com", 1), map[resourcev1.QualifiedName]string{"memory": q}))
	}
	mustAllocate(t, g, mem("a", "40Gi"))
	mustAllocate(t, g, mem("b", "36Gi"))
	pending(t, g, mem("c", "8Gi"))                                          // 84Gi > 80Gi
	mustAllocate(t, g, mem("d", "4Gi"))                                     // exactly full
	pending(t, g, newClaim("default", exactly("gpu", "gpu.nvidia.com", 1))) // default: all memory
}

// dra-example-driver partitions: the full GPU and its partitions share gpu-<i>-counters.
func TestExampleGPUPartitionsShareCounters(t *testing.T) {
	a := profileCluster(t, simdevice.ProfileExampleGPU, "gpu.example.com", 1, "node-a")
	a.UpsertClass(realClass("gpu.example.com", "gpu.example.com", ""))
	part := func(name string) *resourcev1.ResourceClaim {
		return newClaim(name, exactly("gpu", "gpu.example.com", 1, "has(device.attributes['gpu.example.com'].partition)"))
	}
	full := newClaim("full", exactly("gpu", "gpu.example.com", 1, "has(device.attributes['gpu.example.com'].full)"))
	mustAllocate(t, a, part("p0"))
	pending(t, a, full)
	for _, n := range []string{"p1", "p2", "p3"} {
		mustAllocate(t, a, part(n))
	}
	pending(t, a, part("p4"))
}
