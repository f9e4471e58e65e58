package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

var (
	controllerName = release + "-draforge-controller"
	serverName     = release + "-draforge-server"
	metricsName    = release + "-draforge-controller-metrics"
)

// The chart cannot read outside its directory, so it carries copies of machines/*.cue and the
// CRD. They must stay byte-identical to their sources.
func TestChartCopiesMatchSources(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct{ src, dst, glob string }{
		{"machines", "deploy/helm/draforge/files/machines", "*.cue"},
		{"deploy/crds", "deploy/helm/draforge/crds", "*.yaml"},
	} {
		srcs, _ := filepath.Glob(filepath.Join(root, c.src, c.glob))
		dsts, _ := filepath.Glob(filepath.Join(root, c.dst, c.glob))
		if len(srcs) == 0 {
			t.Fatalf("no %s in %s", c.glob, c.src)
		}
		base := func(ps []string) []string {
			var out []string
			for _, p := range ps {
				out = append(out, filepath.Base(p))
			}
			return out
		}
		if !slices.Equal(base(srcs), base(dsts)) {
			t.Errorf("%s has %v but %s has %v; fix with: cp %s/%s %s/ (and remove stale copies)",
				c.dst, base(dsts), c.src, base(srcs), c.src, c.glob, c.dst)
			continue
		}
		for i := range srcs {
			a, _ := os.ReadFile(srcs[i])
			b, _ := os.ReadFile(dsts[i])
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs from %s; fix with: cp %s %s",
					rel(root, dsts[i]), rel(root, srcs[i]), rel(root, srcs[i]), rel(root, dsts[i]))
			}
		}
	}
}

func rel(root, p string) string {
	r, _ := filepath.Rel(root, p)
	return r
}

func TestLintStrict(t *testing.T) {
	for _, tc := range []struct{ name, values string }{
		{"defaults", ""},
		{"local-demo", "values-local-demo.yaml"},
		{"secure", "values-secure.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir(t), "--namespace", namespace}
			if tc.values != "" {
				args = append(args, "-f", profile(t, tc.values))
			}
			out := helm(t, args...)
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Fatalf("unexpected lint output:\n%s", out)
			}
		})
	}
}

func TestControllerDeploymentDefaults(t *testing.T) {
	r := render(t)
	d := r.deployment(t, controllerName)
	if got := *d.Spec.Replicas; got != 2 {
		t.Errorf("controller replicas = %d, want the guide's 2", got)
	}
	c := container(t, d, "controller")
	if len(c.Args) == 0 || c.Args[0] != "controller" {
		t.Fatalf("controller args must start with the controller subcommand: %v", c.Args)
	}
	want := map[string]string{
		"runtime-address":                 ":8082",
		"machines":                        "/etc/draforge/machines",
		"readiness-timeout":               "2s",
		"readiness-grace-period":          "15s",
		"shutdown-timeout":                "5s",
		"leader-elect":                    "true",
		"leader-election-lease-name":      "draforge-controller",
		"leader-election-lease-namespace": namespace,
		"leader-election-identity":        "$(POD_NAME)",
		"leader-election-lease-duration":  "15s",
		"leader-election-renew-deadline":  "10s",
		"leader-election-retry-period":    "2s",
		"allocator":                       "kube-scheduler",
	}
	got := flags(t, c.Args[1:])
	for k, v := range want {
		if got[k] != v {
			t.Errorf("--%s = %q, want %q (args %v)", k, got[k], v, c.Args)
		}
	}

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["POD_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME must come from the Downward API metadata.name, got %+v", e)
	}
	if e := env["POD_NAMESPACE"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE must come from the Downward API metadata.namespace, got %+v", e)
	}

	if len(c.Ports) != 1 || c.Ports[0].Name != "runtime" || c.Ports[0].ContainerPort != 8082 {
		t.Errorf("ports = %+v, want one named runtime on 8082", c.Ports)
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe missing", name)
			return
		}
		if p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "runtime" {
			t.Errorf("%s probe = %s on port %s, want %s on runtime", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
		}
		// The readiness endpoint itself is bounded by readinessTimeout (2s).
		if p.TimeoutSeconds <= 2 {
			t.Errorf("%s probe timeoutSeconds = %d, must exceed the 2s readinessTimeout", name, p.TimeoutSeconds)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")

	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= 5 {
		t.Errorf("terminationGracePeriodSeconds = %v, must exceed shutdownTimeout 5s", g)
	}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != controllerName {
		t.Errorf("serviceAccountName = %q, want %q", sa, controllerName)
	}
	// The log selector of the operations guide must match the pods.
	if l := d.Spec.Template.Labels["app.kubernetes.io/name"]; l != "draforge-controller" {
		t.Errorf("pod label app.kubernetes.io/name = %q, want draforge-controller (kubectl logs -l in the guide)", l)
	}
	checkHardened(t, d.Spec.Template.Spec, c)

	// The machines ConfigMap is mounted where --machines points and holds machines/*.cue.
	var mounted bool
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/etc/draforge/machines" {
			mounted = true
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && (v.ConfigMap == nil || v.ConfigMap.Name != release+"-draforge-machines") {
					t.Errorf("volume %s is not the machines ConfigMap: %+v", v.Name, v.VolumeSource)
				}
			}
		}
	}
	if !mounted {
		t.Error("nothing mounted at /etc/draforge/machines")
	}
	cm := into[corev1.ConfigMap](t, r.get(t, "ConfigMap", release+"-draforge-machines"))
	srcs, _ := filepath.Glob(filepath.Join(repoRoot(t), "machines", "*.cue"))
	if len(cm.Data) != len(srcs) {
		t.Errorf("machines ConfigMap has %d files, machines/ has %d", len(cm.Data), len(srcs))
	}
	for _, s := range srcs {
		b, _ := os.ReadFile(s)
		if cm.Data[filepath.Base(s)] != string(b) {
			t.Errorf("machines ConfigMap %s differs from machines/%s", filepath.Base(s), filepath.Base(s))
		}
	}
}

