package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNoDoubleAllocation: 200 claims created at once compete for 100 devices (50 on each of
// two nodes). Exactly 100 are allocated, no device twice, the rest stay pending, and the
// controller's allocation counter matches what the API server holds.
func TestNoDoubleAllocation(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	ctrl := startController(t)
	ctx := t.Context()
	docs := e.ApplyFiles(t, e.Namespace, "testdata/contention.yaml")
	e.WaitPoolReady(t, e.Namespace, "contention")

	const claims, devices = 200, 100
	var wg sync.WaitGroup
	for i := range claims {
		wg.Go(func() {
			c := &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%03d", i), Namespace: e.Namespace},
				Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
					Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "e2e-contention"},
				}}}},
			}
			if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	var allocated int
	var seen map[string]string
	eventually(t, 90*time.Second, func() (bool, string) {
		list, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		allocated, seen = 0, map[string]string{}
		for _, c := range list.Items {
			if c.Status.Allocation == nil {
				continue
			}
			allocated++
			for _, r := range c.Status.Allocation.Devices.Results {
				id := r.Pool + "/" + r.Device
				if other, dup := seen[id]; dup {
					t.Fatalf("device %s allocated to %s and %s", id, other, c.Name)
				}
				seen[id] = c.Name
			}
		}
		return allocated == devices, fmt.Sprintf("%d of %d claims allocated", allocated, claims)
	})
	// kube-scheduler allocates; the controller counts a claim once it took it over (removed the
	// finalizer, deleted the allocation pod), which under load trails the allocation.
	eventually(t, 60*time.Second, func() (bool, string) {
		got := ctrl.Metric(t, "draforge_controller_allocations_total")
		return got == devices, fmt.Sprintf("draforge_controller_allocations_total = %v, want %d", got, devices)
	})
	// Nothing more may be allocated once the devices are gone.
	time.Sleep(2 * time.Second)
	list, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range list.Items {
		if c.Status.Allocation != nil {
			n++
		}
	}
	if n != devices || len(seen) != devices {
		t.Fatalf("%d claims allocated on %d distinct devices, want %d", n, len(seen), devices)
	}
	if got := ctrl.Metric(t, "draforge_controller_allocations_total"); got != devices {
		t.Errorf("draforge_controller_allocations_total = %v, want %d", got, devices)
	}
	if got := ctrl.Metric(t, "draforge_controller_terminal_errors_total"); got != 0 {
		t.Errorf("terminal errors: %v", got)
	}
	if err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	e.DeleteDocs(t, docs)
}
