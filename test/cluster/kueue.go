package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// KueueVersion is the Kueue release the kueue profile runs; its binary is built from the Go
// module proxy into <cache>/kueue-<version>, its CRDs and webhook configurations are read from
// the module (config/components).
const KueueVersion = "v0.19.2"

// KueueDevices maps DeviceClasses to the resource name a ClusterQueue's quota counts them by
// (Kueue's resources.deviceClassMappings, keps/2941-DRA): every device a claim requests through
// one of the classes counts one unit.
type KueueDevices struct {
	Resource      string
	DeviceClasses []string
}

// KueueDeviceMappings are the kueue profile's mappings: the DeviceClasses of DRAForge's
// examples and of the real drivers its profiles imitate, all counted as GPUs. Kueue reads its
// configuration once at start, so a class outside this list is not counted by quota.
var KueueDeviceMappings = []KueueDevices{{
	Resource: "draforge.oaslananka/gpu",
	DeviceClasses: []string{"draforge-kueue", "draforge-replay-gpu", "gpu.example.com", "gpu.nvidia.com", "mig.nvidia.com",
		"gpu.intel.com", "gpu.amd.com", "tpu.google.com"},
}}

// kueueWebhookResources are the resources whose Kueue webhooks are registered: Kueue's own
// objects and batch/v1 Jobs, the one integration the profile enables. A webhook of an
// integration Kueue does not run would answer 404 and, failing closed, refuse every pod or
// Deployment.
var kueueWebhookResources = []string{"jobs", "clusterqueues", "cohorts", "resourceflavors", "workloads", "workloads/status"}

// KueueBinary returns the kueue binary and the directory of the sigs.k8s.io/kueue module,
// building the binary into cacheDir when absent.
func KueueBinary(ctx context.Context, cacheDir string, log io.Writer) (bin, module string, err error) {
	root := filepath.Join(cacheDir, "kueue-"+KueueVersion)
	bin = filepath.Join(root, "kueue")
	if !fileExists(bin) {
		fmt.Fprintf(log, "building kueue %s (first run only, several minutes)\n", KueueVersion)
		if err := goInstall(ctx, "sigs.k8s.io/kueue/cmd/kueue@"+KueueVersion, root, log); err != nil {
			return "", "", err
		}
	}
	module, err = moduleDir(ctx, "sigs.k8s.io/kueue@"+KueueVersion, log)
	return bin, module, err
}

var (
	nsGVR       = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	secretGVR   = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	mutatingGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	validateGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
)

// Kueue's names for its namespace, webhook Service and certificate Secret (config/default).
const (
	kueueNamespace     = "kueue-system"
	kueueWebhookSvc    = "kueue-webhook-service"
	kueueWebhookSecret = "kueue-webhook-server-cert"
)

// startKueue runs Kueue beside the control plane as its release manifests install it
// in-cluster: its CRDs with their conversion webhooks, its webhook configurations, and the
// manager with a configuration of DeviceClass mappings and the batch/job integration. Only the
// address differs: the webhooks are served on loopback instead of through a Service. Kueue's
// internal certificate management stays on, as released; the harness seeds its Secret with a
// certificate that is valid both for the Service name Kueue checks and for 127.0.0.1, which
// Kueue keeps and serves.
func (c *Cluster) startKueue(ctx context.Context, bin, module string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.Dir, "kueue")
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o755); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	webhook, health := ports[0], ports[1]
	certs, err := kueueCerts()
	if err != nil {
		return err
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": kueueNamespace}}}
	if err := apply(ctx, dyn, nsGVR, ns); err != nil {
		return err
	}
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": kueueWebhookSecret, "namespace": kueueNamespace}, "data": certs.secret()}}
	if err := apply(ctx, dyn, secretGVR, secret); err != nil {
		return err
	}
	components := filepath.Join(module, "config", "components")
	n, err := applyKueueCRDs(ctx, dyn, filepath.Join(components, "crd"), webhook, certs.caPEM)
	if err != nil {
		return err
	}
	if err := waitEstablished(ctx, dyn, n); err != nil {
		return err
	}
	// Before Kueue starts: its certificate management injects the CA into these by name and
	// waits for them. Until Kueue serves, a Job create fails (failurePolicy Fail), as in-cluster.
	if err := registerWebhooks(ctx, dyn, filepath.Join(components, "webhook", "manifests.yaml"), webhook, certs.caPEM); err != nil {
		return err
	}
	// In-cluster the kubelet mounts the Secret into the manager's pod, and Kueue waits for the
	// files; here they are written as that volume would hold them.
	for name, data := range certs.files() {
		if err := os.WriteFile(filepath.Join(dir, "certs", name), data, 0o600); err != nil {
			return err
		}
	}
	config := filepath.Join(dir, "config.yaml")
	if err := writeKueueConfig(config, filepath.Join(dir, "certs"), webhook, health); err != nil {
		return err
	}
	p := &Proc{Name: "kueue", Bin: bin, Args: []string{"--config=" + config, "--kubeconfig=" + c.Kubeconfig,
		// The visibility API server needs an APIService and a port of its own; nothing here
		// reads pending workloads through it.
		"--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2"}}
	if err := c.start(p); err != nil {
		return err
	}
	c.Procs = append(c.Procs, p)
	if err := c.saveState(); err != nil {
		return err
	}
	return waitKueue(ctx, p, health, webhook, certs.caPEM)
}

