package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/devicestatus"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/test/helmtool"
)

// helmRun runs the pinned helm (tools/helm) against the package cluster.
func helmRun(t *testing.T, args ...string) string {
	t.Helper()
	res, err := helmtool.Run(t.Context(), append(args, "--kubeconfig", kubeconfigPath)...)
	if err != nil {
		t.Fatal(err)
	}
	return res.Stdout
}

func chartPath(t *testing.T, file ...string) string {
	t.Helper()
	dir, err := helmtool.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{dir}, file...)...)
}

// TestHelmDryRunServer has the API server validate every object of the chart, with the
// defaults and with both exposure profiles (without the ServiceMonitor, whose CRD the local
// cluster does not serve), without persisting anything.
func TestHelmDryRunServer(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"local-demo", []string{"-f", chartPath(t, "values-local-demo.yaml")}},
		{"secure", []string{"-f", chartPath(t, "values-secure.yaml"), "--set", "controller.metrics.serviceMonitor.enabled=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := helmRun(t, append([]string{"install", "dry-" + rand.String(5), chartPath(t), "--namespace", e.Namespace, "--dry-run=server"}, tc.args...)...)
			if !strings.Contains(out, "kind: Deployment") {
				t.Fatalf("dry run rendered no Deployment:\n%s", out)
			}
		})
	}
	if d, err := e.Kube.AppsV1().Deployments(e.Namespace).List(t.Context(), metav1.ListOptions{}); err != nil || len(d.Items) != 0 {
		t.Fatalf("dry run persisted Deployments: %v %v", d, err)
	}
}

