package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/gpufabric"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/test/helmtool"
)

// TestHelmRBACScope installs the chart with controller.podNamespaces and its admission policy,
// then shows with each component's own ServiceAccount token that it can do its job and cannot
// do what it does not need on a shared cluster: the controller publishes a labelled slice,
// creates and deletes an allocation pod in a listed namespace, completes a pod's deletion and
// writes a simulated node's status and its GPU clique label; it cannot create a pod in an unlisted namespace (RBAC), nor
// create anything but an allocation pod, delete a pod nobody is deleting, touch another driver's
// slice or patch a real node's status (the admission policy). The server and kubelet plugin
// write nothing of that.
func TestHelmRBACScope(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	listed, unlisted := newEnv(t).Namespace, newEnv(t).Namespace
	rel := "df" + rand.String(5)
	helmRun(t, "install", rel, chartPath(t), "--namespace", e.Namespace,
		"--set", "controller.podNamespaces={"+listed+"}", "--set", "kubeletPlugin.enabled=true")
	t.Cleanup(func() {
		// ClusterRoles, the admission policy and their bindings are cluster-scoped.
		if _, err := helmtool.Run(context.Background(), "uninstall", rel, "--namespace", e.Namespace, "--kubeconfig", kubeconfigPath); err != nil {
			t.Log(err)
		}
	})
	base := rel + "-draforge"
	controllerSA := base + "-controller"
	policy := controllerSA + "-scope"
	ctl := saClient(t, e, controllerSA)
	user := "system:serviceaccount:" + e.Namespace + ":" + controllerSA

	suffix := rand.String(5)
	simNode := mkNode(t, e, "scope-sim-"+suffix, map[string]string{simnode.LabelSimulated: simnode.LabelSimulatedValue,
		gpufabric.CliqueLabel: "a1b2c3d4-e5f6-7890-abcd-ef1234567890.0"})
	realNode := mkNode(t, e, "scope-real-"+suffix, nil)

	// Another driver's slice, published by hand as a real driver would (no DRAForge label).
	foreign, err := e.Kube.ResourceV1().ResourceSlices().Create(ctx, slice("scope-foreign-"+suffix, "gpu.real-vendor.com", realNode, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.ResourceV1().ResourceSlices().Delete(context.Background(), foreign.Name, metav1.DeleteOptions{})
	})

	// The policy takes effect once kube-apiserver's policy informer has it: wait for the first
	// denial (a write it let through meanwhile is undone and tried again).
	eventually(t, 30*time.Second, func() (bool, string) {
		// RBAC's Forbidden (bindings not synced yet) does not count: the policy's does.
		err := ctl.ResourceV1().ResourceSlices().Delete(ctx, foreign.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'"),
			fmt.Sprintf("dry-run delete of another driver's slice: %v", err)
	})

	// Where kube-controller-manager's policy status controller runs (not in the local control
	// plane), the policy's CEL is type-checked against the matched resources' schemas.
	vap, err := e.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, policy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tc := vap.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
		t.Errorf("policy type-check warnings: %+v", tc.ExpressionWarnings)
	}

	t.Run("controller can", func(t *testing.T) {
		// Publish, rewrite and remove a slice of its own.
		own := slice("scope-own-"+suffix, simdevice.DefaultDriverName, simNode, map[string]string{simdevice.LabelSDPUID: "pool-uid"})
		got, err := ctl.ResourceV1().ResourceSlices().Create(ctx, own, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create its own slice: %v", err)
		}
		got.Spec.Pool.Generation++
		if got, err = ctl.ResourceV1().ResourceSlices().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Errorf("update its own slice: %v", err)
		}
		if err := ctl.ResourceV1().ResourceSlices().Delete(ctx, own.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete its own slice: %v", err)
		}

		// An allocation pod in a listed namespace, created and deleted.
		ap := allocationPodLike("draforge-alloc-"+suffix, listed)
		if _, err := ctl.CoreV1().Pods(listed).Create(ctx, ap, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create an allocation pod in listed namespace %s: %v", listed, err)
		}
		if err := ctl.CoreV1().Pods(listed).Delete(ctx, ap.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Errorf("delete its allocation pod: %v", err)
		}

		// The simulated kubelet: a workload pod on the simulated node, being deleted by its
		// owner, gets its status written and its deletion completed.
		w := workloadPod(t, e, listed, "scope-w-"+suffix, simNode)
		if _, err := ctl.CoreV1().Pods(listed).Patch(ctx, w.Name, types.MergePatchType,
			[]byte(`{"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("patch the status of a pod on a simulated node: %v", err)
		}
		if err := e.Kube.CoreV1().Pods(listed).Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := ctl.CoreV1().Pods(listed).Delete(ctx, w.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{UID: &w.UID}}); err != nil {
			t.Errorf("complete the deletion of a pod being deleted: %v", err)
		}

		// A simulated node's conditions.
		if _, err := ctl.CoreV1().Nodes().Patch(ctx, simNode, types.MergePatchType, readyPatch(), metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("patch the status of simulated node %s: %v", simNode, err)
		}
	})

	t.Run("controller cannot", func(t *testing.T) {
		// RBAC: no pod write outside controller.podNamespaces.
		_, err := ctl.CoreV1().Pods(unlisted).Create(ctx, allocationPodLike("draforge-alloc-"+suffix, unlisted), metav1.CreateOptions{})
		wantRBACDenied(t, "create a pod in an unlisted namespace", err, user, "create", "pods", unlisted)
		w := workloadPod(t, e, unlisted, "scope-u-"+suffix, simNode)
		_, err = ctl.CoreV1().Pods(unlisted).Patch(ctx, w.Name, types.MergePatchType, []byte(`{"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
		wantRBACDenied(t, "patch a pod's status in an unlisted namespace", err, user, "patch", "pods/status", unlisted)
		err = ctl.CoreV1().Pods(unlisted).Delete(ctx, w.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		wantRBACDenied(t, "delete a pod in an unlisted namespace", err, user, "delete", "pods", unlisted)

		// The admission policy: another driver's slice.
		err = ctl.ResourceV1().ResourceSlices().Delete(ctx, foreign.Name, metav1.DeleteOptions{})
		wantPolicyDenied(t, "delete another driver's slice", err, policy, "updates and deletes only ResourceSlices it published")
		cur, err := e.Kube.ResourceV1().ResourceSlices().Get(ctx, foreign.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("another driver's slice is gone: %v", err)
		}
		taken := cur.DeepCopy()
		taken.Labels = map[string]string{simdevice.LabelSDPUID: "stolen"}
		_, err = ctl.ResourceV1().ResourceSlices().Update(ctx, taken, metav1.UpdateOptions{})
		wantPolicyDenied(t, "label another driver's slice as its own", err, policy, "updates and deletes only ResourceSlices it published")
		_, err = ctl.ResourceV1().ResourceSlices().Create(ctx, slice("scope-unlabelled-"+suffix, "gpu.real-vendor.com", realNode, nil), metav1.CreateOptions{})
		wantPolicyDenied(t, "create a slice without its label", err, policy, "writes only ResourceSlices it publishes")

		// A real node's status.
		_, err = ctl.CoreV1().Nodes().Patch(ctx, realNode, types.MergePatchType, readyPatch(), metav1.PatchOptions{}, "status")
		wantPolicyDenied(t, "patch a real node's status", err, policy, "writes only Nodes labelled draforge.oaslananka/simulated=true")
		// A real node's clique label; a simulated node's other labels, annotations and spec.
		clique := `{"metadata":{"labels":{"` + gpufabric.CliqueLabel + `":null}}}`
		_, err = ctl.CoreV1().Nodes().Patch(ctx, realNode, types.MergePatchType, []byte(clique), metav1.PatchOptions{})
		wantPolicyDenied(t, "drop a real node's clique label", err, policy, "writes only Nodes labelled draforge.oaslananka/simulated=true")
		for what, patch := range map[string]string{
			"label a simulated node":                 `{"metadata":{"labels":{"topology.kubernetes.io/rack":"rack-9"}}}`,
			"annotate a simulated node":              `{"metadata":{"annotations":{"example.com/note":"x"}}}`,
			"cordon a simulated node":                `{"spec":{"unschedulable":true}}`,
			"hold a simulated node with a finalizer": `{"metadata":{"finalizers":["example.com/hold"]}}`,
			"make a simulated node owned":            `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"0d5c1f7e-0000-4000-8000-000000000000"}]}}`,
			"unlabel a simulated node as simulated":  `{"metadata":{"labels":{"` + simnode.LabelSimulated + `":null}}}`,
		} {
			_, err = ctl.CoreV1().Nodes().Patch(ctx, simNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			wantPolicyDenied(t, what, err, policy, "changes only the label nvidia.com/gpu.clique")
		}

		// Pods in a listed namespace that are not its allocation pods, or not being deleted.
		plain := allocationPodLike("scope-plain-"+suffix, listed)
		plain.Labels = nil
		_, err = ctl.CoreV1().Pods(listed).Create(ctx, plain, metav1.CreateOptions{})
		wantPolicyDenied(t, "create a pod that is not an allocation pod", err, policy, "creates only allocation pods")
		tokened := allocationPodLike("scope-token-"+suffix, listed)
		tokened.Spec.AutomountServiceAccountToken = nil
		_, err = ctl.CoreV1().Pods(listed).Create(ctx, tokened, metav1.CreateOptions{})
		wantPolicyDenied(t, "create an allocation pod with a ServiceAccount token", err, policy, "without a ServiceAccount token")
		host := allocationPodLike("scope-host-"+suffix, listed)
		host.Spec.HostNetwork = true
		_, err = ctl.CoreV1().Pods(listed).Create(ctx, host, metav1.CreateOptions{})
		wantPolicyDenied(t, "create an allocation pod on the host network", err, policy, "no pod with host namespaces")
		running := workloadPod(t, e, listed, "scope-r-"+suffix, simNode)
		err = ctl.CoreV1().Pods(listed).Delete(ctx, running.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		wantPolicyDenied(t, "delete a pod nobody is deleting", err, policy, "deletes only its allocation pods")

		// With the policy in force (the denials above), a simulated node's GPU clique label, as
		// simulated GPU Feature Discovery drops it, and back.
		for _, patch := range []string{
			`{"metadata":{"labels":{"` + gpufabric.CliqueLabel + `":null},"annotations":{"` + gpufabric.DetachedCliqueAnnotation + `":"a1b2c3d4-e5f6-7890-abcd-ef1234567890.0"}}}`,
			`{"metadata":{"labels":{"` + gpufabric.CliqueLabel + `":"a1b2c3d4-e5f6-7890-abcd-ef1234567890.0"},"annotations":{"` + gpufabric.DetachedCliqueAnnotation + `":null}}}`,
		} {
			if _, err := ctl.CoreV1().Nodes().Patch(ctx, simNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Errorf("the GPU clique label of simulated node %s: %v", simNode, err)
			}
		}

		// Nothing changed on the API server.
		if got, err := e.Kube.CoreV1().Nodes().Get(ctx, realNode, metav1.GetOptions{}); err != nil || len(got.Status.Conditions) != 0 {
			t.Errorf("real node's status after the denied patch: %+v %v", got.Status.Conditions, err)
		}
		if got, err := e.Kube.ResourceV1().ResourceSlices().Get(ctx, foreign.Name, metav1.GetOptions{}); err != nil || len(got.Labels) != 0 {
			t.Errorf("another driver's slice after the denied writes: %v %v", got.Labels, err)
		}
		if got, err := e.Kube.CoreV1().Pods(unlisted).List(ctx, metav1.ListOptions{}); err != nil || len(got.Items) != 1 {
			t.Errorf("pods in the unlisted namespace: %d %v, want only the workload pod", len(got.Items), err)
		}
	})

	// The server and the kubelet plugin write none of it, anywhere.
	for _, sa := range []string{base + "-server", base + "-kubelet-plugin"} {
		t.Run(sa, func(t *testing.T) {
			c := saClient(t, e, sa)
			want := map[string]bool{
				"create /pods": false, "delete /pods": false, "patch /pods/status": false,
				"create resource.k8s.io/resourceslices": false, "update resource.k8s.io/resourceslices": false,
				"delete resource.k8s.io/resourceslices": false,
			}
			checkAccess(t, c, listed, want)
			checkAccess(t, c, "", map[string]bool{"patch /nodes/status": false, "update /nodes/status": false, "patch /nodes": false})
			err := c.ResourceV1().ResourceSlices().Delete(ctx, foreign.Name, metav1.DeleteOptions{})
			wantRBACDenied(t, "delete another driver's slice", err, "system:serviceaccount:"+e.Namespace+":"+sa, "delete", "resourceslices", "")
			_, err = c.CoreV1().Nodes().Patch(ctx, realNode, types.MergePatchType, readyPatch(), metav1.PatchOptions{}, "status")
			wantRBACDenied(t, "patch a real node's status", err, "system:serviceaccount:"+e.Namespace+":"+sa, "patch", "nodes/status", "")
		})
	}
}

func mkNode(t *testing.T, e *env, name string, labels map[string]string) string {
	t.Helper()
	if _, err := e.Kube.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func slice(name, driver, node string, labels map[string]string) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}},
		},
	}
}

// allocationPodLike has what the admission policy checks of an allocation pod (its label, no
// ServiceAccount token), and a node selector nothing matches so kube-scheduler leaves it alone.
func allocationPodLike(name, namespace string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{allocationpod.Label: "claim-uid"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			NodeSelector:                 map[string]string{"draforge.oaslananka/e2e-nowhere": "true"},
			Containers:                   []corev1.Container{{Name: "allocate", Image: allocationpod.Image}},
		},
	}
}