func writeKueueConfig(path, certDir string, webhook, health int) error {
	var mappings []map[string]any
	for _, m := range KueueDeviceMappings {
		mappings = append(mappings, map[string]any{"name": m.Resource, "deviceClassNames": m.DeviceClasses})
	}
	doc, err := yaml.Marshal(map[string]any{
		"apiVersion": "config.kueue.x-k8s.io/v1beta2",
		"kind":       "Configuration",
		"namespace":  kueueNamespace,
		"health":     map[string]any{"healthProbeBindAddress": "127.0.0.1:" + strconv.Itoa(health)},
		// Kueue serves metrics over TLS with authorization; nothing here reads them.
		"metrics": map[string]any{"bindAddress": "0"},
		"webhook": map[string]any{"host": "127.0.0.1", "port": webhook, "certDir": certDir},
		// One local manager: no Lease to win before it acts.
		"leaderElection": map[string]any{"leaderElect": false},
		"internalCertManagement": map[string]any{"enable": true,
			"webhookServiceName": kueueWebhookSvc, "webhookSecretName": kueueWebhookSecret},
		"integrations": map[string]any{"frameworks": []string{"batch/job"}},
		"resources":    map[string]any{"deviceClassMappings": mappings},
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, doc, 0o644)
}

// kueuePKI is the certificate Kueue's webhooks serve and the CA that signed it.
type kueuePKI struct {
	caPEM, caKeyPEM, certPEM, keyPEM []byte
}

// files are the Secret's keys and values.
func (k kueuePKI) files() map[string][]byte {
	return map[string][]byte{"ca.crt": k.caPEM, "ca.key": k.caKeyPEM, "tls.crt": k.certPEM, "tls.key": k.keyPEM}
}

func (k kueuePKI) secret() map[string]any {
	out := map[string]any{}
	for name, data := range k.files() {
		out[name] = base64.StdEncoding.EncodeToString(data)
	}
	return out
}

// kueueCerts makes the certificates Kueue's certificate rotator (open-policy-agent
// cert-controller) accepts as valid and keeps: a CA valid for the name "kueue-ca" and a serving
// certificate valid for <service>.<namespace>.svc, both for longer than its 90-day lookahead,
// and here also for 127.0.0.1, the address the API server calls.
func kueueCerts() (kueuePKI, error) {
	ca, err := newCert(nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "kueue-ca", Organization: []string{"kueue"}}, DNSNames: []string{"kueue-ca"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return kueuePKI{}, err
	}
	serving, err := newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: kueueWebhookSvc + "." + kueueNamespace + ".svc"},
		DNSNames:    []string{kueueWebhookSvc + "." + kueueNamespace + ".svc", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return kueuePKI{}, err
	}
	return kueuePKI{caPEM: certPEM(ca.cert), caKeyPEM: keyPEM(ca.key), certPEM: certPEM(serving.cert), keyPEM: keyPEM(serving.key)}, nil
}