// TestHelmInstallAndRBAC installs the chart for real (no kubelet, so no pod runs) and proves
// with the ServiceAccounts' own tokens that the RBAC is what the controller and server need
// and nothing more.
func TestHelmInstallAndRBAC(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	rel := "df" + rand.String(5)
	helmRun(t, "install", rel, chartPath(t), "--namespace", e.Namespace)
	t.Cleanup(func() {
		// ClusterRoles and bindings are cluster-scoped and outlive the namespace.
		if _, err := helmtool.Run(context.Background(), "uninstall", rel, "--namespace", e.Namespace, "--kubeconfig", kubeconfigPath); err != nil {
			t.Log(err)
		}
	})

	var releases []struct{ Name, Status string }
	if err := json.Unmarshal([]byte(helmRun(t, "list", "--namespace", e.Namespace, "-o", "json")), &releases); err != nil {
		t.Fatal(err)
	}
	if len(releases) != 1 || releases[0].Name != rel || releases[0].Status != "deployed" {
		t.Fatalf("helm list = %+v, want %s deployed", releases, rel)
	}

	base := rel + "-draforge"
	controllerSA, serverSA := base+"-controller", base+"-server"
	for _, o := range []struct {
		gvr       schema.GroupVersionResource
		namespace string
		name      string
	}{
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, e.Namespace, base + "-controller"},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, e.Namespace, base + "-server"},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, e.Namespace, base + "-server"},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, e.Namespace, base + "-controller-metrics"},
		{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, e.Namespace, controllerSA},
		{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, e.Namespace, serverSA},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, e.Namespace, base + "-machines"},
		{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, e.Namespace, base + "-controller"},
		{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, e.Namespace, base + "-server"},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, e.Namespace, base + "-controller-leader-election"},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, e.Namespace, base + "-controller-leader-election"},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, "", base + "-controller"},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, "", base + "-server"},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, "", base + "-controller"},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, "", base + "-server"},
		{schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}, "", base + "-controller-scope"},
		{schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}, "", base + "-controller-scope"},
		{gvr.CustomResourceDefinitions, "", gvr.SimulatedDevicePoolCRD},
	} {
		if _, err := e.Dynamic.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s %s/%s not installed: %v", o.gvr.Resource, o.namespace, o.name, err)
		}
	}
	d, err := e.Kube.AppsV1().Deployments(e.Namespace).Get(ctx, base+"-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "), "--leader-election-lease-namespace="+e.Namespace) {
		t.Errorf("controller args do not name the release namespace: %v", d.Spec.Template.Spec.Containers[0].Args)
	}

	// Another namespace for the negative lease checks.
	other := newEnv(t).Namespace

	t.Run("controller", func(t *testing.T) {
		sa := saClient(t, e, controllerSA)
		checkAccess(t, sa, e.Namespace, map[string]bool{
			"list resource.k8s.io/resourceslices":                   true,
			"watch resource.k8s.io/resourceslices":                  true,
			"create resource.k8s.io/resourceslices":                 true,
			"delete resource.k8s.io/resourceslices":                 true,
			"watch resource.k8s.io/resourceclaims":                  true,
			"update resource.k8s.io/resourceclaims/status":          true,
			"patch draforge.oaslananka/simulateddevicepools":        true,
			"patch draforge.oaslananka/simulateddevicepools/status": true,
			"create /events":   true,
			"list /namespaces": true,
			"list apiextensions.k8s.io/customresourcedefinitions#simulateddevicepools.draforge.oaslananka":  true,
			"watch apiextensions.k8s.io/customresourcedefinitions#simulateddevicepools.draforge.oaslananka": true,
			// The engine watches the CRD; it never gets it.
			"get apiextensions.k8s.io/customresourcedefinitions#simulateddevicepools.draforge.oaslananka": false,
			// Informers only: no get, no patch of slices; patch and update of pools only as needed.
			"get resource.k8s.io/resourceslices":                                     false,
			"patch resource.k8s.io/resourceslices":                                   false,
			"get resource.k8s.io/deviceclasses":                                      false,
			"update draforge.oaslananka/simulateddevicepools":                        false,
			"update draforge.oaslananka/simulateddevicepools/status":                 false,
			"patch resource.k8s.io/resourceclaims/status":                            false,
			"get apiextensions.k8s.io/customresourcedefinitions#widgets.example.com": false,
			"list apiextensions.k8s.io/customresourcedefinitions":                    false,
			"get coordination.k8s.io/leases#draforge-controller":                     true,
			"update coordination.k8s.io/leases#draforge-controller":                  true,
			"create coordination.k8s.io/leases":                                      true,
			// and nothing more
			"delete /nodes": false,
			"update /pods":  false,
			// The pod machine: pods on simulated nodes (RBAC cannot select by node); the claim
			// machine (--allocator kube-scheduler, the default): allocation pods.
			"create /pods":                         true,
			"delete /pods":                         true,
			"patch resource.k8s.io/resourceclaims": true,
			"patch /pods/status":                   true,
			"update /pods/status":                  false,
			// The pod machine writes claims' status.devices by UpdateStatus (Kubernetes 1.36+
			// checks the verb on the resourceclaims/driver pseudo-subresource).
			"arbitrary-node:update resource.k8s.io/resourceclaims/driver": true,
			"arbitrary-node:patch resource.k8s.io/resourceclaims/driver":  false,
			"get /secrets":                                          false,
			"list /secrets":                                         false,
			"update resource.k8s.io/resourceclaims":                 false,
			"delete resource.k8s.io/resourceclaims":                 false,
			"create resource.k8s.io/deviceclasses":                  false,
			"delete draforge.oaslananka/simulateddevicepools":       false,
			"update coordination.k8s.io/leases#someone-else":        false,
			"delete coordination.k8s.io/leases#draforge-controller": false,
			"get /namespaces":                                       false,
			"create rbac.authorization.k8s.io/clusterrolebindings":  false,
		})
		checkAccess(t, sa, other, map[string]bool{
			"create coordination.k8s.io/leases":                     false,
			"update coordination.k8s.io/leases#draforge-controller": false,
			"patch coordination.k8s.io/leases":                      false,
			// Node Leases are read only in kube-node-lease (the engine watches a related
			// resource only in its literal namespace).
			"get coordination.k8s.io/leases#draforge-controller": false,
			"list coordination.k8s.io/leases":                    false,
			"watch coordination.k8s.io/leases":                   false,
		})
		// The node machine: simulated nodes' conditions and their Leases in kube-node-lease; the
		// gpuclique machine: their clique label (the admission policy keeps that patch to the
		// label and its annotation on simulated nodes, TestHelmRBACScope).
		checkAccess(t, sa, "", map[string]bool{
			"patch /nodes/status":  true,
			"update /nodes/status": false,
			"patch /nodes":         true,
			"update /nodes":        false,
			// no Lease informer across namespaces
			"list coordination.k8s.io/leases":  false,
			"watch coordination.k8s.io/leases": false,
		})
		checkAccess(t, sa, "kube-node-lease", map[string]bool{
			"get coordination.k8s.io/leases#node-a":    false,
			"list coordination.k8s.io/leases":          true,
			"watch coordination.k8s.io/leases":         true,
			"create coordination.k8s.io/leases":        true,
			"patch coordination.k8s.io/leases#node-a":  true,
			"update coordination.k8s.io/leases#node-a": false,
			"delete coordination.k8s.io/leases#node-a": false,
		})

		// Real requests with the token.
		suffix := rand.String(5)
		// The pod machine's status.devices write (devicestatus.Update) passes kube-apiserver's
		// resourceclaims/driver check; a server-side apply (verb patch) would not.
		claim := allocatedClaim(t, e, "rbac-"+suffix, "rbac-node-"+suffix, false, [3]string{"sim.draforge.oaslananka", "rbac-node-" + suffix, "gpu-0"})
		entries := devicestatus.Entries(claim, "sim.draforge.oaslananka", devicestatus.All, nil, metav1.Now())
		// (RBAC grants no patch of resourceclaims/status at all: the controller only updates it.)
		wantRBACDenied(t, "status.devices by server-side apply with the controller's token",
			devicestatus.Apply(ctx, sa.ResourceV1(), claim, "sim.draforge.oaslananka", entries),
			"system:serviceaccount:"+e.Namespace+":"+controllerSA, "patch", "resourceclaims/status", e.Namespace)
		if err := devicestatus.Update(ctx, sa.ResourceV1(), claim, "sim.draforge.oaslananka", entries); err != nil {
			t.Errorf("controller cannot update status.devices: %v", err)
		} else if got := e.claim(t, claim.Name).Status.Devices; len(got) != 1 || got[0].Device != "gpu-0" {
			t.Errorf("status.devices after the controller's update: %+v", got)
		}
		if _, err := sa.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("controller cannot list resourceslices: %v", err)
		}
		slice := &resourcev1.ResourceSlice{
			// The admission policy lets the controller write only slices carrying its label.
			ObjectMeta: metav1.ObjectMeta{Name: "rbac-" + suffix, Labels: map[string]string{"draforge.oaslananka/sdp-uid": "rbac"}},
			Spec: resourcev1.ResourceSliceSpec{
				Driver: "sim.draforge.oaslananka", NodeName: ptr.To("rbac-node-" + suffix),
				Pool:    resourcev1.ResourcePool{Name: "rbac-node-" + suffix, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "gpu-0"}},
			},
		}
		if _, err := sa.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Errorf("controller cannot create a ResourceSlice: %v", err)
		} else if err := sa.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("controller cannot delete its ResourceSlice: %v", err)
		}

		claim, err := e.Kube.ResourceV1().ResourceClaims(e.Namespace).Create(ctx, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "rbac"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"},
			}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claim, err = sa.ResourceV1().ResourceClaims(e.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("controller cannot get a ResourceClaim: %v", err)
		}
		claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "sim.draforge.oaslananka", Pool: "p", Device: "gpu-0"}},
		}}
		// status.allocation: resourceclaims/status plus, since Kubernetes 1.36, resourceclaims/binding.
		updated, err := sa.ResourceV1().ResourceClaims(e.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			t.Errorf("controller cannot write resourceclaims/status allocation: %v", err)
		} else {
			claim = updated
		}
		claim.Labels = map[string]string{"x": "y"}
		_, err = sa.ResourceV1().ResourceClaims(e.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
		wantForbidden(t, "update the ResourceClaim itself", err)

		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "draforge-controller"},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-a"), LeaseDurationSeconds: ptr.To[int32](15)},
		}
		got, err := sa.CoordinationV1().Leases(e.Namespace).Create(ctx, lease, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("controller cannot create its Lease: %v", err)
		}
		got.Spec.HolderIdentity = ptr.To("pod-b")
		if _, err := sa.CoordinationV1().Leases(e.Namespace).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Errorf("controller cannot update its Lease: %v", err)
		}
		if _, err := sa.CoordinationV1().Leases(e.Namespace).Get(ctx, "draforge-controller", metav1.GetOptions{}); err != nil {
			t.Errorf("controller cannot get its Lease: %v", err)
		}
		_, err = sa.CoordinationV1().Leases(other).Create(ctx, lease, metav1.CreateOptions{})
		wantForbidden(t, "create a Lease in another namespace", err)
		// --allocator kube-scheduler (the chart's default): the claim machine creates and deletes
		// allocation pods and removes kube-scheduler's finalizer from claims with a patch.
		// (The admission policy admits only allocation pods: labelled, without a token.)
		pod, err := sa.CoreV1().Pods(e.Namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "rbac", Labels: map[string]string{"draforge.oaslananka/allocation-pod": "rbac"}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), NodeSelector: map[string]string{"draforge.oaslananka/e2e-nowhere": "true"},
				Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("controller cannot create an allocation pod: %v", err)
		} else {
			pod.Labels = map[string]string{"x": "y"}
			_, err = sa.CoreV1().Pods(e.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
			wantForbidden(t, "update a Pod", err)
			if err := sa.CoreV1().Pods(e.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Errorf("controller cannot delete its allocation pod: %v", err)
			}
		}
		if _, err := sa.ResourceV1().ResourceClaims(e.Namespace).Patch(ctx, claim.Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":[]}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("controller cannot patch a claim's finalizers: %v", err)
		}
		_, err = sa.CoreV1().Secrets(e.Namespace).List(ctx, metav1.ListOptions{})
		wantForbidden(t, "list Secrets", err)
		err = sa.CoreV1().Nodes().Delete(ctx, "any-node", metav1.DeleteOptions{})
		wantForbidden(t, "delete a Node", err)
	})

	t.Run("server", func(t *testing.T) {
		sa := saClient(t, e, serverSA)
		// Informers only: list and watch, no get; namespaces only listed (/readyz); no Events.
		want := map[string]bool{"list /events": false, "create /events": false, "get /secrets": false,
			"list /namespaces": true, "get /namespaces": false, "watch /namespaces": false}
		for _, r := range []string{"draforge.oaslananka/simulateddevicepools", "resource.k8s.io/resourceslices", "resource.k8s.io/resourceclaims",
			"resource.k8s.io/deviceclasses", "/nodes", "/pods"} {
			want["get "+r] = false
			for _, v := range []string{"list", "watch"} {
				want[v+" "+r] = true
			}
			for _, v := range []string{"create", "update", "patch", "delete", "deletecollection"} {
				want[v+" "+r] = false
			}
		}
		for _, r := range []string{"resource.k8s.io/resourceclaims/status", "draforge.oaslananka/simulateddevicepools/status", "coordination.k8s.io/leases", "/configmaps", "/services"} {
			want["update "+r] = false
			want["create "+r] = false
		}
		checkAccess(t, sa, e.Namespace, want)
		if _, err := sa.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("server cannot list pods cluster-wide: %v", err)
		}
		if _, err := sa.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("server cannot list claims cluster-wide: %v", err)
		}
		_, err := sa.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "rbac-" + rand.String(5)}}, metav1.CreateOptions{})
		wantForbidden(t, "create a DeviceClass", err)
		_, err = sa.CoreV1().ConfigMaps(e.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}}, metav1.CreateOptions{})
		wantForbidden(t, "create a ConfigMap", err)
	})
}

