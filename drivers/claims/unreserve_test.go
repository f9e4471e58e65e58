package claims

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

// completeAllocation deletes the allocation pod, then drops it from reservedFor itself, keeping a
// user pod's entry: kube-controller-manager may never hear of the pod's deletion (its pod
// informer reconnecting after an outage for the pod's whole life). A write that conflicts (the
// claim changed after the pass read it) is returned for the engine to retry; the next pass's
// unreserve event drops the entry then (TestReservedForGonePod).
func TestCompleteUnreservesAllocationPod(t *testing.T) {
	for _, conflict := range []bool{false, true} {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c", UID: "claim-uid", ResourceVersion: "7"}}
		pod := allocationpod.Build(claim)
		pod.UID, pod.Spec.NodeName = "pod-uid", "node-a"
		user := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "user", UID: "user-uid"}
		claim.Status.Allocation = &resourcev1.AllocationResult{}
		claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{
			{Resource: "pods", Name: pod.Name, UID: pod.UID}, user}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(claim)
		if err != nil {
			t.Fatal(err)
		}
		kube := fake.NewClientset(claim.DeepCopy(), pod)
		updates := 0
		kube.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
			updates++
			if !conflict || updates > 1 {
				return false, nil, nil
			}
			// Another writer changed the claim between our read and our write.
			c := claim.DeepCopy()
			c.Labels = map[string]string{"changed": "yes"}
			c.ResourceVersion = "8"
			if err := kube.Tracker().Update(schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}, c, "team-a"); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "c", nil)
		})
		pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, clusterview.PodIndexers())
		if err := pods.Add(pod); err != nil {
			t.Fatal(err)
		}
		d := &Driver{kube: kube, Pods: clusterview.PodsOver(pods), writes: &engine.Writes{}, allocated: prometheus.NewCounter(prometheus.CounterOpts{Name: "allocations"})}
		err = d.complete(context.Background(), &unstructured.Unstructured{Object: u})
		if conflict != apierrors.IsConflict(err) || (!conflict && err != nil) {
			t.Fatalf("conflict=%v: complete: %v", conflict, err)
		}
		if _, err := kube.CoreV1().Pods("team-a").Get(context.Background(), pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("conflict=%v: allocation pod not deleted: %v", conflict, err)
		}
		got, err := kube.ResourceV1().ResourceClaims("team-a").Get(context.Background(), "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []resourcev1.ResourceClaimConsumerReference{user}
		if conflict { // left for the engine's retry
			want = claim.Status.ReservedFor
		}
		if !slices.Equal(got.Status.ReservedFor, want) || got.Status.Allocation == nil {
			t.Errorf("conflict=%v: reservedFor %v allocation %v, want %v, still allocated", conflict, got.Status.ReservedFor, got.Status.Allocation, want)
		}
		// The pod goes first (kube-controller-manager reserves a claim for a bound pod that uses
		// it), and the first write carries the resourceVersion the pass read.
		var verbs []string
		firstRV := ""
		for _, a := range kube.Actions() {
			switch a := a.(type) {
			case k8stesting.DeleteAction:
				verbs = append(verbs, "delete "+a.GetResource().Resource)
			case k8stesting.UpdateAction:
				verbs = append(verbs, "update "+a.GetResource().Resource)
				if firstRV == "" {
					firstRV = a.GetObject().(*resourcev1.ResourceClaim).ResourceVersion
				}
			}
		}
		if len(verbs) < 2 || verbs[0] != "delete pods" || verbs[1] != "update resourceclaims" {
			t.Errorf("conflict=%v: writes %v, want the pod's delete before the claim's update", conflict, verbs)
		}
		if firstRV != "7" {
			t.Errorf("conflict=%v: first update at resourceVersion %q, want the pass's 7", conflict, firstRV)
		}
		if updates != 1 {
			t.Errorf("conflict=%v: %d status updates, want 1", conflict, updates)
		}
		if conflict && got.Labels["changed"] != "yes" {
			t.Errorf("the other writer's change was lost: labels %v", got.Labels)
		}
	}
}

// claimReservedForGoneAllocationPod holds only for an allocated claim still reserved for its
// allocation pod once the pod is gone from the cache; unreserveAllocationPod then drops it.
func TestReservedForGonePod(t *testing.T) {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c", UID: "claim-uid", ResourceVersion: "3"}}
	pod := allocationpod.Build(claim)
	pod.UID = "pod-uid"
	claim.Status.Allocation = &resourcev1.AllocationResult{}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(claim)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: u}
	kube := fake.NewClientset(claim.DeepCopy())
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, clusterview.PodIndexers())
	d := &Driver{kube: kube, Pods: clusterview.PodsOver(pods), writes: &engine.Writes{}}
	if err := pods.Add(pod); err != nil {
		t.Fatal(err)
	}
	if f, err := d.reservedForGonePod(context.Background(), obj); err != nil || f.Holds {
		t.Errorf("pod still cached: %+v %v, want not holding", f, err)
	}
	if err := pods.Delete(pod); err != nil {
		t.Fatal(err)
	}
	if f, err := d.reservedForGonePod(context.Background(), obj); err != nil || !f.Holds {
		t.Fatalf("pod gone: %+v %v, want holding", f, err)
	}
	if err := d.unreserveGonePod(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	got, err := kube.ResourceV1().ResourceClaims("team-a").Get(context.Background(), "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ReservedFor) != 0 || got.Status.Allocation == nil {
		t.Errorf("reservedFor %v allocation %v, want none, still allocated", got.Status.ReservedFor, got.Status.Allocation)
	}
	u2, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(got)
	if f, _ := d.reservedForGonePod(context.Background(), &unstructured.Unstructured{Object: u2}); f.Holds {
		t.Errorf("after the write: %+v, want not holding", f)
	}
}
