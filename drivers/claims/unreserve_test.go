package claims

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/engine"
)

// completeAllocation deletes the allocation pod and writes nothing to the claim:
// kube-controller-manager drops the pod from reservedFor on its delete event, and the claim
// machine only after unreserveGrace (TestReservedForGonePod); writing at once raced it.
func TestCompleteDeletesAllocationPodOnly(t *testing.T) {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c", UID: "claim-uid", ResourceVersion: "7"}}
	pod := allocationpod.Build(claim)
	pod.UID, pod.Spec.NodeName = "pod-uid", "node-a"
	claim.Status.Allocation = &resourcev1.AllocationResult{}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(claim)
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset(claim.DeepCopy(), pod)
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, clusterview.PodIndexers())
	if err := pods.Add(pod); err != nil {
		t.Fatal(err)
	}
	d := &Driver{kube: kube, Pods: clusterview.PodsOver(pods), writes: &engine.Writes{}, allocated: prometheus.NewCounter(prometheus.CounterOpts{Name: "allocations"})}
	// A pass before the hand-off timed the claim (its pod cache was behind): the grace
	// restarts with the delete.
	d.gone.wait(claim.UID)
	if err := d.complete(context.Background(), &unstructured.Unstructured{Object: u}); err != nil {
		t.Fatal(err)
	}
	if _, timed := d.gone.first[claim.UID]; timed {
		t.Errorf("the claim is still timed from before the delete")
	}
	var verbs []string
	for _, a := range kube.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	if !slices.Equal(verbs, []string{"delete pods"}) {
		t.Errorf("writes %v, want only the pod's delete", verbs)
	}
	if _, err := kube.CoreV1().Pods("team-a").Get(context.Background(), pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("allocation pod not deleted: %v", err)
	}
	var m dto.Metric
	if err := d.allocated.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("allocations counted %v (%v), want 1", m.GetCounter().GetValue(), err)
	}
}

// claimReservedForGoneAllocationPod holds only for an allocated claim still reserved for its
// allocation pod unreserveGrace after a pass first found the pod gone (until then it asks for a
// recheck at the end of the grace); unreserveAllocationPod then drops the entry, keeping a user
// pod's, with one write at the pass's resourceVersion, and leaves a conflict to the engine.
func TestReservedForGonePod(t *testing.T) {
	for _, conflict := range []bool{false, true} {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c", UID: "claim-uid", ResourceVersion: "3"}}
		pod := allocationpod.Build(claim)
		pod.UID = "pod-uid"
		user := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "user", UID: "user-uid"}
		claim.Status.Allocation = &resourcev1.AllocationResult{}
		claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}, user}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(claim)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: u}
		kube := fake.NewClientset(claim.DeepCopy())
		updates := 0
		kube.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
			updates++
			if rv := a.(k8stesting.UpdateAction).GetObject().(*resourcev1.ResourceClaim).ResourceVersion; rv != "3" {
				t.Errorf("update at resourceVersion %q, want the pass's 3", rv)
			}
			if !conflict {
				return false, nil, nil
			}
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "c", nil)
		})
		pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, clusterview.PodIndexers())
		now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
		d := &Driver{kube: kube, Pods: clusterview.PodsOver(pods), writes: &engine.Writes{}}
		d.gone.now = func() time.Time { return now }
		if err := pods.Add(pod); err != nil {
			t.Fatal(err)
		}
		if f, err := d.reservedForGonePod(context.Background(), obj); err != nil || f.Holds || f.RecheckAfter != 0 {
			t.Errorf("pod still cached: %+v %v, want not holding, no recheck", f, err)
		}
		if err := pods.Delete(pod); err != nil {
			t.Fatal(err)
		}
		// Before the hand-off (kube-scheduler's finalizer on) a pod missing from the cache is
		// not a deleted one: never timed, never unreserved.
		protected := obj.DeepCopy()
		protected.SetFinalizers([]string{resourcev1.Finalizer})
		for range 2 {
			if f, err := d.reservedForGonePod(context.Background(), protected); err != nil || f.Holds || f.RecheckAfter != 0 {
				t.Errorf("finalizer on, pod not cached: %+v %v, want not holding, no recheck", f, err)
			}
			now = now.Add(unreserveGrace)
		}
		// Left to kube-controller-manager first; the recheck comes when the grace ends.
		if f, err := d.reservedForGonePod(context.Background(), obj); err != nil || f.Holds || f.RecheckAfter != unreserveGrace {
			t.Fatalf("pod just gone: %+v %v, want not holding, recheck in %s", f, err, unreserveGrace)
		}
		now = now.Add(unreserveGrace - time.Second)
		if f, _ := d.reservedForGonePod(context.Background(), obj); f.Holds || f.RecheckAfter != time.Second {
			t.Fatalf("pod gone for grace-1s: %+v, want not holding, recheck in 1s", f)
		}
		now = now.Add(time.Second)
		if f, err := d.reservedForGonePod(context.Background(), obj); err != nil || !f.Holds {
			t.Fatalf("pod gone for the grace: %+v %v, want holding", f, err)
		}
		err = d.unreserveGonePod(context.Background(), obj)
		if conflict != apierrors.IsConflict(err) || (!conflict && err != nil) {
			t.Fatalf("conflict=%v: unreserve: %v", conflict, err)
		}
		if updates != 1 {
			t.Errorf("conflict=%v: %d status updates, want 1", conflict, updates)
		}
		got, err := kube.ResourceV1().ResourceClaims("team-a").Get(context.Background(), "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []resourcev1.ResourceClaimConsumerReference{user}
		if conflict {
			want = claim.Status.ReservedFor
		}
		if !slices.Equal(got.Status.ReservedFor, want) || got.Status.Allocation == nil {
			t.Errorf("conflict=%v: reservedFor %v allocation %v, want %v, still allocated", conflict, got.Status.ReservedFor, got.Status.Allocation, want)
		}
		// Timed until the write succeeds: a conflict's retry writes at once.
		if _, timed := d.gone.first[claim.UID]; timed != conflict {
			t.Errorf("conflict=%v: claim timed %v after unreserve, want %v", conflict, timed, conflict)
		}
		if conflict {
			continue
		}
		u2, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(got)
		if f, _ := d.reservedForGonePod(context.Background(), &unstructured.Unstructured{Object: u2}); f.Holds {
			t.Errorf("after the write: %+v, want not holding", f)
		}
	}
}

// A claim's record goes when it is an hour old, so a record written back after the claim's
// deletion does not stay for the process's life.
func TestGoneSinceForgetsOldRecords(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	g := goneSince{now: func() time.Time { return now }}
	g.wait("deleted-claim")
	now = now.Add(goneForgotten + time.Second)
	if w := g.wait("other"); w != unreserveGrace {
		t.Errorf("a new claim waits %s, want %s", w, unreserveGrace)
	}
	if _, ok := g.first["deleted-claim"]; ok || len(g.first) != 1 {
		t.Errorf("records %v, want only the new claim's", g.first)
	}
}
