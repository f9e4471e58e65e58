package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/binding"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// TestBindingConditionsWithKubeScheduler: kube-scheduler v1.37.2 (DRADeviceBindingConditions on by
// default) allocates a device group's device with binding conditions, copies them into the
// allocation and keeps the pod in PreBind; the status drivers/binding writes (conditions True)
// lets it bind the pod; a binding failure condition (the binding-failure fault) makes it
// deallocate the claim and leave the pod unbound. Own control plane with kube-scheduler.
func TestBindingConditionsWithKubeScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own control plane")
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Dir: t.TempDir(), Extra: []cluster.Component{cluster.Scheduler}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.Procs {
				if p.Name == cluster.Scheduler {
					if b, err := os.ReadFile(p.Log); err == nil {
						t.Logf("kube-scheduler log (tail):\n%s", tail(string(b), 4000))
					}
				}
			}
		}
		_ = c.Stop()
	})
	e := e2eutil.NewEnv(t, c.Kubeconfig)
	ctx := t.Context()
	kube := e.Kube
	// No kube-controller-manager here: create the namespace's default ServiceAccount pods need.
	if _, err := kube.CoreV1().ServiceAccounts(e.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	node, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a",
		Labels: map[string]string{"kubernetes.io/hostname": "node-a"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}
	node.Status = corev1.NodeStatus{Capacity: alloc, Allocatable: alloc,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Simulated", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if node, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission taints a new node not-ready; no node lifecycle controller runs here to lift it.
	node.Spec.Taints = nil
	if node, err = kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	pool := pooltest.Pool(e.Namespace, "bc", "bc-uid", simdevice.PoolSpec{
		TargetNodes: []string{"node-a"},
		DeviceGroups: []simdevice.DeviceGroup{{DeviceType: "gpu", Count: 2, BindsToNode: true,
			BindingConditions: []string{"draforge.test/attached"}, BindingFailureConditions: []string{"draforge.test/attach-failed"}}},
		Faults: []simdevice.Fault{{Device: intstr.FromString("gpu-1"), Mode: simdevice.FaultBindingFailure}},
	})
	slices, err := simdevice.DesiredSlices(pool, []*corev1.Node{node})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices {
		s.Spec.Pool.Generation = 1
		if _, err := kube.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	drv := simdevice.DefaultDriverName
	for _, dev := range []string{"gpu-0", "gpu-1"} {
		class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "bc-" + dev}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf(
				"device.driver == '%s' && device.attributes['%s'].deviceType == 'gpu' && device.attributes['%s'].index == %s", drv, drv, drv, dev[4:])}}}}}
		if _, err := kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: dev, Namespace: e.Namespace}, Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}}}}}
		if _, err := kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: dev, Namespace: e.Namespace}, Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "c", Image: "registry.invalid/none", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(dev)}}}}
		if _, err := kube.CoreV1().Pods(e.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lookup := binding.Index([]*simdevice.Pool{pool})
	getClaim := func(name string) *resourcev1.ResourceClaim {
		cl, err := kube.ResourceV1().ResourceClaims(e.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	podNode := func(name string) string {
		p, err := kube.CoreV1().Pods(e.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Spec.NodeName
	}
	// The scheduler allocates both claims with the binding conditions and waits.
	for _, dev := range []string{"gpu-0", "gpu-1"} {
		e2eutil.Eventually(t, 60*time.Second, func() (bool, string) {
			cl := getClaim(dev)
			a := cl.Status.Allocation
			p, _ := kube.CoreV1().Pods(e.Namespace).Get(ctx, dev, metav1.GetOptions{})
			return a != nil && len(a.Devices.Results) == 1 && len(a.Devices.Results[0].BindingConditions) == 1, fmt.Sprintf("claim %s status %+v; pod %+v", dev, cl.Status, p.Status.Conditions)
		})
	}
	time.Sleep(6 * time.Second) // more than one PreBind poll (5s)
	for _, dev := range []string{"gpu-0", "gpu-1"} {
		if n := podNode(dev); n != "" {
			t.Fatalf("pod %s bound to %s before its binding conditions", dev, n)
		}
	}
	// The simulated driver's status: gpu-0's conditions True, gpu-1's failure condition True.
	for _, dev := range []string{"gpu-0", "gpu-1"} {
		cl := getClaim(dev)
		devices, changed, _ := binding.Status(cl, lookup, time.Now())
		if !changed {
			t.Fatalf("claim %s: nothing to write", dev)
		}
		cl.Status.Devices = devices
		if _, err := kube.ResourceV1().ResourceClaims(e.Namespace).UpdateStatus(ctx, cl, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("claim %s: the API server rejects the driver's status: %v", dev, err)
		}
	}
	e2eutil.Eventually(t, 30*time.Second, func() (bool, string) {
		n := podNode("gpu-0")
		return n == "node-a", "pod gpu-0 on " + n
	})
	// kube-scheduler deallocates the failed claim (allocation and status.devices cleared) and
	// tries again; the pod is never bound.
	e2eutil.Eventually(t, 30*time.Second, func() (bool, string) {
		cl := getClaim("gpu-1")
		for _, d := range cl.Status.Devices {
			for _, cond := range d.Conditions {
				if cond.Type == "draforge.test/attach-failed" {
					return false, fmt.Sprintf("still failed: %+v", cl.Status)
				}
			}
		}
		return true, ""
	})
	if n := podNode("gpu-1"); n != "" {
		t.Fatalf("pod gpu-1 bound to %s despite a failed binding", n)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
