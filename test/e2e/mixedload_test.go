package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/draforge/draforge/drivers/allocationpod"
)

// claimWatch follows every event of a namespace's claims and allocation pods: which claims hold
// which device (failing the test if two ever hold one at once) and how many writes each
// standalone claim and its allocation pod saw.
type claimWatch struct {
	mu        sync.Mutex
	holders   map[string]map[string]bool // device → claims holding it
	held      map[string][]string        // claim → its devices
	double    []string                   // devices seen held by two claims at once
	claimRVs  map[string]int             // standalone claim → events after its creation
	podEvents map[string][]string        // claim UID → events of its allocation pod(s)
	uids      map[string]string          // standalone claim name → UID
}

func watchClaims(t *testing.T, e *env, standalone func(name string) bool) *claimWatch {
	t.Helper()
	ctx := t.Context()
	cw, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := e.Kube.CoreV1().Pods(e.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: allocationpod.Label})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cw.Stop)
	t.Cleanup(pw.Stop)
	w := &claimWatch{holders: map[string]map[string]bool{}, held: map[string][]string{}, claimRVs: map[string]int{},
		podEvents: map[string][]string{}, uids: map[string]string{}}
	go func() {
		for ev := range cw.ResultChan() {
			if c, ok := ev.Object.(*resourcev1.ResourceClaim); ok {
				w.claimEvent(ev.Type, c, standalone(c.Name))
			}
		}
	}()
	go func() {
		for ev := range pw.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				w.mu.Lock()
				uid := p.Labels[allocationpod.Label]
				w.podEvents[uid] = append(w.podEvents[uid], podEventString(ev.Type, p))
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *claimWatch) claimEvent(typ watch.EventType, c *resourcev1.ResourceClaim, standalone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if standalone {
		if typ == watch.Added {
			w.uids[c.Name] = string(c.UID)
		} else {
			w.claimRVs[c.Name]++
		}
	}
	for _, d := range w.held[c.Name] {
		delete(w.holders[d], c.Name)
	}
	delete(w.held, c.Name)
	if typ == watch.Deleted || c.Status.Allocation == nil {
		return
	}
	for _, res := range c.Status.Allocation.Devices.Results {
		id := res.Pool + "/" + res.Device
		if w.holders[id] == nil {
			w.holders[id] = map[string]bool{}
		}
		w.holders[id][c.Name] = true
		w.held[c.Name] = append(w.held[c.Name], id)
		if len(w.holders[id]) > 1 {
			w.double = append(w.double, fmt.Sprintf("%s held by %v", id, sortedKeys(w.holders[id])))
		}
	}
}

// allocated returns how many devices are held and the ones held twice now.
func (w *claimWatch) allocated() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, twice := 0, []string{}
	for id, hs := range w.holders {
		if len(hs) > 0 {
			n++
		}
		if len(hs) > 1 {
			twice = append(twice, id)
		}
	}
	return n, twice
}

func (w *claimWatch) doubles() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.double)
}

// podEventString describes an allocation pod event by what changed in it.
func podEventString(typ watch.EventType, p *corev1.Pod) string {
	var what []string
	if p.Spec.NodeName != "" {
		what = append(what, "bound")
	}
	if p.Status.NominatedNodeName != "" {
		what = append(what, "nominated")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			what = append(what, "PodScheduled="+string(c.Status))
		}
	}
	if p.DeletionTimestamp != nil {
		what = append(what, "deleting")
	}
	return string(typ) + "(" + strings.Join(what, ",") + ")"
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func standaloneClaim(name, class string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}}}}}
}

