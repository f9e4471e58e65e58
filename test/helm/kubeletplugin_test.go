package helm

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

const kubeletPluginName = release + "-draforge-kubelet-plugin"

// The kubelet plugin is opt-in: the defaults render none of its objects.
func TestKubeletPluginOffByDefault(t *testing.T) {
	for _, o := range render(t) {
		if strings.Contains(o.GetName(), "kubelet-plugin") {
			t.Errorf("default values render %s %s", o.GetKind(), o.GetName())
		}
	}
}

func TestKubeletPluginDaemonSet(t *testing.T) {
	r := render(t, "--set", "kubeletPlugin.enabled=true")
	ds := into[appsv1.DaemonSet](t, r.get(t, "DaemonSet", kubeletPluginName))
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != kubeletPluginName || pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Errorf("service account %q automount %v", pod.ServiceAccountName, pod.AutomountServiceAccountToken)
	}
	// Never scheduled on simulated nodes: no kubelet runs there.
	a := pod.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 1 {
		t.Fatalf("affinity %+v", a)
	}
	if e := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions; len(e) != 1 ||
		e[0].Key != "draforge.oaslananka/simulated" || e[0].Operator != corev1.NodeSelectorOpDoesNotExist {
		t.Errorf("node affinity %+v: want draforge.oaslananka/simulated DoesNotExist", e)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("the plugin needs no host namespaces")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers: %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Args[0] != "kubelet-plugin" {
		t.Fatalf("args %v", c.Args)
	}
	want := map[string]string{
		"runtime-address": ":8083", "node-name": "$(NODE_NAME)",
		"plugins-dir": "/var/lib/kubelet/plugins", "registry-dir": "/var/lib/kubelet/plugins_registry", "cdi-dir": "/var/run/cdi",
		"health-interval": "10s", "log-level": "info", "driver-names": "sim.draforge.oaslananka", "readiness-timeout": "2s", "readiness-grace-period": "15s", "shutdown-timeout": "5s",
	}
	if got := flags(t, c.Args[1:]); !maps.Equal(got, want) {
		t.Errorf("args:\n got %v\nwant %v", got, want)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v: want NODE_NAME from spec.nodeName", c.Env)
	}
	// Exactly the three host directories, mounted at the same paths, nothing else.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if m.ReadOnly {
			t.Errorf("mount %s is read-only; the plugin writes there", m.Name)
		}
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath == nil || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("volume %s: want a DirectoryOrCreate hostPath, got %+v", v.Name, v.VolumeSource)
			continue
		}
		hostPaths[v.Name] = v.HostPath.Path
	}
	wantPaths := map[string]string{"plugins": "/var/lib/kubelet/plugins", "plugins-registry": "/var/lib/kubelet/plugins_registry", "cdi": "/var/run/cdi"}
	if !maps.Equal(mounts, wantPaths) || !maps.Equal(hostPaths, wantPaths) {
		t.Errorf("mounts %v hostPaths %v, want both %v", mounts, hostPaths, wantPaths)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		wantPath := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[name]
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != wantPath || p.HTTPGet.Port.String() != "runtime" {
			t.Errorf("%s probe %+v, want GET %s on port runtime", name, p, wantPath)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "runtime" || c.Ports[0].ContainerPort != 8083 || c.Ports[0].HostPort != 0 {
		t.Errorf("ports %+v", c.Ports)
	}
	// Root for the root-owned host directories, and otherwise nothing: no privilege, no
	// capability, no escalation, read-only root filesystem, RuntimeDefault seccomp.
	s := c.SecurityContext
	if s == nil || s.RunAsUser == nil || *s.RunAsUser != 0 || s.Privileged == nil || *s.Privileged ||
		s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem ||
		s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) != 0 ||
		s.SeccompProfile == nil || s.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v", s)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources must set requests and limits: %+v", c.Resources)
	}

	// Its own ServiceAccount, ClusterRole and binding, and a NetworkPolicy with no ingress.
	sa := into[corev1.ServiceAccount](t, r.get(t, "ServiceAccount", kubeletPluginName))
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Error("ServiceAccount must not automount (the pod opts in)")
	}
	got := rulesOf(t, into[rbacv1.ClusterRole](t, r.get(t, "ClusterRole", kubeletPluginName)).Rules)
	wantRules := expand(map[string][]string{
		"draforge.oaslananka|simulateddevicepools": {"list", "watch"},
		"|nodes":                                {"list", "watch"},
		"resource.k8s.io|resourceclaims":        {"get"},
		"resource.k8s.io|resourceslices":        {"list", "watch"},
		"resource.k8s.io|resourceclaims/status": {"patch"},
		"resource.k8s.io|resourceclaims/driver#sim.draforge.oaslananka": {"associated-node:patch"},
		"|namespaces": {"list"},
	})
	if !slices.Equal(got, wantRules) {
		t.Errorf("ClusterRole rules:\n got %v\nwant %v", got, wantRules)
	}
	crb := into[rbacv1.ClusterRoleBinding](t, r.get(t, "ClusterRoleBinding", kubeletPluginName))
	if crb.RoleRef.Name != kubeletPluginName || len(crb.Subjects) != 1 || crb.Subjects[0].Name != kubeletPluginName || crb.Subjects[0].Namespace != namespace {
		t.Errorf("ClusterRoleBinding %+v", crb)
	}
	np := into[networkingv1.NetworkPolicy](t, r.get(t, "NetworkPolicy", kubeletPluginName))
	if len(np.Spec.Ingress) != 0 || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress", "Egress"}) {
		t.Errorf("NetworkPolicy %+v", np.Spec)
	}
	checkEgressOnlyDNSAndAPI(t, np)

	// Other directories and driver names follow the values; an empty driverNames means any driver.
	custom := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(custom, []byte("kubeletPlugin:\n  driverNames: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = render(t, "--set", "kubeletPlugin.enabled=true", "--set", "kubeletPlugin.kubeletDir=/data/kubelet",
		"-f", custom, "--set", "kubeletPlugin.cdiDir=/etc/cdi")
	ds = into[appsv1.DaemonSet](t, r.get(t, "DaemonSet", kubeletPluginName))
	f := flags(t, ds.Spec.Template.Spec.Containers[0].Args[1:])
	if f["plugins-dir"] != "/data/kubelet/plugins" || f["registry-dir"] != "/data/kubelet/plugins_registry" || f["cdi-dir"] != "/etc/cdi" {
		t.Errorf("custom dirs: %v", f)
	}
	// The binary enforces the list too: empty is any name ("*").
	if f["driver-names"] != "*" {
		t.Errorf("driverNames empty: --driver-names=%q, want *", f["driver-names"])
	}
	ds = into[appsv1.DaemonSet](t, render(t, "--set", "kubeletPlugin.enabled=true",
		"--set", "kubeletPlugin.driverNames={sim.draforge.oaslananka,net.sim.draforge.oaslananka}").get(t, "DaemonSet", kubeletPluginName))
	if f := flags(t, ds.Spec.Template.Spec.Containers[0].Args[1:]); f["driver-names"] != "sim.draforge.oaslananka,net.sim.draforge.oaslananka" {
		t.Errorf("two driverNames: --driver-names=%q", f["driver-names"])
	}
	for _, rule := range into[rbacv1.ClusterRole](t, r.get(t, "ClusterRole", kubeletPluginName)).Rules {
		if slices.Contains(rule.Resources, "resourceclaims/driver") && len(rule.ResourceNames) != 0 {
			t.Errorf("driverNames empty: want no resourceNames, got %v", rule.ResourceNames)
		}
	}
}

