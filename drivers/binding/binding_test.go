package binding

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/engine"
)

const drv = simdevice.DefaultDriverName

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPool() *simdevice.Pool {
	return pooltest.Pool("ns", "p", "", simdevice.PoolSpec{
		TargetNodes: []string{"node-a", "node-b"},
		DeviceGroups: []simdevice.DeviceGroup{
			{DeviceType: "gpu", Count: 2, Partitions: 2, BindingConditions: []string{"ready", "attached"},
				BindingFailureConditions: []string{"failed"}, BindingDelaySeconds: 5},
			{DeviceType: "nic", Count: 1},
		},
		Faults: []simdevice.Fault{{Device: intstr.FromString("gpu-1"), Node: "node-a", Mode: simdevice.FaultBindingFailure}},
	})
}

func TestIndex(t *testing.T) {
	l := Index([]*simdevice.Pool{testPool()})
	if d, ok := l(drv, "ns/p/node-a", "gpu-1-part-0"); !ok || !d.Fail || d.Delay != 5*time.Second {
		t.Errorf("gpu-1-part-0 on node-a: %+v %v, want a failing device with a 5s delay", d, ok)
	}
	if d, ok := l(drv, "ns/p/node-b", "gpu-1"); !ok || d.Fail {
		t.Errorf("the fault names node-a only: %+v %v", d, ok)
	}
	for _, c := range [][3]string{{drv, "ns/p/node-a", "nic-0"}, {"other", "ns/p/node-a", "gpu-0"}, {drv, "ns/q/node-a", "gpu-0"}, {drv, "ns/p/node-a", "gpu-2"}} {
		if _, ok := l(c[0], c[1], c[2]); ok {
			t.Errorf("%v is not a simulated device with binding conditions", c)
		}
	}
}

func allocated(device string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 1},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
			AllocationTimestamp: &metav1.Time{Time: t0},
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "r", Driver: drv, Pool: "ns/p/node-a", Device: device,
					BindingConditions: []string{"ready", "attached"}, BindingFailureConditions: []string{"failed"}},
				{Request: "n", Driver: drv, Pool: "ns/p/node-a", Device: "nic-0"},
			}},
		}},
	}
}

func TestStatusAfterDelayAndVerdict(t *testing.T) {
	l := Index([]*simdevice.Pool{testPool()})
	c := allocated("gpu-0")
	if _, changed, wait := Status(c, l, t0.Add(2*time.Second)); changed || wait != 3*time.Second {
		t.Fatalf("before the delay: changed %v wait %v, want nothing and 3s", changed, wait)
	}
	if ready, err := Verdict(c, DefaultTimeout, t0.Add(2*time.Second)); ready || err != nil {
		t.Fatalf("no status yet: ready %v err %v", ready, err)
	}
	devs, changed, wait := Status(c, l, t0.Add(5*time.Second))
	if !changed || wait != 0 || len(devs) != 1 || len(devs[0].Conditions) != 2 || devs[0].Device != "gpu-0" {
		t.Fatalf("after the delay: %+v changed %v wait %v", devs, changed, wait)
	}
	c.Status.Devices = devs
	if ready, err := Verdict(c, DefaultTimeout, t0.Add(time.Hour)); !ready || err != nil {
		t.Fatalf("all conditions True: ready %v err %v", ready, err)
	}
	if _, changed, _ := Status(c, l, t0.Add(6*time.Second)); changed {
		t.Fatal("written conditions are not written again")
	}
}

func TestStatusFailureAndTimeout(t *testing.T) {
	l := Index([]*simdevice.Pool{testPool()})
	c := allocated("gpu-1-part-1")
	devs, changed, _ := Status(c, l, t0.Add(5*time.Second))
	if !changed || len(devs[0].Conditions) != 1 || devs[0].Conditions[0].Type != "failed" {
		t.Fatalf("binding-failure fault: %+v", devs)
	}
	c.Status.Devices = devs
	if _, err := Verdict(c, DefaultTimeout, t0.Add(5*time.Second)); !errors.Is(err, ErrFailed) {
		t.Fatalf("want ErrFailed, got %v", err)
	}
	// Nobody writes conditions (e.g. a real driver that is down): timeout after 600s.
	c = allocated("gpu-0")
	if _, err := Verdict(c, DefaultTimeout, t0.Add(DefaultTimeout)); err != nil {
		t.Fatalf("at the timeout exactly: %v", err)
	}
	if _, err := Verdict(c, DefaultTimeout, t0.Add(DefaultTimeout+time.Second)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
}

func TestActionsWriteStatusAndDeallocate(t *testing.T) {
	c := allocated("gpu-1")
	kube := fake.NewClientset(c)
	pools := clusterview.NewPools()
	d := New(kube, pools)
	d.now = func() time.Time { return t0.Add(10 * time.Second) }
	pools.Upsert(toUnstructured(t, testPool()))
	obj := toUnstructured(t, c)
	if f, _ := d.awaits(context.Background(), obj); !f.Holds {
		t.Fatal("claim should await binding conditions")
	}
	if err := d.set(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	got, _ := kube.ResourceV1().ResourceClaims("ns").Get(context.Background(), "c", metav1.GetOptions{})
	if len(got.Status.Devices) != 1 || got.Status.Devices[0].Conditions[0].Type != "failed" {
		t.Fatalf("status.devices %+v", got.Status.Devices)
	}
	failedDevices := got.Status.Devices
	obj = toUnstructured(t, got)
	// A claim holding a device DRAForge does not publish is never deallocated by it.
	published := false
	d.Published = func(*resourcev1.AllocationResult) bool { return published }
	if f, _ := d.failed(context.Background(), obj); f.Holds || !strings.Contains(f.Message, "does not publish") {
		t.Fatalf("a failed claim with another driver's device must be left alone, got %+v", f)
	}
	published = true
	if f, _ := d.failed(context.Background(), obj); !f.Holds {
		t.Fatal("a failed claim the simulator allocated should be deallocated")
	}
	if err := d.deallocate(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	got, _ = kube.ResourceV1().ResourceClaims("ns").Get(context.Background(), "c", metav1.GetOptions{})
	if got.Status.Allocation != nil || got.Status.Devices != nil {
		t.Fatalf("not deallocated: %+v", got.Status)
	}
	// Not yet due: Pending, nothing written.
	d.now = func() time.Time { return t0.Add(time.Second) }
	err := d.set(context.Background(), toUnstructured(t, allocated("gpu-0")))
	var pending *engine.PendingError
	if !errors.As(err, &pending) || pending.RequeueAfter != 4*time.Second {
		t.Fatalf("want Pending for the 4s left of the delay, got %v", err)
	}
	// Reserved for a pod: kube-scheduler's decision, not ours.
	c = allocated("gpu-1")
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
	c.Status.Devices = failedDevices
	if f, _ := d.failed(context.Background(), toUnstructured(t, c)); f.Holds {
		t.Fatal("a claim in use is left to kube-scheduler")
	}
	c.Status.ReservedFor = nil
	if f, _ := d.failed(context.Background(), toUnstructured(t, c)); !f.Holds {
		t.Fatal("the same claim unreserved is deallocated")
	}
}

func toUnstructured(t *testing.T, o any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	if _, ok := o.(*simdevice.Pool); ok {
		u.SetAPIVersion(simdevice.Group + "/" + simdevice.Version)
		u.SetKind(simdevice.Kind)
	} else {
		u.SetAPIVersion("resource.k8s.io/v1")
		u.SetKind("ResourceClaim")
	}
	return u
}