// handedOver says whether a standalone claim is in the state the handoff leaves: allocated,
// reserved for nobody, without kube-scheduler's finalizer, its allocation pod gone.
func handedOver(ctx context.Context, e *env, c *resourcev1.ResourceClaim) (bool, string) {
	if c.Status.Allocation == nil {
		return false, c.Name + " not allocated"
	}
	if !allocationpod.HandedOver(c) {
		return false, fmt.Sprintf("%s reservedFor %v finalizers %v", c.Name, c.Status.ReservedFor, c.Finalizers)
	}
	_, err := e.Kube.CoreV1().Pods(c.Namespace).Get(ctx, allocationpod.Name(c), metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return false, fmt.Sprintf("%s: allocation pod still there (%v)", c.Name, err)
	}
	return true, ""
}

// TestMixedLoadNoDoubleAllocation: pods with template claims and standalone claims, 24 of each,
// compete at once for the same 12 devices (they all arrive while a blocker claim holds every
// device, then it is deleted), with the controller in its default mode (--allocator kube-scheduler) against
// the real kube-scheduler and kube-controller-manager.
// Every claim event of the run is watched: a device must never be held by two claims, not even
// for a moment. In the end every device is allocated exactly once; every standalone claim that
// got a device is allocated, reserved for nobody, without kube-scheduler's delete-protection
// finalizer and without allocation pod; every other one waits with its allocation pod, which
// goes when the claim is deleted. It also measures the writes per standalone claim.
//
// DRAFORGE_E2E_MIXED_ALLOCATOR=simulator runs the same load with --allocator simulator (two
// allocators deciding from their own caches): it fails, with devices held by a pod's claim and a
// standalone claim at once.
func TestMixedLoadNoDoubleAllocation(t *testing.T) {
	const devices, each = 12, 24
	start := time.Now()
	var args []string
	wantTried := 2 * each // workers and allocation pods
	if m := os.Getenv("DRAFORGE_E2E_MIXED_ALLOCATOR"); m != "" {
		args, wantTried = []string{"--allocator", m}, each
	}
	r := newPodRigWith(t, devices, nil, nil, args...)
	e, ctx := r.e, t.Context()
	w := watchClaims(t, e, func(name string) bool { return strings.HasPrefix(name, "standalone-") })

	// Everything arrives while a blocker claim holds every device, so kube-scheduler finds every
	// pod unschedulable; the blocker then goes and all 48 pods (24 workers, 24 allocation pods,
	// created interleaved) compete for the 12 devices at once. Created together with the
	// devices available, one kind wins every device: the first to be schedulable. (The class
	// cannot be away instead: a claim of a missing class is not shown to be DRAForge's, so it
	// gets no allocation pod.)
	blocker := standaloneClaim("blocker", r.class)
	blocker.Spec.Devices.Requests[0].Exactly.Count = devices
	if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, blocker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		c, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Get(ctx, "blocker", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(args) > 0 {
			return c.Status.Allocation != nil, "blocker not allocated"
		}
		return handedOver(ctx, e, c)
	})
	// Claim first in each pair: its allocation pod comes a moment later (the controller makes it),
	// as the pod's claim does (kube-controller-manager makes it).
	for i := range each {
		if _, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, standaloneClaim(fmt.Sprintf("standalone-%d", i), r.class), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, r.gpuPod(fmt.Sprintf("worker-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		pods, err := e.Kube.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		tried := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					tried++
				}
			}
		}
		return tried == wantTried, fmt.Sprintf("%d of %d pods tried by kube-scheduler", tried, wantTried)
	})
	rigReady := time.Now()
	if err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Delete(ctx, "blocker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// settled: every device held once, every standalone claim handed over or waiting with its
	// allocation pod.
	var handed, waiting []*resourcev1.ResourceClaim
	settled := func() (bool, string) {
		if n, twice := w.allocated(); n != devices || len(twice) > 0 {
			return false, fmt.Sprintf("%d of %d devices allocated, held twice: %v", n, devices, twice)
		}
		handed, waiting = nil, nil
		for i := range each {
			c, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Get(ctx, fmt.Sprintf("standalone-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if c.Status.Allocation == nil {
				if _, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, allocationpod.Name(c), metav1.GetOptions{}); err != nil {
					return false, fmt.Sprintf("pending %s has no allocation pod: %v", c.Name, err)
				}
				waiting = append(waiting, c)
				continue
			}
			if ok, why := handedOver(ctx, e, c); !ok {
				return false, why
			}
			handed = append(handed, c)
		}
		return true, ""
	}
	if len(args) > 0 {
		// Only the watch's verdict: the handoff's end state does not apply.
		eventually(t, 60*time.Second, func() (bool, string) {
			n, twice := w.allocated()
			return n == devices, fmt.Sprintf("%d of %d devices allocated, held twice: %v", n, devices, twice)
		})
		time.Sleep(2 * time.Second)
		if d := w.doubles(); len(d) > 0 {
			t.Fatalf("devices held by two claims at once: %v", d)
		}
		return
	}
	eventually(t, 60*time.Second, settled)
	t.Logf("settled %s after the blocker went (%s after the start)", time.Since(rigReady).Round(time.Millisecond), rigReady.Sub(start).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // a late double allocation would show here
	if ok, why := settled(); !ok {
		t.Errorf("after 2s more: %s", why)
	}
	if d := w.doubles(); len(d) > 0 {
		t.Fatalf("devices held by two claims at once: %v", d)
	}
	// Enough contention to mean something: both kinds of claim got devices (kube-scheduler
	// takes the pods in the order they were created, interleaved).
	if len(handed) == 0 || len(handed) == devices {
		t.Errorf("standalone claims got %d of %d devices: no mix of standalone and pod claims", len(handed), devices)
	}

	// Writes per standalone claim that got a device: its own events after creation and its
	// allocation pod's, without kube-scheduler's PodScheduled=False status writes while it
	// waited (one per failed attempt).
	w.mu.Lock()
	var claimWrites, podWrites []int
	fewest := ""
	for _, c := range handed {
		claimWrites = append(claimWrites, w.claimRVs[c.Name])
		var evs []string
		for _, ev := range w.podEvents[w.uids[c.Name]] {
			// kube-scheduler's verdicts while the pod waited (here: while the blocker held the devices)
			// are the cost of waiting, not of the handoff.
			if ev != "MODIFIED(PodScheduled=False)" {
				evs = append(evs, ev)
			}
		}
		podWrites = append(podWrites, len(evs))
		if fewest == "" || len(evs) < len(strings.Split(fewest, " ")) {
			fewest = strings.Join(evs, " ")
		}
	}
	w.mu.Unlock()
	t.Logf("allocation pod events of the claim with the fewest: %s", fewest)
	sort.Ints(claimWrites)
	sort.Ints(podWrites)
	t.Logf("%d standalone claims handed over, %d waiting; writes per handed-over claim: claim %v, allocation pod %v", len(handed), len(waiting), claimWrites, podWrites)
	// The handoff's writes (docs/allocator.md): claim: finalizer added and
	// allocation+reservedFor (kube-scheduler), finalizer removed (the machine) and reservedFor
	// emptied (kube-controller-manager on the pod's delete event, or the machine 3 s later); pod: created (the machine), nominatedNodeName and
	// binding (kube-scheduler), deleted with grace period 0 (the machine: one request, stored as
	// deletionTimestamp and then removal).
	if len(handed) > 0 && (claimWrites[0] != 4 || podWrites[0] != 5) {
		t.Errorf("fewest writes per handed-over claim: claim %d, pod %d; want 4 and 5", claimWrites[0], podWrites[0])
	}

	// A waiting claim deleted: its allocation pod goes too.
	deleted := time.Now()
	for _, c := range waiting {
		if err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		pods, err := e.Kube.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: allocationpod.Label})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return len(names) == 0, fmt.Sprintf("allocation pods left: %v", names)
	})
	t.Logf("allocation pods of deleted claims gone after %s", time.Since(deleted).Round(time.Millisecond))
	if d := w.doubles(); len(d) > 0 {
		t.Fatalf("devices held by two claims at once: %v", d)
	}
	t.Logf("mixed load settled in %s", time.Since(start).Round(time.Millisecond))
}