func TestKubeletPluginRejectsInvalidValues(t *testing.T) {
	for _, args := range [][]string{
		{"--set", "kubeletPlugin.kubeletDir=var/lib/kubelet"},
		{"--set", "kubeletPlugin.cdiDir="},
		{"--set", "kubeletPlugin.healthInterval=0s"},
		{"--set", "kubeletPlugin.driverNames[0]=Not_A_Domain"},
		{"--set", "kubeletPlugin.port=0"},
		{"--set", "kubeletPlugin.unknown=1"},
	} {
		if msg := renderErr(t, append([]string{"--set", "kubeletPlugin.enabled=true"}, args...)...); !strings.Contains(msg, "kubeletPlugin") {
			t.Errorf("%v: want an error naming kubeletPlugin, got:\n%s", args, msg)
		}
	}
}

// Every flag the chart passes to the plugin must exist in the binary.
func TestKubeletPluginArgsAreBinaryFlags(t *testing.T) {
	known := binaryFlags(t, "kubelet-plugin")
	ds := into[appsv1.DaemonSet](t, render(t, "--set", "kubeletPlugin.enabled=true").get(t, "DaemonSet", kubeletPluginName))
	for name := range flags(t, ds.Spec.Template.Spec.Containers[0].Args[1:]) {
		if !known[name] {
			t.Errorf("chart passes --%s, which draforge kubelet-plugin does not define", name)
		}
	}
}

func TestKubeletPluginLintStrict(t *testing.T) {
	out := helm(t, "lint", "--strict", chartDir(t), "--namespace", namespace, "--set", "kubeletPlugin.enabled=true")
	if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
		t.Fatalf("unexpected lint output:\n%s", out)
	}
}