func checkHardened(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	ps := pod.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 65532 ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext not hardened: %+v", c.Name, ps)
	}
	s := c.SecurityContext
	if s == nil || s.RunAsNonRoot == nil || !*s.RunAsNonRoot || s.RunAsUser == nil || *s.RunAsUser != 65532 ||
		s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem ||
		s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation ||
		s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) != 0 ||
		s.SeccompProfile == nil || s.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: container securityContext not hardened: %+v", c.Name, s)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("%s: resources must set requests and limits: %+v", c.Name, c.Resources)
	}
}

func TestServerDeploymentDefaults(t *testing.T) {
	r := render(t)
	d := r.deployment(t, serverName)
	c := container(t, d, "server")
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("server args must start with serve: %v", c.Args)
	}
	got := flags(t, c.Args[1:])
	for k, v := range map[string]string{"address": ":8080", "readiness-timeout": "2s", "readiness-grace-period": "15s", "shutdown-timeout": "5s"} {
		if got[k] != v {
			t.Errorf("--%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["cors-allowed-origins"]; ok {
		t.Errorf("no CORS origins by default, got %v", c.Args)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.LivenessProbe.HTTPGet.Port.String() != "http" || c.ReadinessProbe.HTTPGet.Port.String() != "http" {
		t.Errorf("server probes: liveness %+v readiness %+v", c.LivenessProbe.HTTPGet, c.ReadinessProbe.HTTPGet)
	}
	if l := d.Spec.Template.Labels["app.kubernetes.io/name"]; l != "draforge-api-server" {
		t.Errorf("pod label app.kubernetes.io/name = %q, want draforge-api-server (kubectl logs -l in the guide)", l)
	}
	checkHardened(t, d.Spec.Template.Spec, c)

	svc := into[corev1.Service](t, r.get(t, "Service", serverName))
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("server Service type = %s, want ClusterIP", svc.Spec.Type)
	}
	for _, kind := range []string{"Ingress", "Gateway", "HTTPRoute", "ServiceMonitor"} {
		if objs := r.all(kind); len(objs) != 0 {
			t.Errorf("%s rendered by default", kind)
		}
	}
}

func TestMetricsServiceAndClosedNetworkPolicy(t *testing.T) {
	r := render(t)
	svc := into[corev1.Service](t, r.get(t, "Service", metricsName))
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "runtime" || svc.Spec.Ports[0].TargetPort.String() != "runtime" {
		t.Errorf("metrics Service ports = %+v, want runtime → runtime", svc.Spec.Ports)
	}
	np := into[networkingv1.NetworkPolicy](t, r.get(t, "NetworkPolicy", controllerName))
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || len(np.Spec.Ingress) != 0 {
		t.Errorf("controller NetworkPolicy must close ingress by default: types %v ingress %+v", np.Spec.PolicyTypes, np.Spec.Ingress)
	}
	checkEgressOnlyDNSAndAPI(t, np)

	// A selected peer opens only the runtime port, only to that peer.
	peerArgs := []string{
		"--set", "controller.metrics.networkPolicy.enabled=true",
		"--set", "controller.metrics.networkPolicy.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
		"--set", "controller.metrics.networkPolicy.podSelector.matchLabels.app\\.kubernetes\\.io/name=prometheus",
	}
	np = into[networkingv1.NetworkPolicy](t, render(t, peerArgs...).get(t, "NetworkPolicy", controllerName))
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || len(np.Spec.Ingress[0].Ports) != 1 {
		t.Fatalf("want one ingress rule from one peer on one port, got %+v", np.Spec.Ingress)
	}
	in := np.Spec.Ingress[0]
	if in.Ports[0].Port.String() != "runtime" {
		t.Errorf("ingress port = %s, want runtime", in.Ports[0].Port.String())
	}
	peer := in.From[0]
	if peer.NamespaceSelector == nil || peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" ||
		peer.PodSelector == nil || peer.PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" || peer.IPBlock != nil {
		t.Errorf("ingress peer = %+v, want the monitoring namespace's prometheus pods", peer)
	}

	// Without the metrics Service the policy stays closed even with the peer configured.
	r = render(t, append(peerArgs, "--set", "controller.metrics.service.enabled=false")...)
	np = into[networkingv1.NetworkPolicy](t, r.get(t, "NetworkPolicy", controllerName))
	if len(np.Spec.Ingress) != 0 {
		t.Errorf("metrics Service disabled: controller ingress must stay closed, got %+v", np.Spec.Ingress)
	}
	if objs := r.all("Service"); len(objs) != 1 {
		t.Errorf("metrics Service disabled: want only the server Service, got %d Services", len(objs))
	}
}

