package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/gvr"
)

// podRig is one simulated node carrying a SimulatedDevicePool of its own driver (so the
// DeviceClass selects only this test's devices), the class and a one-GPU claim template.
type podRig struct {
	e       *env
	ctrl    *controller
	prefix  string
	node    string
	driver  string
	class   string
	devices int
}

func newPodRig(t *testing.T, devices int, classExtra func(*resourcev1.DeviceClass)) *podRig {
	t.Helper()
	return newPodRigWith(t, devices, classExtra, nil)
}

// newPodRigWith is newPodRig with extra fields of the pool's spec and extra controller flags.
func newPodRigWith(t *testing.T, devices int, classExtra func(*resourcev1.DeviceClass), poolExtra map[string]any, ctrlArgs ...string) *podRig {
	t.Helper()
	e := newEnv(t)
	installCRDs(t, e)
	ctx := t.Context()
	r := &podRig{e: e, prefix: "pod-" + rand.String(5), devices: devices}
	r.node, r.driver, r.class = r.prefix+"-0", r.prefix+".sim.draforge.test", r.prefix+"-gpu"
	r.ctrl = startController(t, ctrlArgs...)
	out := mustCLI(t, "nodes", "apply", "--prefix", r.prefix, "--count", "1", "-l", "draforge.test/pool="+r.prefix)
	if !strings.Contains(out, "1 simulated nodes applied") {
		t.Fatalf("nodes apply said %q", out)
	}
	t.Cleanup(func() {
		// The node goes before the namespace: remove the pods first (at once, as nothing will
		// complete their deletion on a deleted node), so the namespace does not linger.
		zero := int64(0)
		_ = e.Kube.CoreV1().Pods(e.Namespace).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = e.Kube.CoreV1().Nodes().Delete(context.Background(), r.node, metav1.DeleteOptions{})
	})
	spec := map[string]any{
		"driverName": r.driver, "deviceType": "gpu", "deviceCount": int64(devices),
		"nodeSelector": map[string]any{"draforge.test/pool": r.prefix},
	}
	maps.Copy(spec, poolExtra)
	for k, v := range poolExtra {
		if v == nil { // a nil value removes the default
			delete(spec, k)
		}
	}
	pool := newPool(e.Namespace, "gpus", spec)
	e.Apply(t, e.Namespace, pool)
	e.WaitPoolReady(t, e.Namespace, "gpus")
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: r.class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", r.driver)}}}}}
	if classExtra != nil {
		classExtra(class)
	}
	if _, err := e.Kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.ResourceV1().DeviceClasses().Delete(context.Background(), r.class, metav1.DeleteOptions{})
	})
	tpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: r.class}}}}}}}
	if _, err := e.Kube.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(ctx, tpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		_, err := e.Kube.CoreV1().ServiceAccounts(e.Namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return r
}

// gpuPod is a pod on the rig's node holding one GPU from the template.
func (r *podRig) gpuPod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       r.gpuPodSpec(),
	}
}

func (r *podRig) gpuPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector:   map[string]string{"draforge.test/pool": r.prefix},
		RestartPolicy:  corev1.RestartPolicyNever,
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
		Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
	}
}

// device returns the device published under name on the rig's node, nil when there is none.
func (r *podRig) device(t *testing.T, name string) *resourcev1.Device {
	t.Helper()
	sl, err := r.e.Kube.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sl.Items {
		if s.Spec.Driver != r.driver || ptr.Deref(s.Spec.NodeName, "") != r.node {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == name {
				return &s.Spec.Devices[i]
			}
		}
	}
	return nil
}

func (r *podRig) waitPod(t *testing.T, name string, timeout time.Duration, ok func(*corev1.Pod) (bool, string)) *corev1.Pod {
	t.Helper()
	return r.e.waitPod(t, name, timeout, ok)
}

// waitPod waits until the pod name of the test's namespace satisfies ok and returns it.
func (e *env) waitPod(t *testing.T, name string, timeout time.Duration, ok func(*corev1.Pod) (bool, string)) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, timeout, func() (bool, string) {
		var err error
		p, err = e.Kube.CoreV1().Pods(e.Namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ok(p)
	})
	return p
}

// unschedulableFor is a waitPod condition: kube-scheduler left the pod pending and unbound, its
// PodScheduled condition False with a message containing why.
func unschedulableFor(why string) func(*corev1.Pod) (bool, string) {
	return func(p *corev1.Pod) (bool, string) {
		said := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, why)
		})
		return said && p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending,
			fmt.Sprintf("%s: node %q phase %s conditions %+v, want unschedulable: %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, why)
	}
}

