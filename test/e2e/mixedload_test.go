package e2e

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestMixedLoadNoDoubleAllocation: pods with template claims (allocated by kube-scheduler) and,
// 30ms later, standalone claims (allocated by the simulator) arrive for the same 6 devices, 12
// of each. Every claim event of the run is watched: a device must never be held by two claims,
// and in the end every device must be allocated exactly once.
//
// Known defect (issue 12 item 7): the two allocators decide from their own caches, so this
// reproduces a device allocated to a pod's claim and a standalone claim at once (every device,
// in the runs so far). Letting the simulator's unused claim yield afterwards was tried and
// left two pods' claims on one device, so it was not kept. Skipped until the allocators
// coordinate: DRAFORGE_E2E_MIXED_LOAD=1 runs it (DRAFORGE_E2E_MIXED_STAGGER changes the 30ms).
func TestMixedLoadNoDoubleAllocation(t *testing.T) {
	if os.Getenv("DRAFORGE_E2E_MIXED_LOAD") == "" {
		t.Skip("known defect: kube-scheduler and the simulator allocate the same devices under mixed load; DRAFORGE_E2E_MIXED_LOAD=1 runs it")
	}
	const devices, each = 6, 12
	stagger := 30 * time.Millisecond
	if v, err := time.ParseDuration(os.Getenv("DRAFORGE_E2E_MIXED_STAGGER")); err == nil {
		stagger = v
	}
	r := newPodRig(t, devices, nil)
	e, ctx := r.e, t.Context()
	w, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	holders := map[string]map[string]bool{} // device → claims holding it
	held := map[string][]string{}           // claim → its devices
	inUse := map[string]bool{}              // claim → reserved for a pod
	var doubleUse []string
	transient := 0
	go func() {
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*resourcev1.ResourceClaim)
			if !ok {
				continue
			}
			mu.Lock()
			for _, d := range held[c.Name] {
				delete(holders[d], c.Name)
			}
			delete(held, c.Name)
			inUse[c.Name] = len(c.Status.ReservedFor) > 0
			if ev.Type != watch.Deleted && c.Status.Allocation != nil {
				for _, res := range c.Status.Allocation.Devices.Results {
					id := res.Pool + "/" + res.Device
					if holders[id] == nil {
						holders[id] = map[string]bool{}
					}
					holders[id][c.Name] = true
					held[c.Name] = append(held[c.Name], id)
					if len(holders[id]) > 1 {
						transient++
						users := 0
						for other := range holders[id] {
							if inUse[other] {
								users++
							}
						}
						if users > 1 {
							doubleUse = append(doubleUse, fmt.Sprintf("%s used by %v", id, holders[id]))
						}
					}
				}
			}
			mu.Unlock()
		}
	}()

	// Pods first, then the standalone claims while kube-scheduler is allocating theirs.
	var wg sync.WaitGroup
	for i := range each {
		wg.Go(func() {
			if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, r.gpuPod(fmt.Sprintf("worker-%d", i), nil), metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	time.Sleep(stagger)
	for i := range each {
		wg.Go(func() {
			claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("standalone-%d", i)},
				Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
					{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: r.class}}}}}}
			if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	settled := func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		allocated, shared := 0, []string{}
		for id, hs := range holders {
			if len(hs) > 0 {
				allocated++
			}
			if len(hs) > 1 {
				shared = append(shared, id)
			}
		}
		return allocated == devices && len(shared) == 0, fmt.Sprintf("%d of %d devices allocated, held twice: %v", allocated, devices, shared)
	}
	eventually(t, 60*time.Second, settled)
	time.Sleep(3 * time.Second) // a late double allocation would show here
	if ok, why := settled(); !ok {
		t.Errorf("after 3s more: %s", why)
	}
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
	if len(doubleUse) > 0 {
		t.Fatalf("devices used by two claims at once: %v", doubleUse)
	}
	t.Logf("%d pods running, %d double allocations seen", running, transient)
}
