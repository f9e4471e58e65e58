package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// applyFiles creates or updates every document of the files with server-side apply (field
// manager "e2e"), in file order. Namespaced objects without a namespace go to ns.
func (e *env) applyFiles(t *testing.T, ns string, files ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range decodeDocs(t, b) {
			out = append(out, e.apply(t, ns, u))
		}
	}
	return out
}

func decodeDocs(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func (e *env) apply(t *testing.T, ns string, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("map %s: %v", gvk, err)
	}
	ri := e.Dynamic.Resource(m.Resource)
	var api interface {
		Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error)
	} = ri
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		api = ri.Namespace(u.GetNamespace())
	}
	var got *unstructured.Unstructured
	// A namespace an earlier test deleted may still be terminating: wait for it to go.
	eventually(t, 60*time.Second, func() (bool, string) {
		var err error
		got, err = api.Apply(t.Context(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e", Force: true})
		if err != nil && !strings.Contains(err.Error(), "because it is being terminated") {
			t.Fatalf("apply %s %s: %v", gvk.Kind, u.GetName(), err)
		}
		return err == nil, fmt.Sprint(err)
	})
	return got
}

// setup installs the CRDs and the simulated nodes of examples/nodes.yaml (both idempotent).
func (e *env) setup(t *testing.T) {
	t.Helper()
	installCRDs(t, e)
	e.applyFiles(t, "", "../../examples/nodes.yaml")
}

// controller is a running `draforge controller` process.
type controller struct {
	cmd     *exec.Cmd
	Addr    string
	log     *bytes.Buffer
	logMu   *sync.Mutex
	exited  chan struct{}
	exitErr error
}

// startController runs the controller against the package cluster; it is killed at test end.
func startController(t *testing.T, args ...string) *controller {
	t.Helper()
	addr := freeAddr(t)
	c := &controller{Addr: addr, log: &bytes.Buffer{}, logMu: &sync.Mutex{}, exited: make(chan struct{})}
	c.cmd = exec.Command(draforgeBinary(t), append([]string{"controller", "--kubeconfig", kubeconfigPath,
		"--runtime-address", addr, "--log-level", "debug"}, args...)...)
	pr, pw := io.Pipe()
	c.cmd.Stdout, c.cmd.Stderr = pw, pw
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.logMu.Lock()
			c.log.WriteString(sc.Text() + "\n")
			c.logMu.Unlock()
		}
	}()
	go func() {
		c.exitErr = c.cmd.Wait()
		pw.Close()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.signal(syscall.SIGKILL)
		<-c.exited
		if t.Failed() {
			t.Logf("controller %s log:\n%s", addr, c.Log())
		}
	})
	eventually(t, 60*time.Second, func() (bool, string) {
		code, body := c.get("/readyz")
		return code == http.StatusOK, fmt.Sprintf("readyz %d %s", code, body)
	})
	return c
}

func (c *controller) signal(s syscall.Signal) {
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Signal(s)
	}
}

func (c *controller) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// gauge reads one unlabelled series; -1 when the endpoint or series is missing.
func (c *controller) gauge(name string) float64 {
	code, body := c.get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, "\n"+name+" ") {
		return -1
	}
	return sumMetric(body, name)
}

// Log returns the process output so far.
func (c *controller) Log() string {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return c.log.String()
}

func (c *controller) get(path string) (int, string) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + c.Addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric sums the samples of a metric whose labels contain every given label="value" pair.
func (c *controller) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	code, body := c.get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return sumMetric(body, name, labels...)
}

func sumMetric(body, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// writes is the number of mutating requests the controller made (client-side attribution).
func (c *controller) writes(t *testing.T) float64 {
	t.Helper()
	var n float64
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		n += c.metric(t, "rest_client_requests_total", `method="`+m+`"`)
	}
	return n
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