// TestHelmUpgradeToProfile upgrades a default release to the local-demo profile, as the
// operations guide's `helm upgrade` does, and checks the API server stored the new objects.
func TestHelmUpgradeToProfile(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	rel := "df" + rand.String(5)
	helmRun(t, "install", rel, chartPath(t), "--namespace", e.Namespace)
	t.Cleanup(func() {
		if _, err := helmtool.Run(context.Background(), "uninstall", rel, "--namespace", e.Namespace, "--kubeconfig", kubeconfigPath); err != nil {
			t.Log(err)
		}
	})
	helmRun(t, "upgrade", rel, chartPath(t), "--namespace", e.Namespace, "-f", chartPath(t, "values-local-demo.yaml"))
	ing, err := e.Kube.NetworkingV1().Ingresses(e.Namespace).Get(ctx, rel+"-draforge-server", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("upgrade did not create the local-demo Ingress: %v", err)
	}
	if ing.Spec.Rules[0].Host != "draforge.localhost" {
		t.Errorf("Ingress host = %q", ing.Spec.Rules[0].Host)
	}
	d, err := e.Kube.AppsV1().Deployments(e.Namespace).Get(ctx, rel+"-draforge-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 1 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--log-level=debug") {
		t.Errorf("controller after upgrade: replicas %d args %v", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
	}
	// Roll back to the defaults: the Ingress goes away again.
	helmRun(t, "rollback", rel, "1", "--namespace", e.Namespace)
	if _, err := e.Kube.NetworkingV1().Ingresses(e.Namespace).Get(ctx, rel+"-draforge-server", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Ingress after rollback: want NotFound, got %v", err)
	}
}

// saClient authenticates as a ServiceAccount with a short-lived token from the TokenRequest API,
// trusting the cluster CA from the admin configuration and nothing else of it.
func saClient(t *testing.T, e *env, name string) kubernetes.Interface {
	t.Helper()
	tr, err := e.Kube.CoreV1().ServiceAccounts(e.Namespace).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", name, err)
	}
	cfg := &rest.Config{
		Host:        e.Config.Host,
		BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: e.Config.TLSClientConfig.CAData,
			CAFile: e.Config.TLSClientConfig.CAFile,
		},
		Timeout: 30 * time.Second,
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	who, err := kube.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview as %s: %v", name, err)
	}
	if want := "system:serviceaccount:" + e.Namespace + ":" + name; who.Status.UserInfo.Username != want {
		t.Fatalf("authenticated as %q, want %q", who.Status.UserInfo.Username, want)
	}
	return kube
}

// checkAccess asks the API server, as the client's user, whether each "verb group/resource[/sub][#name]" is allowed in ns.
func checkAccess(t *testing.T, kube kubernetes.Interface, ns string, want map[string]bool) {
	t.Helper()
	for spec, allowed := range want {
		verb, rest, _ := strings.Cut(spec, " ")
		rest, name, _ := strings.Cut(rest, "#")
		group, res, _ := strings.Cut(rest, "/")
		res, sub, _ := strings.Cut(res, "/")
		ra := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: res, Subresource: sub, Name: name}
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(),
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview %s: %v", spec, err)
		}
		if r.Status.Allowed != allowed {
			t.Errorf("%s in %s: allowed=%v, want %v (%s)", spec, ns, r.Status.Allowed, allowed, r.Status.Reason)
		}
	}
}

func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: want Forbidden, got %v", what, err)
	}
}
