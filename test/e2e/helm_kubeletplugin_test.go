package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/devicestatus"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/test/helmtool"
)

// podToken is a token of the ServiceAccount bound to a Pod, as the kubelet projects it into the
// DaemonSet's pod: the API server then knows the node the token belongs to
// (authentication.kubernetes.io/node-name), which "associated-node:" verbs are checked against.
func podToken(t *testing.T, e *env, sa, node string) string {
	t.Helper()
	ctx := t.Context()
	pod, err := e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plugin-" + rand.String(5)},
		Spec: corev1.PodSpec{ServiceAccountName: sa, NodeName: node, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod for %s on %s: %v", sa, node, err)
	}
	tr, err := e.Kube.CoreV1().ServiceAccounts(e.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s bound to pod %s: %v", sa, pod.Name, err)
	}
	return tr.Status.Token
}

func tokenConfig(e *env, token string) *rest.Config {
	return &rest.Config{Host: e.Config.Host, BearerToken: token, Timeout: 30 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.Config.TLSClientConfig.CAData, CAFile: e.Config.TLSClientConfig.CAFile}}
}

// writeTokenKubeconfig writes a kubeconfig that authenticates with token only.
func writeTokenKubeconfig(t *testing.T, e *env, token string) string {
	t.Helper()
	ca := e.Config.TLSClientConfig.CAData
	if len(ca) == 0 {
		var err error
		if ca, err = os.ReadFile(e.Config.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHelmKubeletPluginRBAC installs the chart with the kubelet plugin DaemonSet and runs the
// plugin with its ServiceAccount's pod-bound token: preparing a claim on its node works end to
// end (pools and node read, claim read, status.devices written), while writing status.devices
// of a claim on another node, or for a driver the chart did not name, is forbidden.
func TestHelmKubeletPluginRBAC(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	rel := "df" + rand.String(5)
	helmRun(t, "install", rel, chartPath(t), "--namespace", e.Namespace, "--set", "kubeletPlugin.enabled=true")
	t.Cleanup(func() {
		if _, err := helmtool.Run(context.Background(), "uninstall", rel, "--namespace", e.Namespace, "--kubeconfig", kubeconfigPath); err != nil {
			t.Log(err)
		}
	})
	name := rel + "-draforge-kubelet-plugin"
	ds, err := e.Kube.AppsV1().DaemonSets(e.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("DaemonSet not installed: %v", err)
	}
	if ds.Spec.Template.Spec.ServiceAccountName != name {
		t.Errorf("DaemonSet runs as %q", ds.Spec.Template.Spec.ServiceAccountName)
	}
	if _, err := e.Kube.NetworkingV1().NetworkPolicies(e.Namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("NetworkPolicy not installed: %v", err)
	}

	nodes := []string{"kp-a-" + e.Namespace, "kp-b-" + e.Namespace}
	for _, n := range nodes {
		if _, err := e.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	node, otherNode := nodes[0], nodes[1]
	e.Apply(t, e.Namespace, newPool(e.Namespace, "gpus", map[string]any{"deviceCount": int64(1), "deviceType": "gpu", "deviceStatus": true, "targetNodes": []any{node, otherNode}}))
	token := podToken(t, e, name, node)

	t.Run("access", func(t *testing.T) {
		sa := kubernetes.NewForConfigOrDie(tokenConfig(e, token))
		checkAccess(t, sa, e.Namespace, map[string]bool{
			"list draforge.oaslananka/simulateddevicepools":  true,
			"watch draforge.oaslananka/simulateddevicepools": true,
			"list /nodes":                                 true,
			"get resource.k8s.io/resourceclaims":          true,
			"list resource.k8s.io/resourceslices":         true,
			"watch resource.k8s.io/resourceslices":        true,
			"patch resource.k8s.io/resourceclaims/status": true,
			"associated-node:patch resource.k8s.io/resourceclaims/driver#sim.draforge.oaslananka": true,
			"list /namespaces": true,
			// and nothing more
			"arbitrary-node:patch resource.k8s.io/resourceclaims/driver#sim.draforge.oaslananka": false,
			"associated-node:patch resource.k8s.io/resourceclaims/driver#other.example.com":      false,
			"update resource.k8s.io/resourceclaims/status":                                       false,
			"update resource.k8s.io/resourceclaims/binding":                                      false,
			"list resource.k8s.io/resourceclaims":                                                false,
			"update resource.k8s.io/resourceclaims":                                              false,
			"create resource.k8s.io/resourceslices":                                              false,
			"delete resource.k8s.io/resourceslices":                                              false,
			"patch draforge.oaslananka/simulateddevicepools":                                     false,
			"update /nodes": false,
			"get /secrets":  false,
			"list /pods":    false,
		})
	})

	// The plugin process with exactly that token prepares a claim on its node.
	dirs := newKubeletDirs(t)
	startKubeletPlugin(t, writeTokenKubeconfig(t, e, token), node, dirs)
	k := registerWith(t, dirs, simdevice.DefaultDriverName)
	pool := simdevice.PoolNameFor(e.Namespace, "gpus", node)
	c := allocatedClaim(t, e, "mine", node, false, [3]string{simdevice.DefaultDriverName, pool, "gpu-0"})
	if r := k.prepare(t, c); r.Error != "" || len(r.Devices) != 1 {
		t.Fatalf("prepare with the chart's RBAC: %v", r)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		got := readyEntries(e.claim(t, "mine"), simdevice.DefaultDriverName)
		return len(got) == 1, fmt.Sprintf("status.devices %+v", got)
	})

	// The same token may not write status.devices of a claim allocated on another node, nor
	// for a driver the chart did not name.
	claims := kubernetes.NewForConfigOrDie(tokenConfig(e, token)).ResourceV1()
	elsewhere := allocatedClaim(t, e, "elsewhere", otherNode, false,
		[3]string{simdevice.DefaultDriverName, simdevice.PoolNameFor(e.Namespace, "gpus", otherNode), "gpu-0"})
	entries := devicestatus.Entries(elsewhere, simdevice.DefaultDriverName, devicestatus.All, nil, metav1.Now())
	wantDriverForbidden(t, "status.devices of a claim on another node",
		devicestatus.Apply(ctx, claims, elsewhere, simdevice.DefaultDriverName, entries), "cannot arbitrary-node:patch")
	foreign := allocatedClaim(t, e, "foreign", node, false, [3]string{"other.example.com", pool, "gpu-0"})
	entries = devicestatus.Entries(foreign, "other.example.com", devicestatus.All, nil, metav1.Now())
	wantDriverForbidden(t, "status.devices for a driver not in kubeletPlugin.driverNames",
		devicestatus.Apply(ctx, claims, foreign, "other.example.com", entries), `"other.example.com" is forbidden`)
	if got := e.claim(t, "elsewhere").Status.Devices; len(got) != 0 {
		t.Errorf("status.devices of a claim on another node written: %+v", got)
	}
}

// wantDriverForbidden: kube-apiserver reports a missing resourceclaims/driver permission as a
// Forbidden field error inside 422 Invalid.
func wantDriverForbidden(t *testing.T, what string, err error, detail string) {
	t.Helper()
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `status.devices: Forbidden: changing status.devices requires resource="resourceclaims/driver"`) ||
		!strings.Contains(err.Error(), detail) {
		t.Errorf("%s: want the resourceclaims/driver Forbidden error with %q, got %v", what, detail, err)
	}
}