func checkEgressOnlyDNSAndAPI(t *testing.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("%s: egress not restricted", np.Name)
	}
	var ports []string
	for _, e := range np.Spec.Egress {
		for _, p := range e.Ports {
			ports = append(ports, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
		}
	}
	sort.Strings(ports)
	if want := []string{"TCP/443", "TCP/53", "TCP/6443", "UDP/53"}; !slices.Equal(ports, want) {
		t.Errorf("%s: egress ports %v, want %v (DNS and the API server only)", np.Name, ports, want)
	}
}

func TestServerNetworkPolicy(t *testing.T) {
	np := into[networkingv1.NetworkPolicy](t, render(t).get(t, "NetworkPolicy", serverName))
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "http" {
		t.Fatalf("server ingress = %+v, want one rule on port http", np.Spec.Ingress)
	}
	from := np.Spec.Ingress[0].From
	if len(from) != 1 || from[0].PodSelector == nil || len(from[0].PodSelector.MatchLabels) != 0 || from[0].NamespaceSelector != nil {
		t.Errorf("server ingress peers = %+v, want only pods of the release namespace", from)
	}
	checkEgressOnlyDNSAndAPI(t, np)
}

func TestServiceMonitor(t *testing.T) {
	if objs := render(t).all("ServiceMonitor"); len(objs) != 0 {
		t.Fatal("ServiceMonitor rendered by default")
	}
	r := render(t, "--set", "controller.metrics.serviceMonitor.enabled=true",
		"--set", "controller.metrics.serviceMonitor.namespace=monitoring",
		"--set", "controller.metrics.serviceMonitor.labels.release=prometheus")
	sms := r.all("ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("want one ServiceMonitor, got %d", len(sms))
	}
	sm := sms[0]
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != "monitoring" || sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor meta: %s %s/%s labels %v", sm.GetAPIVersion(), sm.GetNamespace(), sm.GetName(), sm.GetLabels())
	}
	var spec struct {
		NamespaceSelector struct{ MatchNames []string } `json:"namespaceSelector"`
		Selector          struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct{ Port, Path, Interval, ScrapeTimeout string } `json:"endpoints"`
	}
	b, _ := json.Marshal(sm.Object["spec"])
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("ServiceMonitor namespaceSelector = %v, want the release namespace", spec.NamespaceSelector.MatchNames)
	}
	if len(spec.Endpoints) != 1 || spec.Endpoints[0].Port != "runtime" || spec.Endpoints[0].Path != "/metrics" ||
		spec.Endpoints[0].Interval != "30s" || spec.Endpoints[0].ScrapeTimeout != "10s" {
		t.Errorf("ServiceMonitor endpoints = %+v", spec.Endpoints)
	}
	// The selector must match the metrics Service and nothing else.
	for _, svc := range r.all("Service") {
		matches := true
		for k, v := range spec.Selector.MatchLabels {
			if svc.GetLabels()[k] != v {
				matches = false
			}
		}
		if matches != (svc.GetName() == metricsName) {
			t.Errorf("ServiceMonitor selector %v matches Service %s: %v", spec.Selector.MatchLabels, svc.GetName(), matches)
		}
	}
	// Enabling the ServiceMonitor does not open the NetworkPolicy.
	np := into[networkingv1.NetworkPolicy](t, r.get(t, "NetworkPolicy", controllerName))
	if len(np.Spec.Ingress) != 0 {
		t.Errorf("ServiceMonitor alone opened controller ingress: %+v", np.Spec.Ingress)
	}
}

type rule struct{ group, resource, verb, name string }

func rulesOf(t *testing.T, rules []rbacv1.PolicyRule) []rule {
	var out []rule
	for _, r := range rules {
		// A non-resource URL is a rule of group "url" (draforge serve reads kube-apiserver's
		// /metrics for its feature gates); no wildcard there either.
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				if strings.Contains(u, "*") || v == "*" || len(r.APIGroups)+len(r.Resources) != 0 {
					t.Errorf("wildcard or mixed non-resource rule %+v", r)
				}
				out = append(out, rule{"url", u, v, ""})
			}
		}
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						if g == "*" || res == "*" || v == "*" {
							t.Errorf("wildcard in rule %+v", r)
						}
						out = append(out, rule{g, res, v, n})
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}

