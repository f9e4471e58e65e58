package e2eutil

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
)

// PoolSlices returns the pool's slices by node: device names and pool generation.
func (e *Env) PoolSlices(t testing.TB, ns, name string) map[string]string {
	t.Helper()
	list, err := e.Kube.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{
		LabelSelector: simdevice.LabelSDPNamespace + "=" + ns + "," + simdevice.LabelSDPName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		var devs []string
		for _, d := range s.Spec.Devices {
			devs = append(devs, d.Name)
		}
		node := ""
		if s.Spec.NodeName != nil {
			node = *s.Spec.NodeName
		} else if len(s.Spec.Devices) > 0 && s.Spec.Devices[0].NodeName != nil { // perDeviceNodeSelection
			node = *s.Spec.Devices[0].NodeName
		}
		out[node] += fmt.Sprintf("pool=%s gen=%d count=%d devices=%s", s.Spec.Pool.Name, s.Spec.Pool.Generation,
			s.Spec.Pool.ResourceSliceCount, strings.Join(devs, ","))
	}
	return out
}

// WaitPoolReady waits for Ready=True for the pool's current generation.
func (e *Env) WaitPoolReady(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var pool *unstructured.Unstructured
	Eventually(t, 30*time.Second, func() (bool, string) {
		u, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pool = u
		return ConditionIs(u, "Ready", "True"), fmt.Sprintf("pool %s/%s conditions %v", ns, name, u.Object["status"])
	})
	return pool
}

// ConditionIs reports whether u has condition typ with status for its current generation.
func ConditionIs(u *unstructured.Unstructured, typ, status string) bool {
	return Condition(u, typ)["status"] == status && currentCondition(u, typ)
}

// Condition returns the condition of type typ (nil when absent).
func Condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

func currentCondition(u *unstructured.Unstructured, typ string) bool {
	c := Condition(u, typ)
	if c == nil {
		return false
	}
	g, _, _ := unstructured.NestedInt64(c, "observedGeneration")
	return g == u.GetGeneration()
}

// DeleteDocs deletes workloads and taint rules, then claims, then pools (waiting for their
// finalizer to clean up), then the rest.
func (e *Env) DeleteDocs(t *testing.T, docs []*unstructured.Unstructured) {
	// Runs in t.Cleanup, where t.Context() is already cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	background := metav1.DeletePropagationBackground
	for _, u := range docs {
		var err error
		switch u.GetKind() {
		case "Job":
			err = e.Kube.BatchV1().Jobs(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		case "Deployment":
			err = e.Kube.AppsV1().Deployments(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		case "Pod":
			err = e.Kube.CoreV1().Pods(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		case "DeviceTaintRule":
			err = e.Kube.ResourceV1().DeviceTaintRules().Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		case "ResourceClaimTemplate":
			err = e.Kube.ResourceV1().ResourceClaimTemplates(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		case "SimulatedNodes":
			spec, derr := simnode.Decode(u)
			if derr != nil {
				err = derr
				break
			}
			for _, n := range spec.NodeNames() {
				if err = IgnoreNotFound(e.Kube.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})); err != nil {
					break
				}
			}
		}
		if IgnoreNotFound(err) != nil {
			t.Errorf("delete %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	order := []string{"ResourceClaim", "SimulatedDevicePool", "DeviceClass"}
	for _, kind := range order {
		for _, u := range docs {
			if u.GetKind() != kind {
				continue
			}
			var err error
			switch kind {
			case "ResourceClaim":
				err = e.Kube.ResourceV1().ResourceClaims(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			case "SimulatedDevicePool":
				err = e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			case "DeviceClass":
				err = e.Kube.ResourceV1().DeviceClasses().Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			}
			if IgnoreNotFound(err) != nil {
				t.Errorf("delete %s %s: %v", kind, u.GetName(), err)
			}
			if kind == "SimulatedDevicePool" {
				e.WaitPoolGone(ctx, t, u.GetNamespace(), u.GetName())
			}
		}
	}
}

// WaitPoolGone waits until the pool and every slice labelled with its name are deleted.
func (e *Env) WaitPoolGone(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	Eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if IgnoreNotFound(err) != nil || err == nil {
			return false, fmt.Sprintf("pool %s/%s still exists (%v)", ns, name, err)
		}
		left, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			LabelSelector: simdevice.LabelSDPNamespace + "=" + ns + "," + simdevice.LabelSDPName + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		return len(left.Items) == 0, fmt.Sprintf("%d slices left", len(left.Items))
	})
}
