package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/gvr"
)

// TestIntelHealthFaultEvicts: on a pool with the intel-gpu profile, an injected overheat fault
// publishes the Intel GPU driver's taint HealthIssues-temperature.core.gpu:NoExecute and
// health=Unhealthy on the GPU a Job's pod holds; kube-controller-manager's device-taint-eviction
// controller evicts the pod, and the Job's replacement runs on the healthy GPU. A second
// category joins the same taint (HealthIssues-memory_temperature.core.gpu); a pod whose claim
// tolerates it runs there and sees its device Unhealthy in its status (the driver reports
// health); explain and doctor say what the taint means; clearing the faults removes it.
func TestIntelHealthFaultEvicts(t *testing.T) {
	r := newPodRigWith(t, 2, nil, map[string]any{"profile": "intel-gpu"})
	e, ctx, ns := r.e, t.Context(), r.e.Namespace
	// The profile names GPUs after their PCI address (index 0: bus 04, index 1: bus 14).
	names := []string{"0000-04-00-0-0xe211", "0000-14-00-0-0xe211"}
	// In the driver's own domain (attributeDomain defaults to driverName): unqualified.
	health := resourcev1.QualifiedName("health")
	waitDevice := func(name, taintKey, wantHealth string) {
		t.Helper()
		eventually(t, 60*time.Second, func() (bool, string) {
			d := r.device(t, name)
			if d == nil {
				return false, name + " not published"
			}
			var key string
			var effect resourcev1.DeviceTaintEffect
			if len(d.Taints) == 1 {
				key, effect = d.Taints[0].Key, d.Taints[0].Effect
			}
			h := ptr.Deref(d.Attributes[health].StringValue, "")
			ok := h == wantHealth && len(d.Taints) == map[bool]int{true: 1, false: 0}[taintKey != ""] &&
				(taintKey == "" || key == taintKey && effect == resourcev1.DeviceTaintEffectNoExecute)
			return ok, fmt.Sprintf("%s: taints %+v health %q, want %q:NoExecute %q", name, d.Taints, h, taintKey, wantHealth)
		})
	}

	// A one-pod Job holds a GPU.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: batchv1.JobSpec{
		BackoffLimit: ptr.To[int32](3),
		Template:     corev1.PodTemplateSpec{Spec: r.gpuPodSpec()},
	}}
	if _, err := e.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.BatchV1().Jobs(ns).Delete(context.Background(), "train", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	jobPod := func() (*corev1.Pod, string) {
		pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=train"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if ok, _ := podRunning(p); ok && p.DeletionTimestamp == nil {
				return p, ""
			}
		}
		return nil, fmt.Sprintf("%d pods of job train, none running", len(pods.Items))
	}
	var first *corev1.Pod
	eventually(t, 60*time.Second, func() (bool, string) {
		p, why := jobPod()
		first = p
		return p != nil, why
	})
	firstClaim := r.claimOf(t, first)
	faulty := firstClaim.Status.Allocation.Devices.Results[0].Device
	fi := slices.Index(names, faulty)
	if fi < 0 {
		t.Fatalf("job pod got %s, not one of %v", faulty, names)
	}
	other := names[1-fi]
	waitDevice(faulty, "", "Healthy")

	out := mustCLI(t, "inject-fault", "gpus", "-n", ns, "--device", fmt.Sprint(fi), "--node", r.node, "--mode", "overheat")
	if !strings.Contains(out, "overheat") {
		t.Errorf("inject-fault said %q", out)
	}
	waitDevice(faulty, "HealthIssues-temperature.core.gpu", "Unhealthy")

	// NoExecute: kube-controller-manager evicts the pod; the Job's replacement gets the other GPU.
	eventually(t, 90*time.Second, func() (bool, string) {
		p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("%s not evicted: phase %s deletion %v conditions %+v", p.Name, p.Status.Phase, p.DeletionTimestamp, p.Status.Conditions)
	})
	var second *corev1.Pod
	eventually(t, 90*time.Second, func() (bool, string) {
		p, why := jobPod()
		second = p
		return p != nil && p.Name != first.Name, why
	})
	if got := r.claimOf(t, second).Status.Allocation.Devices.Results[0].Device; got != other {
		t.Errorf("the Job's replacement got %s, want the healthy %s", got, other)
	}

	// A second category (inject-fault keeps one fault per device, so both go in the spec): one
	// taint naming both, sorted.
	const both = "HealthIssues-memory_temperature.core.gpu"
	patch := fmt.Sprintf(`{"spec":{"faults":[{"device":%[1]d,"node":%[2]q,"mode":"overheat"},{"device":%[1]d,"node":%[2]q,"mode":"memory-critical"}]}}`, fi, r.node)
	if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(ns).Patch(ctx, "gpus", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDevice(faulty, both, "Unhealthy")

	// A claim tolerating the taint gets the GPU; the pod stays and its status says Unhealthy.
	tolerant := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tolerant"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: r.class,
				Tolerations: []resourcev1.DeviceToleration{{Key: both, Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute}}}}}}}}}
	if _, err := e.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tolerant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tp := r.gpuPod("tolerant", nil)
	tp.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To("tolerant")
	if _, err := e.Kube.CoreV1().Pods(ns).Create(ctx, tp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resourceID := corev1.ResourceID(r.driver + "/" + firstClaim.Status.Allocation.Devices.Results[0].Pool + "/" + faulty)
	r.waitPod(t, "tolerant", 60*time.Second, func(p *corev1.Pod) (bool, string) {
		if ok, why := podRunning(p); !ok {
			return false, why
		}
		for _, cs := range p.Status.ContainerStatuses {
			for _, rs := range cs.AllocatedResourcesStatus {
				for _, h := range rs.Resources {
					if h.ResourceID == resourceID && h.Health == corev1.ResourceHealthStatusUnhealthy {
						return true, ""
					}
				}
			}
		}
		return false, fmt.Sprintf("container statuses %+v, want %s Unhealthy", p.Status.ContainerStatuses, resourceID)
	})

	// A pod without the toleration waits; explain says what the taint means, doctor warns.
	if _, err := e.Kube.CoreV1().Pods(ns).Create(ctx, r.gpuPod("third", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Kube.CoreV1().Pods(ns).Delete(ctx, "tolerant", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	r.waitPod(t, "third", 60*time.Second, unschedulableFor("cannot allocate all claims"))
	ex := runCLI(t, "explain", "-n", ns, "pod/third", "--devices")
	want := "taint " + both + "=:NoExecute (published by the driver: Intel GPU driver health: unhealthy memory (GPU memory health critical), temperature.core.gpu (GPU core temperature critical); effect NoExecute evicts the pods using the GPU) is not tolerated"
	if !strings.Contains(ex.stdout, want) {
		t.Errorf("explain lacks %q:\n%s\n%s", want, ex.stdout, ex.stderr)
	}
	rep := doctorJSON(t, ns)
	i := slices.IndexFunc(rep.Results, func(r doctorResult) bool { return r.ID == "DRA012" })
	if i < 0 || rep.Results[i].Status != "WARN" || !slices.ContainsFunc(rep.Results[i].Evidence, func(ev string) bool {
		return strings.Contains(ev, "/"+r.node+"/"+faulty+": taint "+both+"=:NoExecute: Intel GPU driver health")
	}) {
		t.Errorf("doctor DRA012: %+v", rep.Results)
	}

	// Recovery: xpumd reports the categories healthy again, the taint goes, the pod runs there.
	mustCLI(t, "clear-faults", "gpus", "-n", ns)
	waitDevice(faulty, "", "Healthy")
	p := r.waitPod(t, "third", 60*time.Second, podRunning)
	if got := r.claimOf(t, p).Status.Allocation.Devices.Results[0].Device; got != faulty {
		t.Errorf("third got %s, want the recovered %s", got, faulty)
	}
}