func expand(spec map[string][]string) []rule {
	var out []rule
	for gr, verbs := range spec {
		g, rest, _ := strings.Cut(gr, "|")
		res, name, _ := strings.Cut(rest, "#")
		for _, v := range verbs {
			out = append(out, rule{g, res, v, name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}

// TestRBACAllocatorSimulator: with controller.allocator simulator the controller neither
// creates pods nor patches claims (no allocation pods, no finalizer to remove).
func TestRBACAllocatorSimulator(t *testing.T) {
	r := render(t, "--set", "controller.allocator=simulator")
	if got := flags(t, container(t, r.deployment(t, controllerName), "controller").Args[1:])["allocator"]; got != "simulator" {
		t.Errorf("--allocator = %q, want simulator", got)
	}
	got := rulesOf(t, into[rbacv1.ClusterRole](t, r.get(t, "ClusterRole", controllerName)).Rules)
	for _, rl := range got {
		if rl.resource == "pods" && rl.verb == "create" || rl.resource == "resourceclaims" && rl.verb == "patch" {
			t.Errorf("simulator mode grants %v", rl)
		}
	}
}

func TestRBACLeastPrivilege(t *testing.T) {
	r := render(t)
	lw := []string{"list", "watch"}
	cases := []struct {
		kind, name string
		want       map[string][]string // "group|resource#resourceName" → verbs
	}{
		{"ClusterRole", controllerName, map[string][]string{
			"draforge.oaslananka|simulateddevicepools":        {"get", "list", "watch", "patch"},
			"draforge.oaslananka|simulateddevicepools/status": {"patch"},
			"resource.k8s.io|resourceslices":                  {"list", "watch", "create", "update", "delete"},
			"resource.k8s.io|resourceclaims":                  {"get", "list", "watch", "patch"},
			"resource.k8s.io|resourceclaims/status":           {"update"},
			"resource.k8s.io|resourceclaims/binding":          {"update"},
			"resource.k8s.io|resourceclaims/driver":           {"arbitrary-node:update"},
			"resource.k8s.io|deviceclasses":                   lw,
			"resource.k8s.io|devicetaintrules":                lw,
			"|nodes":                                          {"get", "list", "watch", "patch"},
			"|nodes/status":                                   {"patch"},
			"|pods":                                           {"get", "list", "watch", "delete", "create"},
			"|pods/status":                                    {"patch"},
			"|events":                                         {"create", "patch"},
			"|namespaces":                                     {"list"},
			"apiextensions.k8s.io|customresourcedefinitions#simulateddevicepools.draforge.oaslananka": lw,
		}},
		{"Role", controllerName + "-leader-election", map[string][]string{
			"coordination.k8s.io|leases":                     {"create"},
			"coordination.k8s.io|leases#draforge-controller": {"get", "update"},
		}},
		// The node machine reads and writes node Leases only in kube-node-lease.
		{"Role", controllerName + "-node-lease", map[string][]string{
			"coordination.k8s.io|leases": {"list", "watch", "create", "patch"},
		}},
		{"ClusterRole", serverName, map[string][]string{
			"draforge.oaslananka|simulateddevicepools": lw,
			"resource.k8s.io|resourceslices":           lw,
			"resource.k8s.io|resourceclaims":           lw,
			"resource.k8s.io|deviceclasses":            lw,
			"resource.k8s.io|devicetaintrules":         lw,
			"scheduling.k8s.io|podgroups":              lw,
			"|nodes":                                   lw,
			"|pods":                                    lw,
			"|namespaces":                              {"list"},
			"apiextensions.k8s.io|customresourcedefinitions#simulateddevicepools.draforge.oaslananka": {"get"},
			"url|/metrics": {"get"},
		}},
	}
	for _, c := range cases {
		var got []rule
		switch c.kind {
		case "ClusterRole":
			got = rulesOf(t, into[rbacv1.ClusterRole](t, r.get(t, c.kind, c.name)).Rules)
		case "Role":
			role := into[rbacv1.Role](t, r.get(t, c.kind, c.name))
			want := namespace
			if strings.HasSuffix(c.name, "-node-lease") {
				want = "kube-node-lease"
			}
			if role.Namespace != want {
				t.Errorf("Role %s in %q, want %q", c.name, role.Namespace, want)
			}
			got = rulesOf(t, role.Rules)
		}
		if want := expand(c.want); !slices.Equal(got, want) {
			t.Errorf("%s %s rules:\n got %v\nwant %v", c.kind, c.name, got, want)
		}
	}
	if n := len(r.all("ClusterRole")) + len(r.all("Role")); n != 4 {
		t.Errorf("want exactly 4 roles, got %d", n)
	}
	for _, b := range r.all("ClusterRoleBinding") {
		crb := into[rbacv1.ClusterRoleBinding](t, b)
		if len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "ServiceAccount" || crb.Subjects[0].Name != crb.RoleRef.Name || crb.Subjects[0].Namespace != namespace {
			t.Errorf("ClusterRoleBinding %s binds %+v to %s", crb.Name, crb.Subjects, crb.RoleRef.Name)
		}
	}
}

// Every rule of the RBAC templates says why: a comment right above it (template actions
// between them aside).
func TestRBACRulesSayWhy(t *testing.T) {
	rules := 0
	for _, file := range []string{"rbac.yaml"} {
		b, err := os.ReadFile(filepath.Join(chartDir(t), "templates", file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			if !strings.HasPrefix(strings.TrimSpace(l), "- apiGroups:") {
				continue
			}
			rules++
			j := i - 1
			for j > 0 && strings.HasPrefix(strings.TrimSpace(lines[j]), "{{") {
				j--
			}
			if !strings.HasPrefix(strings.TrimSpace(lines[j]), "#") {
				t.Errorf("%s:%d: rule without a comment saying why", file, i+1)
			}
		}
	}
	if rules < 20 {
		t.Errorf("found only %d rules", rules)
	}
}

// controller.podNamespaces: pod writes leave the ClusterRole for a Role (and RoleBinding) in each
// listed namespace, and the controller is told the same list.
func TestRBACPodNamespaces(t *testing.T) {
	for _, allocator := range []string{"kube-scheduler", "simulator"} {
		t.Run(allocator, func(t *testing.T) {
			r := render(t, "--set", "controller.podNamespaces={team-b,team-a}", "--set", "controller.allocator="+allocator)
			if got := flags(t, container(t, r.deployment(t, controllerName), "controller").Args[1:])["pod-namespaces"]; got != "team-b,team-a" {
				t.Errorf("--pod-namespaces = %q, want team-b,team-a", got)
			}
			for _, rl := range rulesOf(t, into[rbacv1.ClusterRole](t, r.get(t, "ClusterRole", controllerName)).Rules) {
				if rl.resource == "pods" && !slices.Contains([]string{"get", "list", "watch"}, rl.verb) || rl.resource == "pods/status" {
					t.Errorf("ClusterRole still grants %v with controller.podNamespaces", rl)
				}
			}
			podVerbs := []string{"delete"}
			if allocator == "kube-scheduler" {
				podVerbs = append(podVerbs, "create")
			}
			var roles []string
			for _, o := range r.all("Role") {
				if o.GetName() != controllerName+"-pods" {
					continue
				}
				role := into[rbacv1.Role](t, o)
				roles = append(roles, role.Namespace)
				want := expand(map[string][]string{"|pods": podVerbs, "|pods/status": {"patch"}})
				if got := rulesOf(t, role.Rules); !slices.Equal(got, want) {
					t.Errorf("Role %s/%s rules:\n got %v\nwant %v", role.Namespace, role.Name, got, want)
				}
			}
			slices.Sort(roles)
			if !slices.Equal(roles, []string{"team-a", "team-b"}) {
				t.Errorf("pod Roles in %v, want team-a and team-b", roles)
			}
			var bound []string
			for _, o := range r.all("RoleBinding") {
				if o.GetName() != controllerName+"-pods" {
					continue
				}
				rb := into[rbacv1.RoleBinding](t, o)
				if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != controllerName+"-pods" || len(rb.Subjects) != 1 ||
					rb.Subjects[0].Name != controllerName || rb.Subjects[0].Namespace != namespace {
					t.Errorf("RoleBinding %s/%s: %+v -> %+v", rb.Namespace, rb.Name, rb.Subjects, rb.RoleRef)
				}
				bound = append(bound, rb.Namespace)
			}
			slices.Sort(bound)
			if !slices.Equal(bound, roles) {
				t.Errorf("pod RoleBindings in %v, Roles in %v", bound, roles)
			}
		})
	}
	// Unset: no flag, no pod Role.
	r := render(t)
	if _, ok := flags(t, container(t, r.deployment(t, controllerName), "controller").Args[1:])["pod-namespaces"]; ok {
		t.Error("--pod-namespaces passed without controller.podNamespaces")
	}
	for _, o := range r.all("Role") {
		if o.GetName() == controllerName+"-pods" {
			t.Errorf("pod Role in %s without controller.podNamespaces", o.GetNamespace())
		}
	}
}

// The admission policy is on by default, matches only the controller's ServiceAccount and is
// bound with Deny; rbac.admissionPolicy.enabled=false (or rbac.create=false) drops it.
func TestAdmissionPolicy(t *testing.T) {
	r := render(t)
	name := controllerName + "-scope"
	vap := into[admissionregistrationv1.ValidatingAdmissionPolicy](t, r.get(t, "ValidatingAdmissionPolicy", name))
	if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", vap.Spec.FailurePolicy)
	}
	if len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression !=
		"request.userInfo.username == 'system:serviceaccount:"+namespace+":"+controllerName+"'" {
		t.Errorf("matchConditions %+v: want only the controller's ServiceAccount", vap.Spec.MatchConditions)
	}
	var matched []string
	for _, rr := range vap.Spec.MatchConstraints.ResourceRules {
		for _, res := range rr.Resources {
			for _, op := range rr.Operations {
				matched = append(matched, res+":"+string(op))
			}
		}
	}
	slices.Sort(matched)
	if want := []string{"nodes/status:UPDATE", "nodes:UPDATE", "pods:CREATE", "pods:DELETE", "resourceslices:CREATE", "resourceslices:DELETE", "resourceslices:UPDATE"}; !slices.Equal(matched, want) {
		t.Errorf("matched %v, want %v", matched, want)
	}
	for _, v := range vap.Spec.Validations {
		if v.Reason == nil || *v.Reason != "Forbidden" || !strings.HasPrefix(v.Message, "the DRAForge controller ") {
			t.Errorf("validation %q: reason %v, message %q", v.Expression, v.Reason, v.Message)
		}
	}
	b := into[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, r.get(t, "ValidatingAdmissionPolicyBinding", name))
	if b.Spec.PolicyName != name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v", b.Spec)
	}
	for _, args := range [][]string{{"--set", "rbac.admissionPolicy.enabled=false"}, {"--set", "rbac.create=false"}} {
		r := render(t, args...)
		if n := len(r.all("ValidatingAdmissionPolicy")) + len(r.all("ValidatingAdmissionPolicyBinding")); n != 0 {
			t.Errorf("%v: %d admission policy objects rendered", args, n)
		}
	}
}

func TestExposureProfiles(t *testing.T) {
	t.Run("secure", func(t *testing.T) {
		r := render(t, "-f", profile(t, "values-secure.yaml"))
		ing := into[networkingv1.Ingress](t, r.get(t, "Ingress", serverName))
		if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "draforge-tls" {
			t.Errorf("secure Ingress TLS = %+v", ing.Spec.TLS)
		}
		be := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service
		if be.Name != "draforge-oauth2-proxy" || be.Port.Number != 4180 {
			t.Errorf("secure Ingress must route to the auth proxy, routes to %s:%d", be.Name, be.Port.Number)
		}
		c := container(t, r.deployment(t, serverName), "server")
		if got := flags(t, c.Args[1:])["cors-allowed-origins"]; got != "https://draforge.example.com" {
			t.Errorf("--cors-allowed-origins = %q", got)
		}
		if n := len(r.all("ServiceMonitor")); n != 1 {
			t.Errorf("secure profile: want the ServiceMonitor, got %d", n)
		}
	})
	t.Run("local-demo", func(t *testing.T) {
		r := render(t, "-f", profile(t, "values-local-demo.yaml"))
		ing := into[networkingv1.Ingress](t, r.get(t, "Ingress", serverName))
		if len(ing.Spec.TLS) != 0 || ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != serverName {
			t.Errorf("local-demo Ingress: TLS %+v backend %+v", ing.Spec.TLS, ing.Spec.Rules[0].HTTP.Paths[0].Backend)
		}
		if !strings.Contains(ing.Annotations["draforge.oaslananka/warning"], "unauthenticated") {
			t.Errorf("local-demo Ingress must carry the unauthenticated warning, annotations %v", ing.Annotations)
		}
		b, _ := os.ReadFile(profile(t, "values-local-demo.yaml"))
		if !strings.Contains(string(b), "UNAUTHENTICATED") || !strings.Contains(string(b), "NOT FOR PRODUCTION") {
			t.Error("values-local-demo.yaml must say it is unauthenticated and not for production")
		}
	})
	t.Run("gateway", func(t *testing.T) {
		r := render(t, "-f", profile(t, "values-secure.yaml"), "--set", "server.exposure.kind=gateway", "--set", "server.exposure.gateway.className=cilium")
		gw := r.get(t, "Gateway", serverName)
		ls, _, _ := unstructuredSlice(gw.Object, "spec", "listeners")
		if len(ls) != 1 || ls[0].(map[string]any)["protocol"] != "HTTPS" {
			t.Errorf("secure Gateway listeners = %v, want one HTTPS listener", ls)
		}
		route := r.get(t, "HTTPRoute", serverName)
		rules, _, _ := unstructuredSlice(route.Object, "spec", "rules")
		if fmt.Sprint(rules) != "[map[backendRefs:[map[name:draforge-oauth2-proxy port:4180]]]]" {
			t.Errorf("HTTPRoute rules = %v, want the auth proxy only", rules)
		}
	})
}

func TestReadinessGracePeriodZero(t *testing.T) {
	for _, v := range []string{"--set=server.lifecycle.readinessGracePeriod=0", "--set-string=server.lifecycle.readinessGracePeriod=0s"} {
		c := container(t, render(t, v).deployment(t, serverName), "server")
		if got := flags(t, c.Args[1:])["readiness-grace-period"]; got != "0s" {
			t.Errorf("%s: --readiness-grace-period = %q, want 0s", v, got)
		}
	}
}

// Every invalid input is rejected twice: by values.schema.json (the first error Helm shows)
// and, with --skip-schema-validation, by the fail guards in templates/validation.yaml.
func TestRejectsInvalidValues(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		schemaWants []string // substrings of the schema error
		guardWants  string   // substring of the validation.yaml message
	}{
		{"replicas without leader election",
			[]string{"--set", "controller.replicaCount=2", "--set", "controller.leaderElection.enabled=false"},
			[]string{"/controller/replicaCount", "maximum: got 2, want 1"},
			"controller.replicaCount is 2 but controller.leaderElection.enabled is false"},
		{"lease duration in words",
			[]string{"--set", "controller.leaderElection.leaseDuration=15 seconds"},
			[]string{"/controller/leaderElection/leaseDuration", "'15 seconds' does not match pattern"},
			`controller.leaderElection.leaseDuration is "15 seconds": it must be a Go-style duration`},
		{"service monitor without metrics service",
			[]string{"--set", "controller.metrics.serviceMonitor.enabled=true", "--set", "controller.metrics.service.enabled=false"},
			[]string{"/controller/metrics/service/enabled", "value must be true"},
			"controller.metrics.serviceMonitor.enabled is true but controller.metrics.service.enabled is false"},
		{"zero shutdown timeout",
			[]string{"--set", "server.lifecycle.shutdownTimeout=0s"},
			[]string{"/server/lifecycle/shutdownTimeout"},
			"server.lifecycle.shutdownTimeout must be positive"},
		{"zero readiness timeout",
			[]string{"--set", "controller.lifecycle.readinessTimeout=0ms"},
			[]string{"/controller/lifecycle/readinessTimeout"},
			"controller.lifecycle.readinessTimeout must be positive"},
		{"exposure without TLS and auth proxy",
			[]string{"--set", "server.exposure.enabled=true", "--set", "server.exposure.hostname=draforge.example.com"},
			[]string{"/server/exposure/tls/secretName", "/server/exposure/authProxy/service/name"},
			"server.exposure.profile secure needs TLS"},
		{"exposure without auth proxy",
			[]string{"--set", "server.exposure.enabled=true", "--set", "server.exposure.hostname=draforge.example.com", "--set", "server.exposure.tls.secretName=tls"},
			[]string{"/server/exposure/authProxy/service/name"},
			"server.exposure.profile secure needs an authentication proxy"},
		{"http CORS origin in the secure profile",
			[]string{"--set", "server.cors.allowedOrigins={http://draforge.example.com}"},
			[]string{"/server/cors/allowedOrigins/0", "does not match pattern '^https://"},
			`server.cors.allowedOrigins contains "http://draforge.example.com"`},
		{"wildcard CORS origin in the secure profile",
			[]string{"--set", "server.cors.allowedOrigins={https://*.example.com}"},
			[]string{"/server/cors/allowedOrigins/0"},
			`server.cors.allowedOrigins contains "https://*.example.com"`},
		{"unknown allocator",
			[]string{"--set", "controller.allocator=both"},
			[]string{"/controller/allocator", "value must be one of"},
			`controller.allocator is "both"`},
		{"pod namespace that is not a namespace name",
			[]string{"--set", "controller.podNamespaces={team-a,Team_B}"},
			[]string{"/controller/podNamespaces/1", "does not match pattern"},
			`controller.podNamespaces[1] is "Team_B": it must be a namespace name`},
		{"pod namespace twice",
			[]string{"--set", "controller.podNamespaces={team-a,team-a}"},
			[]string{"/controller/podNamespaces", "items at 0 and 1 are equal"},
			"controller.podNamespaces lists a namespace twice"},
		{"monitoring peer without namespace selector",
			[]string{"--set", "controller.metrics.networkPolicy.enabled=true"},
			[]string{"/controller/metrics/networkPolicy/namespaceSelector"},
			"controller.metrics.networkPolicy.namespaceSelector is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := renderErr(t, tc.args...)
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Errorf("want a schema error, got:\n%s", msg)
			}
			for _, w := range tc.schemaWants {
				if !strings.Contains(msg, w) {
					t.Errorf("schema error lacks %q:\n%s", w, msg)
				}
			}
			msg = renderErr(t, append(tc.args, "--skip-schema-validation")...)
			if !strings.Contains(msg, "validation.yaml") || !strings.Contains(msg, tc.guardWants) {
				t.Errorf("validation.yaml guard: want %q, got:\n%s", tc.guardWants, msg)
			}
		})
	}
}