func podRunning(p *corev1.Pod) (bool, string) {
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	return p.Status.Phase == corev1.PodRunning && ready, fmt.Sprintf("pod %s phase %q node %q conditions %+v", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
}

// claimOf returns the pod's generated claim for the pod claim "gpu".
func (r *podRig) claimOf(t *testing.T, p *corev1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.Name == "gpu" && st.ResourceClaimName != nil {
			c, err := r.e.Kube.ResourceV1().ResourceClaims(r.e.Namespace).Get(t.Context(), *st.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	t.Fatalf("pod %s has no generated claim: %+v", p.Name, p.Status.ResourceClaimStatuses)
	return nil
}

// waitClaimGone waits for kube-controller-manager to delete a generated claim.
func (r *podRig) waitClaimGone(t *testing.T, name string) {
	t.Helper()
	eventually(t, 60*time.Second, func() (bool, string) {
		c, err := r.e.Kube.ResourceV1().ResourceClaims(r.e.Namespace).Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("claim %s still there: reservedFor %v, deletion %v", name, c.Status.ReservedFor, c.DeletionTimestamp)
	})
}

// TestPodLifecycle runs a pod with a templated GPU claim through the simulated kubelet against
// the real kube-scheduler and kube-controller-manager:
//   - the scheduler allocates and binds, the pod machine prepares the claim (the pool sets
//     deviceStatus, so status.devices: the device, Ready=True; without it, as for most drivers,
//     none, see TestExtendedResourcePod) and the pod turns Running and Ready with podIP, hostIP,
//     startTime, a running container and allocatedResourcesStatus naming the device Healthy;
//   - an unhealthy fault on that device (a NoSchedule taint) turns its health Unhealthy in the
//     pod status, the pod keeps running;
//   - deleting the pod unprepares it and completes the removal; kube-controller-manager
//     deletes the generated claim and the device is allocatable again (a second pod gets it);
//   - a Job whose pod runs 2s with the run-for annotation completes and frees its device; a
//     pod with exit code 3 fails with a terminated container of that exit code.
func TestPodLifecycle(t *testing.T) {
	r := newPodRigWith(t, 1, nil, map[string]any{"deviceStatus": true})
	e, ctx := r.e, t.Context()
	// The pod's claim is generated from its template: kube-scheduler allocates it and
	// kube-controller-manager frees it, so the claim machine never passes over it.
	claimPasses := func() float64 {
		return r.ctrl.Metric(t, "draforge_controller_sync_attempts_total", `pipeline="claim"`)
	}
	// The metric counts every claim: wait until earlier tests' claims (their namespaces being
	// deleted) are gone, so the window below sees only this test's.
	eventually(t, 2*time.Minute, func() (bool, string) {
		l, err := e.Kube.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var others []string
		for _, c := range l.Items {
			if c.Namespace != e.Namespace {
				others = append(others, c.Namespace+"/"+c.Name)
			}
		}
		return len(others) == 0, fmt.Sprint("claims of other tests still there: ", others)
	})
	passesBefore := claimPasses()
	created := time.Now()
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, r.gpuPod("runner", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := r.waitPod(t, "runner", 60*time.Second, podRunning)
	t.Logf("pod Running %v after its creation", time.Since(created).Round(time.Millisecond))
	if p.Spec.NodeName != r.node || p.Status.PodIP == "" || p.Status.HostIP == "" || p.Status.StartTime == nil {
		t.Errorf("running pod: node %q podIP %q hostIP %q startTime %v", p.Spec.NodeName, p.Status.PodIP, p.Status.HostIP, p.Status.StartTime)
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodReadyToStartContainers} {
		found := false
		for _, c := range p.Status.Conditions {
			found = found || c.Type == typ && c.Status == corev1.ConditionTrue
		}
		if !found {
			t.Errorf("condition %s not True: %+v", typ, p.Status.Conditions)
		}
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil || !p.Status.ContainerStatuses[0].Ready {
		t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
	}
	claim := r.claimOf(t, p)
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s allocation %+v", claim.Name, claim.Status.Allocation)
	}
	res := claim.Status.Allocation.Devices.Results[0]
	if len(claim.Status.Devices) != 1 || claim.Status.Devices[0].Device != res.Device || claim.Status.Devices[0].Driver != r.driver ||
		len(claim.Status.Devices[0].Conditions) != 1 || claim.Status.Devices[0].Conditions[0].Type != "Ready" {
		t.Errorf("claim status.devices %+v", claim.Status.Devices)
	}
	resourceID := corev1.ResourceID(r.driver + "/" + res.Pool + "/" + res.Device)
	health := func(p *corev1.Pod) corev1.ResourceHealthStatus {
		for _, cs := range p.Status.ContainerStatuses {
			for _, rs := range cs.AllocatedResourcesStatus {
				for _, h := range rs.Resources {
					if rs.Name == "claim:gpu" && h.ResourceID == resourceID {
						return h.Health
					}
				}
			}
		}
		return ""
	}
	if h := health(p); h != corev1.ResourceHealthStatusHealthy {
		t.Errorf("device %s health %q, want Healthy: %+v", resourceID, h, p.Status.ContainerStatuses[0].AllocatedResourcesStatus)
	}

	// An unhealthy device shows in the pod status; NoSchedule does not evict.
	pool, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Get(ctx, "gpus", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool.Object["spec"].(map[string]any)["faults"] = []any{map[string]any{"device": res.Device, "mode": "unhealthy"}}
	if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Update(ctx, pool, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = r.waitPod(t, "runner", 60*time.Second, func(p *corev1.Pod) (bool, string) {
		return health(p) == corev1.ResourceHealthStatusUnhealthy, fmt.Sprintf("health %q", health(p))
	})
	if ok, why := podRunning(p); !ok {
		t.Errorf("after the fault: %s", why)
	}
	pool, err = e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Get(ctx, "gpus", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(pool.Object["spec"].(map[string]any), "faults")
	if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Update(ctx, pool, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Deletion: unprepared, removed, claim freed and deleted by kube-controller-manager.
	if err := e.Kube.CoreV1().Pods(e.Namespace).Delete(ctx, "runner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, "runner", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint("pod runner still there: ", err)
	})
	r.waitClaimGone(t, claim.Name)
	if n := claimPasses() - passesBefore; n != 0 {
		t.Errorf("the claim machine passed %v times over claims while a pod ran with a generated claim, want 0", n)
	}

	// The device is free again: a Job's pod gets it, runs 2s and completes; its claim goes.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: batchv1.JobSpec{
		BackoffLimit: ptr.To[int32](0),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"draforge.oaslananka/run-for": "2s"}},
			Spec:       r.gpuPodSpec(),
		}}}
	if _, err := e.Kube.BatchV1().Jobs(e.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var jobClaim string
	eventually(t, 90*time.Second, func() (bool, string) {
		j, err := e.Kube.BatchV1().Jobs(e.Namespace).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods, _ := e.Kube.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
		for _, p := range pods.Items {
			for _, st := range p.Status.ResourceClaimStatuses {
				if st.ResourceClaimName != nil {
					jobClaim = *st.ResourceClaimName
				}
			}
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("job status %+v", j.Status)
	})
	pods, err := e.Kube.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("job pods %v %v", pods, err)
	}
	jp := pods.Items[0]
	if jp.Status.Phase != corev1.PodSucceeded || len(jp.Status.ContainerStatuses) != 1 || jp.Status.ContainerStatuses[0].State.Terminated == nil ||
		jp.Status.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("job pod phase %s containers %+v", jp.Status.Phase, jp.Status.ContainerStatuses)
	}
	if jobClaim == "" {
		t.Fatal("the job's pod never had a generated claim")
	}
	r.waitClaimGone(t, jobClaim)

	// A non-zero exit code fails the pod.
	failing := r.gpuPod("failing", map[string]string{"draforge.oaslananka/run-for": "1s", "draforge.oaslananka/exit-code": "3"})
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, failing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = r.waitPod(t, "failing", 60*time.Second, func(p *corev1.Pod) (bool, string) {
		return p.Status.Phase == corev1.PodFailed, fmt.Sprintf("phase %q", p.Status.Phase)
	})
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil || p.Status.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Errorf("failed pod containers %+v", p.Status.ContainerStatuses)
	}
	// The simulated kubelet records no engine "Transition" Events on pods (a kubelet never
	// does; the pod went pending -> running -> failed): kube-scheduler's Scheduled Event is
	// there, none of ours.
	eventually(t, 30*time.Second, func() (bool, string) {
		evs, err := e.Kube.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=failing"})
		if err != nil {
			return false, err.Error()
		}
		var reasons []string
		scheduled := false
		for _, ev := range evs.Items {
			reasons = append(reasons, ev.Reason)
			scheduled = scheduled || ev.Reason == "Scheduled"
			if ev.Reason == "Transition" {
				t.Fatalf("pod event %s %q from %s: the pod machine records no transitions", ev.Reason, ev.Message, ev.Source.Component)
			}
		}
		return scheduled, fmt.Sprintf("pod events %v, want Scheduled", reasons)
	})
	time.Sleep(2 * time.Second) // the controller's Events are sent asynchronously
	evs, err := e.Kube.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=failing,reason=Transition"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 0 {
		t.Errorf("%d Transition Events on pod failing, want none: %+v", len(evs.Items), evs.Items[0])
	}
}

