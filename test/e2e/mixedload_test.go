package e2e

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestMixedLoadNoDoubleAllocation: standalone claims (allocated by the simulator) and pods'
// template claims (allocated by kube-scheduler) arrive together for the same 6 devices, 12
// of each. Every claim event of the run is watched: at no point do two allocated claims hold
// the same device, and in the end every device is allocated exactly once.
func TestMixedLoadNoDoubleAllocation(t *testing.T) {
	// Known defect (issue 12 item 7): kube-scheduler and the claim machine allocate from
	// separate caches, so claims arriving together get the same devices from both (seen: every
	// device held twice). Run with DRAFORGE_E2E_MIXED_LOAD=1 until the allocators coordinate.
	if os.Getenv("DRAFORGE_E2E_MIXED_LOAD") == "" {
		t.Skip("known defect: simulator and kube-scheduler allocate the same devices under mixed load; set DRAFORGE_E2E_MIXED_LOAD=1 to run")
	}
	const devices, each = 6, 12
	r := newPodRig(t, devices, nil)
	e, ctx := r.e, t.Context()
	w, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	holder := map[string]string{} // device → claim holding it
	held := map[string][]string{} // claim → its devices
	var conflicts []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*resourcev1.ResourceClaim)
			if !ok {
				continue
			}
			mu.Lock()
			for _, d := range held[c.Name] {
				delete(holder, d)
			}
			delete(held, c.Name)
			if ev.Type != watch.Deleted && c.Status.Allocation != nil {
				for _, res := range c.Status.Allocation.Devices.Results {
					id := res.Pool + "/" + res.Device
					if other, ok := holder[id]; ok && other != c.Name {
						conflicts = append(conflicts, fmt.Sprintf("%s held by %s and %s", id, other, c.Name))
					}
					holder[id] = c.Name
					held[c.Name] = append(held[c.Name], id)
				}
			}
			mu.Unlock()
		}
	}()

	var wg sync.WaitGroup
	for i := range each {
		wg.Go(func() {
			claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("standalone-%d", i)},
				Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
					{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: r.class}}}}}}
			if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, r.gpuPod(fmt.Sprintf("worker-%d", i), nil), metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Every device ends up allocated, once; the rest of the demand waits.
	eventually(t, 60*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(holder) == devices, fmt.Sprintf("%d of %d devices allocated", len(holder), devices)
	})
	time.Sleep(3 * time.Second) // late allocations would show here
	pods, err := e.Kube.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for i := range pods.Items {
		if ok, _ := podRunning(&pods.Items[i]); ok {
			running++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conflicts) > 0 {
		t.Fatalf("devices allocated twice: %v", conflicts)
	}
	if len(holder) != devices {
		t.Errorf("%d devices allocated, want %d", len(holder), devices)
	}
	t.Logf("%d pods running, %d standalone claims allocated", running, len(held)-running)
	_ = corev1.PodRunning
}
