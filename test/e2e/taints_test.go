package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDeviceTaintRules: a NoSchedule DeviceTaintRule on one of two devices makes a new claim
// take the other one; a second claim then stays pending (one device taken, one tainted) until
// the rule is deleted, and deleting it lets that claim allocate the formerly tainted device
// well before the pending state's 30 s re-check (the rule's delete event triggers the retry).
// While it is pending, `draforge explain` names the rule.
func TestDeviceTaintRules(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t)
	ctx := t.Context()
	e.ApplyFiles(t, e.Namespace, "testdata/taints.yaml")
	e.WaitPoolReady(t, e.Namespace, "taints")

	// The pool's devices as the API server has them.
	slices, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var driver, pool string
	var devices []string
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			// The simulated driver publishes its own attributes unqualified, as real drivers do.
			if a, ok := d.Attributes["scenario"]; ok && ptr.Deref(a.StringValue, "") == "e2e-taints" {
				driver, pool = s.Spec.Driver, s.Spec.Pool.Name
				devices = append(devices, d.Name)
			}
		}
	}
	if len(devices) != 2 {
		t.Fatalf("want 2 published devices of the pool, found %v", devices)
	}
	tainted, other := devices[0], devices[1]

	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + e.Namespace},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &driver, Pool: &pool, Device: &tainted},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Value: "planned", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
	if _, err := e.Kube.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = e.Kube.ResourceV1().DeviceTaintRules().Delete(t.Context(), rule.Name, metav1.DeleteOptions{})
		}
	})
	// Let the controller's informer see the rule before the claim exists (the API write and the
	// watch event are not ordered for us otherwise).
	time.Sleep(2 * time.Second)

	claim := func(name string) {
		c := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "acc", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "e2e-taints"},
			}}}},
		}
		if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	allocatedDevice := func(name string) (string, bool) {
		c, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil {
			return "", false
		}
		var devs []string
		for _, r := range c.Status.Allocation.Devices.Results {
			devs = append(devs, r.Device)
		}
		return strings.Join(devs, ","), true
	}

	claim("first")
	eventually(t, 30*time.Second, func() (bool, string) {
		_, ok := allocatedDevice("first")
		return ok, "claim first is not allocated"
	})
	if dev, _ := allocatedDevice("first"); dev != other {
		t.Fatalf("claim first got device %s; want %s (device %s is tainted NoSchedule by DeviceTaintRule %s)", dev, other, tainted, rule.Name)
	}

	claim("second")
	time.Sleep(3 * time.Second)
	if dev, ok := allocatedDevice("second"); ok {
		t.Fatalf("claim second was allocated device %s although the only free device is tainted", dev)
	}

	// explain reads the rule from the API server and names it with the field to change.
	ex := mustCLI(t, "explain", "-n", e.Namespace, "second")
	for _, want := range []string{"excluded: AlreadyAllocated=1", "Tainted=1", "or delete DeviceTaintRule " + rule.Name,
		`spec.devices.requests[0].exactly.tolerations: key "example.com/maintenance", effect NoSchedule`} {
		if !strings.Contains(ex, want) {
			t.Errorf("explain lacks %q:\n%s", want, ex)
		}
	}

	if err := e.Kube.ResourceV1().DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted = true
	start := time.Now()
	eventually(t, 15*time.Second, func() (bool, string) {
		dev, ok := allocatedDevice("second")
		return ok && dev == tainted, fmt.Sprintf("claim second: allocated=%v device=%q, want %s after the rule is deleted", ok, dev, tainted)
	})
	t.Logf("pending claim allocated %v after the DeviceTaintRule was deleted", time.Since(start).Round(100*time.Millisecond))
}