// applyKueueCRDs applies Kueue's CRDs with the conversion webhooks its kustomization patches in
// (crd/kustomization.yaml's patches), pointed at the loopback server; it returns how many.
func applyKueueCRDs(ctx context.Context, dyn dynamic.Interface, dir string, port int, ca []byte) (int, error) {
	kustomization, err := readObjects(filepath.Join(dir, "kustomization.yaml"))
	if err != nil || len(kustomization) != 1 {
		return 0, fmt.Errorf("kueue crd kustomization: %v", err)
	}
	conversion := map[string]map[string]any{}
	patches, _, _ := unstructured.NestedSlice(kustomization[0].Object, "patches")
	for _, p := range patches {
		path, _, _ := unstructured.NestedString(p.(map[string]any), "path")
		objs, err := readObjects(filepath.Join(dir, path))
		if err != nil {
			return 0, err
		}
		for _, o := range objs {
			conv, found, _ := unstructured.NestedMap(o.Object, "spec", "conversion")
			if !found {
				continue // a CA-injection patch: the conversion webhook below carries the CA
			}
			_ = unstructured.SetNestedMap(conv, map[string]any{
				"url":      fmt.Sprintf("https://127.0.0.1:%d/convert", port),
				"caBundle": base64.StdEncoding.EncodeToString(ca),
			}, "webhook", "clientConfig")
			conversion[o.GetName()] = conv
		}
	}
	bases, err := filepath.Glob(filepath.Join(dir, "bases", "*.yaml"))
	if err != nil || len(bases) == 0 {
		return 0, fmt.Errorf("kueue CRDs in %s: %v", dir, err)
	}
	for _, f := range bases {
		objs, err := readObjects(f)
		if err != nil {
			return 0, err
		}
		for _, o := range objs {
			if conv, ok := conversion[o.GetName()]; ok {
				_ = unstructured.SetNestedMap(o.Object, conv, "spec", "conversion")
			}
			if err := apply(ctx, dyn, crdGVR, o); err != nil {
				return 0, err
			}
		}
	}
	return len(bases), nil
}

// waitKueue waits until Kueue's readiness probe passes and its webhook server answers TLS with
// the certificate made for it.
func waitKueue(ctx context.Context, p *Proc, health, webhook int, ca []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		ready := err == nil && resp.StatusCode == http.StatusOK
		if resp != nil {
			resp.Body.Close()
		}
		if ready {
			conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(webhook), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
			if err == nil {
				return conn.Close()
			}
		}
		if syscall.Kill(p.Pid, 0) != nil {
			return fmt.Errorf("kueue exited; last lines of its log:\n%s", logTail(p.Log, 30))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kueue not ready after 2m; last lines of its log:\n%s", logTail(p.Log, 30))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// registerWebhooks applies Kueue's webhook configurations with each kept webhook pointed at
// the loopback server (the release points them at a Service) and trusting ca.
func registerWebhooks(ctx context.Context, dyn dynamic.Interface, manifests string, port int, ca []byte) error {
	objs, err := readObjects(manifests)
	if err != nil {
		return err
	}
	for _, o := range objs {
		gvr := validateGVR
		if o.GetKind() == "MutatingWebhookConfiguration" {
			gvr = mutatingGVR
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		var kept []any
		for _, h := range hooks {
			h := h.(map[string]any)
			if !servesKept(h) {
				continue
			}
			if coversJobs(h) {
				// config/components/webhook/kustomization.yaml gives the integrations' webhooks
				// this selector: Kueue leaves the system namespaces alone.
				h["namespaceSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
					"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system", kueueNamespace}}}}
			}
			path, _, _ := unstructured.NestedString(h, "clientConfig", "service", "path")
			h["clientConfig"] = map[string]any{
				"url":      fmt.Sprintf("https://127.0.0.1:%d%s", port, path),
				"caBundle": ca, // []byte marshals to base64, as caBundle is written
			}
			kept = append(kept, h)
		}
		raw, err := json.Marshal(kept)
		if err != nil {
			return err
		}
		var hooksJSON []any
		if err := json.Unmarshal(raw, &hooksJSON); err != nil {
			return err
		}
		o.Object["webhooks"] = hooksJSON
		o.SetName("kueue-" + o.GetName())
		if err := apply(ctx, dyn, gvr, o); err != nil {
			return err
		}
	}
	return nil
}

func servesKept(hook map[string]any) bool {
	rules, _, _ := unstructured.NestedSlice(hook, "rules")
	for _, r := range rules {
		res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
		for _, x := range res {
			if !slices.Contains(kueueWebhookResources, x) {
				return false
			}
		}
	}
	return len(rules) > 0
}

func coversJobs(hook map[string]any) bool {
	rules, _, _ := unstructured.NestedSlice(hook, "rules")
	for _, r := range rules {
		res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
		if slices.Contains(res, "jobs") {
			return true
		}
	}
	return false
}

// readObjects reads the objects of a multi-document YAML file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if obj != nil {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// apply server-side applies an object.
func apply(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, o *unstructured.Unstructured) error {
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	force := true
	_, err = dyn.Resource(gvr).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "draforge-localcluster", Force: &force})
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// waitEstablished waits until the kueue.x-k8s.io CRDs (want of them) are established.
func waitEstablished(ctx context.Context, dyn dynamic.Interface, want int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, crd := range list.Items {
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				cond := cond.(map[string]any)
				if strings.HasSuffix(group, "kueue.x-k8s.io") && cond["type"] == "Established" && cond["status"] == "True" {
					n++
				}
			}
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d kueue CRDs established after 1m", n, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