// Rules a JSON schema cannot express are enforced only by validation.yaml.
func TestGuardOnlyRules(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "controller.leaderElection.renewDeadline=15s"},
			"controller.leaderElection.leaseDuration (15s) must be greater than controller.leaderElection.renewDeadline (15s)"},
		{[]string{"--set", "controller.leaderElection.retryPeriod=9s"},
			"controller.leaderElection.renewDeadline (10s) must be greater than 1.2 x controller.leaderElection.retryPeriod (9s)"},
		{[]string{"--set", "controller.terminationGracePeriodSeconds=5"},
			"controller.terminationGracePeriodSeconds (5) must be greater than controller.lifecycle.shutdownTimeout (5s)"},
		{[]string{"--set", "server.lifecycle.shutdownTimeout=1m", "--set", "server.terminationGracePeriodSeconds=45"},
			"server.terminationGracePeriodSeconds (45) must be greater than server.lifecycle.shutdownTimeout (1m)"},
		{[]string{"--set", "controller.metrics.serviceMonitor.enabled=true", "--set", "controller.metrics.serviceMonitor.scrapeTimeout=1m"},
			"scrapeTimeout (1m) must not exceed controller.metrics.serviceMonitor.interval (30s)"},
	} {
		if msg := renderErr(t, tc.args...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: want %q, got:\n%s", tc.args, tc.want, msg)
		}
	}
	// Compound durations are summed: 1m30s > 1m29s999ms.
	render(t, "--set", "server.lifecycle.shutdownTimeout=1m29s999ms", "--set", "server.terminationGracePeriodSeconds=90")
}