// TestPodWithBindingConditions: a pod's generated claim gets a device with binding conditions;
// kube-scheduler waits in PreBind until the simulated driver sets them, which the claim machine
// does for such claims although it leaves other generated claims alone (selector.when), so
// the pod binds and runs.
func TestPodWithBindingConditions(t *testing.T) {
	r := newPodRigWith(t, 1, nil, map[string]any{"deviceType": nil, "deviceCount": nil,
		"deviceGroups": []any{map[string]any{"deviceType": "gpu", "count": int64(1),
			"bindingConditions": []any{"draforge.test/attached"}, "bindingFailureConditions": []any{"draforge.test/attach-failed"},
			"bindingDelaySeconds": int64(1)}}})
	e, ctx := r.e, t.Context()
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, r.gpuPod("bound", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := r.waitPod(t, "bound", 90*time.Second, podRunning)
	claim := r.claimOf(t, p)
	res := claim.Status.Allocation.Devices.Results
	if len(res) != 1 || !slices.Equal(res[0].BindingConditions, []string{"draforge.test/attached"}) {
		t.Fatalf("allocation results %+v, want one device with binding condition draforge.test/attached", res)
	}
	attached := false
	for _, d := range claim.Status.Devices {
		for _, c := range d.Conditions {
			attached = attached || d.Device == res[0].Device && c.Type == "draforge.test/attached" && c.Status == metav1.ConditionTrue
		}
	}
	if !attached {
		t.Errorf("claim status.devices %+v: binding condition not True", claim.Status.Devices)
	}
}

// TestPodDeviceFaults: faults reach workloads through the upstream controllers.
//   - a DeviceTaintRule putting a NoExecute taint on the device a running pod holds makes
//     kube-controller-manager's device-taint-eviction controller evict the pod; the simulated
//     kubelet completes the removal and the claim is deleted;
//   - with every device tainted NoSchedule, a new pod stays Pending with the scheduler's reason.
func TestPodDeviceFaults(t *testing.T) {
	r := newPodRig(t, 2, nil)
	e, ctx := r.e, t.Context()
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, r.gpuPod("victim", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := r.waitPod(t, "victim", 60*time.Second, podRunning)
	claim := r.claimOf(t, p)
	res := claim.Status.Allocation.Devices.Results[0]
	rule := func(name string, device *string, effect resourcev1.DeviceTaintEffect) {
		dtr := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: r.prefix + "-" + name},
			Spec: resourcev1.DeviceTaintRuleSpec{
				DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(r.driver), Device: device},
				Taint:          resourcev1.DeviceTaint{Key: "draforge.test/" + name, Value: "true", Effect: effect},
			}}
		if _, err := e.Kube.ResourceV1().DeviceTaintRules().Create(ctx, dtr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = e.Kube.ResourceV1().DeviceTaintRules().Delete(context.Background(), dtr.Name, metav1.DeleteOptions{})
		})
	}
	rule("broken", ptr.To(res.Device), resourcev1.DeviceTaintEffectNoExecute)
	eventually(t, 60*time.Second, func() (bool, string) {
		p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, "victim", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("victim not evicted: phase %s deletion %v conditions %+v", p.Status.Phase, p.DeletionTimestamp, p.Status.Conditions)
	})
	r.waitClaimGone(t, claim.Name)

	// Every device tainted: the scheduler leaves the pod Pending and says why.
	rule("drained", nil, resourcev1.DeviceTaintEffectNoSchedule)
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, r.gpuPod("waiting", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitPod(t, "waiting", 60*time.Second, unschedulableFor("cannot allocate all claims"))
}

