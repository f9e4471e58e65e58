package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// TestMachineCUEOnly runs machines written only in CUE (testdata/cueonly, loaded with
// --machines, no Go driver) on the real API server: a timer derived from the object's
// creation and overridden by an annotation, a metadata patch from a template, an Event, and a
// related Lease applied server-side with a MicroTime renewTime and an owner reference, renewed
// by a timer on the related object's field (its changes re-enqueue the ConfigMap) (ticker);
// a finalizer added and, on deletion, removed by the generic finalizer actions (latch); a
// Node's Ready heartbeat merged into its conditions (beacon). A --machines directory replaces
// the embedded machines and must declare every one the controller runs, so the directory is
// the CUE-only machines beside copies of machines/*.cue.
func TestMachineCUEOnly(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	dir := t.TempDir()
	for _, src := range []string{filepath.Join(repoRoot(), "machines"), filepath.Join(repoRoot(), "test", "e2e", "testdata", "cueonly")} {
		files, _ := filepath.Glob(filepath.Join(src, "*.cue"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	startController(t, "--machines", dir)
	ctx := t.Context()
	cms := e.Kube.CoreV1().ConfigMaps(e.Namespace)
	mk := func(name string, labelled bool) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{"e2e.draforge.oaslananka/delay": "3s"}}}
		if labelled {
			cm.Labels = map[string]string{"e2e.draforge.oaslananka/ticker": "true"}
		}
		out, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	created := time.Now()
	cm := mk("tick", true)
	other := mk("not-selected", false)

	// Not before the annotation's 3s (the 1h default would never fire in this test).
	time.Sleep(time.Second)
	if got, _ := cms.Get(ctx, cm.Name, metav1.GetOptions{}); got.Annotations["e2e.draforge.oaslananka/ticked-at"] != "" {
		t.Fatalf("ticked after 1s, before its 3s timer: %v", got.Annotations)
	}
	var tickedAt time.Time
	eventually(t, 20*time.Second, func() (bool, string) {
		got, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		at := got.Annotations["e2e.draforge.oaslananka/ticked-at"]
		tickedAt, _ = time.Parse(time.RFC3339, at)
		return at != "", fmt.Sprintf("annotations %v", got.Annotations)
	})
	// creationTimestamp has second precision: the timer is due 3s after it, so at least 2s
	// after our own clock read before the create.
	if d := tickedAt.Sub(created.Truncate(time.Second)); d < 2*time.Second {
		t.Errorf("ticked %s after creation, want >= 3s", d)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		evs, err := e.Kube.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=tick,reason=Ticked"})
		if err != nil || len(evs.Items) == 0 {
			return false, fmt.Sprintf("no Ticked event (%v)", err)
		}
		return evs.Items[0].Message == "tick ticked after 3s", "event message " + evs.Items[0].Message
	})

	// The Lease is applied with the kubelet's shape and renewed by the related-field timer.
	leases := e.Kube.CoordinationV1().Leases(e.Namespace)
	var first time.Time
	eventually(t, 10*time.Second, func() (bool, string) {
		l, err := leases.Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "tick" && l.Spec.LeaseDurationSeconds != nil &&
			*l.Spec.LeaseDurationSeconds == 40 && l.Spec.RenewTime != nil && len(l.OwnerReferences) == 1 &&
			l.OwnerReferences[0].UID == cm.UID && l.ManagedFields[0].Manager == "draforge"
		if ok {
			first = l.Spec.RenewTime.Time
		}
		return ok, fmt.Sprintf("lease %+v %+v", l.ObjectMeta.OwnerReferences, l.Spec)
	})
	eventually(t, 10*time.Second, func() (bool, string) {
		l, err := leases.Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		d := l.Spec.RenewTime.Sub(first)
		return d >= 1500*time.Millisecond, fmt.Sprintf("renewTime moved %s since %s", d, first.Format(time.RFC3339Nano))
	})
	// A deleted Lease is re-applied: its deletion re-enqueues the owner.
	if err := leases.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := leases.Get(ctx, cm.Name, metav1.GetOptions{})
		return err == nil, fmt.Sprintf("lease after delete: %v", err)
	})

	// The expire annotation makes the machine delete the ConfigMap.
	if _, err := cms.Patch(ctx, cm.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"e2e.draforge.oaslananka/expire":"now"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("after expire: %v", err)
	})

	// The latch machine adds its finalizer with the generic action, and when the ConfigMap is
	// deleted removes it with the generic `finalizer: remove` (nothing else would: the
	// ConfigMap would stay Terminating forever).
	const latchFinalizer = "e2e.draforge.oaslananka/latch"
	latch, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "latch",
		Labels: map[string]string{"e2e.draforge.oaslananka/latch": "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		got, err := cms.Get(ctx, latch.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got.Finalizers, []string{latchFinalizer}) && got.Annotations["e2e.draforge.oaslananka/latched"] == "true",
			fmt.Sprintf("finalizers %v, annotations %v", got.Finalizers, got.Annotations)
	})
	if err := cms.Delete(ctx, latch.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		got, err := cms.Get(ctx, latch.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("still there: deletionTimestamp %v, finalizers %v", got.DeletionTimestamp, got.Finalizers)
	})

	// The beacon machine patches a Node's status (a resource the drivers cache typed and
	// pruned) with a template: Ready's heartbeat advances, the other conditions stay.
	nodes := e.Kube.CoreV1().Nodes()
	node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "beacon-" + e.Namespace,
		Labels: map[string]string{"e2e.draforge.oaslananka/beacon": "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	// The machine may already have written Ready: add MemoryPressure beside it.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse,
			Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var beats []time.Time
	eventually(t, 15*time.Second, func() (bool, string) {
		n, err := nodes.Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var ready, memory *corev1.NodeCondition
		for i, c := range n.Status.Conditions {
			switch c.Type {
			case corev1.NodeReady:
				ready = &n.Status.Conditions[i]
			case corev1.NodeMemoryPressure:
				memory = &n.Status.Conditions[i]
			}
		}
		if ready == nil || memory == nil || ready.Status != corev1.ConditionTrue || ready.Reason != "KubeletReady" {
			return false, fmt.Sprintf("conditions %+v", n.Status.Conditions)
		}
		if len(beats) == 0 || !ready.LastHeartbeatTime.Time.Equal(beats[len(beats)-1]) {
			beats = append(beats, ready.LastHeartbeatTime.Time)
		}
		return len(beats) >= 3, fmt.Sprintf("heartbeats seen %v", beats)
	})
	if d := beats[2].Sub(beats[1]); d < time.Second || d > 6*time.Second {
		t.Errorf("heartbeat interval %s, want about 2s", d)
	}

	// The selector keeps the machine off unlabelled ConfigMaps.
	got, err := cms.Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, other.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) || got.Annotations["e2e.draforge.oaslananka/ticked-at"] != "" {
		t.Errorf("unselected ConfigMap was worked on: %v, lease %v", got.Annotations, err)
	}
}