// binaryFlags builds cmd/draforge and returns the flags its subcommand's --help lists.
func binaryFlags(t *testing.T, subcommand string) map[string]bool {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/draforge")
	}
	bin := filepath.Join(t.TempDir(), "draforge")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/draforge")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build draforge: %v\n%s", err, out)
	}
	help, err := exec.CommandContext(t.Context(), bin, subcommand, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("draforge %s --help: %v\n%s", subcommand, err, help)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	return known
}

// Every flag the chart passes to the controller must exist in the binary.
func TestControllerArgsAreBinaryFlags(t *testing.T) {
	known := binaryFlags(t, "controller")
	c := container(t, render(t, "-f", profile(t, "values-secure.yaml")).deployment(t, controllerName), "controller")
	for name := range flags(t, c.Args[1:]) {
		if !known[name] {
			t.Errorf("chart passes --%s, which draforge controller does not define", name)
		}
	}
}

func unstructuredSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

// The operations guide documents these values with these defaults; renaming or changing one
// breaks operators' values files.
func TestValuesMatchOperationsGuide(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	lookup := func(path string) (any, bool) {
		var cur any = values
		for _, k := range strings.Split(path, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[k]; !ok {
				return nil, false
			}
		}
		return cur, true
	}
	for path, want := range map[string]any{
		"server.lifecycle.readinessTimeout":                  "2s",
		"server.lifecycle.readinessGracePeriod":              "15s",
		"server.lifecycle.shutdownTimeout":                   "5s",
		"controller.lifecycle.readinessTimeout":              "2s",
		"controller.lifecycle.readinessGracePeriod":          "15s",
		"controller.lifecycle.shutdownTimeout":               "5s",
		"controller.replicaCount":                            float64(2),
		"controller.leaderElection.enabled":                  true,
		"controller.leaderElection.leaseDuration":            "15s",
		"controller.leaderElection.renewDeadline":            "10s",
		"controller.leaderElection.retryPeriod":              "2s",
		"controller.metrics.port":                            float64(8082),
		"controller.metrics.service.enabled":                 true,
		"controller.metrics.networkPolicy.enabled":           false,
		"controller.metrics.networkPolicy.namespaceSelector": map[string]any{},
		"controller.metrics.networkPolicy.podSelector":       map[string]any{},
		"controller.metrics.serviceMonitor.enabled":          false,
		"controller.metrics.serviceMonitor.namespace":        "",
		"controller.metrics.serviceMonitor.labels":           map[string]any{},
		"controller.metrics.serviceMonitor.interval":         "30s",
		"controller.metrics.serviceMonitor.scrapeTimeout":    "10s",
		"server.exposure.enabled":                            false,
		"server.cors.allowedOrigins":                         []any{},
	} {
		got, ok := lookup(path)
		if !ok {
			t.Errorf("values.yaml has no %s", path)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v (operations guide)", path, got, want)
		}
	}
}

func TestKubeVersionConstraint(t *testing.T) {
	msg := renderErr(t, "--kube-version", "1.33.4")
	if !strings.Contains(msg, "kubeVersion") {
		t.Errorf("want a kubeVersion error for 1.33, got:\n%s", msg)
	}
	render(t, "--kube-version", "1.34.0")
}