// TestExtendedResourcePod: a pod asking for nvidia.com/gpu: 1, with a DeviceClass naming that
// extended resource (DRAExtendedResource, GA and locked on in 1.37), gets a device from the
// scheduler's extended-resource claim, prepared by the simulated kubelet, and runs.
func TestExtendedResourcePod(t *testing.T) {
	r := newPodRig(t, 1, func(c *resourcev1.DeviceClass) { c.Spec.ExtendedResourceName = ptr.To("nvidia.com/gpu") })
	e, ctx := r.e, t.Context()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cuda"}, Spec: corev1.PodSpec{
		NodeSelector:  map[string]string{"draforge.test/pool": r.prefix},
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": mustQuantity(t, "1")}}}},
	}}
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := r.waitPod(t, "cuda", 60*time.Second, podRunning)
	st := p.Status.ExtendedResourceClaimStatus
	if st == nil || st.ResourceClaimName == "" {
		t.Fatalf("no extended resource claim status: %+v", p.Status)
	}
	c, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Get(ctx, st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 || c.Status.Allocation.Devices.Results[0].Driver != r.driver {
		t.Fatalf("extended resource claim allocation %+v", c.Status.Allocation)
	}
	// The pool does not set deviceStatus and has no network profile: as most DRA drivers, the
	// simulated one writes no status.devices when it prepares the claim.
	if len(c.Status.Devices) != 0 {
		t.Errorf("status.devices written for a pool that does not report device status: %+v", c.Status.Devices)
	}
}