// workloadPod is a pod bound to node, created by the test (as its workload controller would).
func workloadPod(t *testing.T, e *env, namespace, name, node string) *corev1.Pod {
	t.Helper()
	p, err := e.Kube.CoreV1().Pods(namespace).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", namespace, name, err)
	}
	// No kubelet completes its deletion: the namespace's deletion must not wait for it.
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	return p
}

func readyPatch() []byte {
	return []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"e2e"}]}}`)
}

// wantRBACDenied: the authorizer's Forbidden for exactly that user, verb, resource and namespace.
func wantRBACDenied(t *testing.T, what string, err error, user, verb, resource, namespace string) {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	want := fmt.Sprintf("User %q cannot %s resource %q", user, verb, res)
	if sub != "" {
		want = fmt.Sprintf("User %q cannot %s resource \"%s/%s\"", user, verb, res, sub)
	}
	scope := "at the cluster scope"
	if namespace != "" {
		scope = fmt.Sprintf("in the namespace %q", namespace)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), scope) {
		t.Errorf("%s: want RBAC's Forbidden (%s ... %s), got %v", what, want, scope, err)
	}
}

// wantPolicyDenied: the admission policy's Forbidden, with the validation's message.
func wantPolicyDenied(t *testing.T, what string, err error, policy, message string) {
	t.Helper()
	prefix := fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request", policy, policy)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), message) {
		t.Errorf("%s: want %s: ...%s..., got %v", what, prefix, message, err)
	}
}
