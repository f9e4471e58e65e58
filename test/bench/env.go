// Package bench measures DRAForge against baselines on a real local control plane
// (test/cluster): slice publication against a raw client-go loop, claim allocation against
// kube-scheduler and raw status writes, client-side API cost per managed object, cache memory
// per object and allocation latency under churn. cmd/benchreport runs it all and prints a
// table of ratios; `go tool task bench` runs that program. Plain `go test ./test/bench/` only
// runs quick in-process checks.
package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// QPS and Burst are the client limits of every measured client: the controller
// (--kube-api-qps/--kube-api-burst), kube-scheduler and the raw baselines.
const (
	QPS   = 200
	Burst = 400
)

// Env is a running local control plane plus clients and the controller binary.
type Env struct {
	Root    string
	Cluster *cluster.Cluster
	// Setup is a fast client for preparing objects and watching; it is never measured.
	Setup    kubernetes.Interface
	SetupDyn dynamic.Interface
	// Measured has the same QPS/burst as the controller, for the raw baselines.
	Measured kubernetes.Interface
	Bin      string
	Log      io.Writer

	mu    sync.Mutex
	procs int
}

// ModuleRoot finds the directory of go.mod above the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Start builds the controller, starts etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager and installs the CRDs. The scheduler and the controller manager are
// stopped again right away and run only in the phases that need them (allocation by
// kube-scheduler; simulated node heartbeats): the controller manager's node lifecycle
// controller would otherwise mark the other phases' plain, heartbeat-less nodes Unknown and
// taint them mid-measurement.
func Start(ctx context.Context, dir string, log io.Writer) (*Env, error) {
	bin := filepath.Join(dir, "draforge")
	if err := BuildController(ctx, bin, log); err != nil {
		return nil, err
	}
	qps := []string{"--kube-api-qps=" + strconv.Itoa(QPS), "--kube-api-burst=" + strconv.Itoa(Burst)}
	e, err := StartCluster(ctx, filepath.Join(dir, "cluster"), bin, log, map[cluster.Component][]string{cluster.Scheduler: qps})
	if err != nil {
		return nil, err
	}
	for _, x := range cluster.Workloads {
		if err := e.Cluster.StopComponent(x); err != nil {
			e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// BuildController builds cmd/draforge into bin.
func BuildController(ctx context.Context, bin string, log io.Writer) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	fmt.Fprintln(log, "bench: building cmd/draforge")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/draforge")
	build.Dir, build.Stdout, build.Stderr = root, log, log
	if err := build.Run(); err != nil {
		return fmt.Errorf("build draforge: %w", err)
	}
	return nil
}

// StartCluster starts etcd, kube-apiserver, kube-scheduler and kube-controller-manager (with
// the extra arguments per component) in dir, left running, and installs the CRDs; bin is a
// built draforge binary.
func StartCluster(ctx context.Context, dir, bin string, log io.Writer, args map[cluster.Component][]string) (*Env, error) {
	return StartClusterProfile(ctx, dir, bin, log, args, "")
}

// StartClusterProfile is StartCluster with a control plane profile (cluster.Profiles).
func StartClusterProfile(ctx context.Context, dir, bin string, log io.Writer, args map[cluster.Component][]string, profile string) (*Env, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	e := &Env{Root: root, Log: log, Bin: bin}
	fmt.Fprintln(log, "bench: starting the local control plane")
	profileDir := os.Getenv(ProfileDirEnv)
	var schedulerAddr string
	if profileDir != "" {
		args = maps.Clone(args)
		if args == nil {
			args = map[cluster.Component][]string{}
		}
		// Later flags win: this overrides the cluster's --profiling=false.
		args[cluster.APIServer] = append(slices.Clone(args[cluster.APIServer]), "--profiling=true")
		// kube-scheduler serves nothing by default here (--secure-port=0): open its port to
		// unauthenticated profile reads on loopback.
		if schedulerAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		host, port, _ := net.SplitHostPort(schedulerAddr)
		args[cluster.Scheduler] = append(slices.Clone(args[cluster.Scheduler]), "--secure-port="+port, "--bind-address="+host,
			"--cert-dir="+filepath.Join(dir, "kube-scheduler-certs"), "--profiling=true",
			"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*")
	}
	c, err := cluster.Start(ctx, cluster.Options{Dir: dir, Log: log, Extra: cluster.Workloads, Args: args, Profile: profile})
	if err != nil {
		return nil, err
	}
	e.Cluster = c
	cfg, err := inlineConfig(c.Kubeconfig)
	if err != nil {
		c.Stop()
		return nil, err
	}
	setup := rest.CopyConfig(cfg)
	setup.QPS, setup.Burst = 2000, 4000
	measured := asController(cfg, QPS, Burst)
	e.Setup = kubernetes.NewForConfigOrDie(setup)
	e.SetupDyn = dynamic.NewForConfigOrDie(setup)
	e.Measured = kubernetes.NewForConfigOrDie(measured)
	if err := e.installCRDs(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if profileDir != "" {
		// Named after the cluster's parent directory: the workloads sides each run one.
		name := filepath.Base(filepath.Dir(dir))
		go e.profileAPIServer(ctx, profileDir, name+"-kube-apiserver")
		go profileScheduler(ctx, profileDir, name+"-kube-scheduler", schedulerAddr)
	}
	return e, nil
}

// profileAPIServer saves kube-apiserver's CPU profile in 5 s pieces (<name>-N.pprof) until ctx
// ends or the API server stops answering.
func (e *Env) profileAPIServer(ctx context.Context, dir, name string) {
	saveProfiles(ctx, dir, name, func(path string) ([]byte, error) {
		return e.Setup.CoreV1().RESTClient().Get().RequestURI(path).Timeout(30 * time.Second).DoRaw(ctx)
	}, nil)
}

// profileScheduler saves kube-scheduler's CPU profile from addr (its self-signed serving
// certificate) in 5 s pieces, each followed by its queue metrics (NAME-N.metrics: pending pods
// per queue, the gated ones among them, attempts by result): how many pods wait is what its
// event handlers' cost grows with.
func profileScheduler(ctx context.Context, dir, name, addr string) {
	get := httpGetter(&http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}, "https://"+addr)
	saveProfiles(ctx, dir, name, get, func(i int) {
		m, err := get("/metrics")
		if err != nil {
			return
		}
		var keep []string
		for _, l := range strings.Split(string(m), "\n") {
			if strings.HasPrefix(l, "scheduler_pending_pods") || strings.HasPrefix(l, "scheduler_schedule_attempts_total") {
				keep = append(keep, l)
			}
		}
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03d.metrics", name, i)), []byte(time.Now().Format(time.RFC3339)+"\n"+strings.Join(keep, "\n")+"\n"), 0o644)
	})
}

// saveProfiles saves the CPU profiles get serves in 5 s pieces (<name>-N.pprof in dir), calling
// after (if not nil) with each piece's number, until ctx ends or the process stops answering.
// A process that does not answer yet is waited for, up to a minute.
func saveProfiles(ctx context.Context, dir, name string, get func(path string) ([]byte, error), after func(i int)) {
	for i, wait := 0, time.Now().Add(time.Minute); ctx.Err() == nil; {
		b, err := get("/debug/pprof/profile?seconds=5")
		if err != nil {
			if i > 0 || time.Now().After(wait) {
				return // stopped, or never started
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03d.pprof", name, i)), b, 0o644)
		if after != nil {
			after(i)
		}
		i++
	}
}

// httpGetter GETs base+path with client; an answer other than 200 is an error.
func httpGetter(client *http.Client, base string) func(path string) ([]byte, error) {
	return func(path string) ([]byte, error) {
		resp, err := client.Get(base + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s", path, resp.Status)
		}
		return b, err
	}
}

// inlineConfig is the client config of kubeconfig with its certificate files read into it: a
// config naming files makes client-go watch them for rotation, and those watchers outlive the
// control plane whose directory is removed, logging an error every half minute for the rest of
// the run.
func inlineConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, err
	}
	cfg.CertFile, cfg.KeyFile, cfg.CAFile = "", "", ""
	return cfg, nil
}

// asController is cfg with the QPS and burst given and the wire format of the controller's typed
// client (clusterview.KubeConfig, protobuf): the raw baselines write what the controller writes the
// way it writes it.
func asController(cfg *rest.Config, qps, burst int) *rest.Config {
	c := clusterview.KubeConfig(cfg)
	c.QPS, c.Burst = float32(qps), burst
	return c
}

// Stop ends every process and removes the cluster state.
func (e *Env) Stop() {
	if e.Cluster != nil {
		_ = e.Cluster.Stop()
	}
}

func (e *Env) installCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(e.Root, "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs under deploy/crds: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return err
			}
			if obj == nil {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			if _, err := e.SetupDyn.Resource(gvr.CustomResourceDefinitions).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "bench", Force: true}); err != nil {
				return fmt.Errorf("apply CRD %s: %w", u.GetName(), err)
			}
			if err := poll(ctx, 60*time.Second, func() (bool, error) {
				got, err := e.SetupDyn.Resource(gvr.CustomResourceDefinitions).Get(ctx, u.GetName(), metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
				for _, c := range conds {
					m, _ := c.(map[string]any)
					if m["type"] == "Established" && m["status"] == "True" {
						return true, nil
					}
				}
				return false, nil
			}); err != nil {
				return fmt.Errorf("CRD %s not established: %w", u.GetName(), err)
			}
		}
	}
	// Discovery of the new resource may lag behind Established.
	return poll(ctx, 30*time.Second, func() (bool, error) {
		_, err := e.SetupDyn.Resource(gvr.SimulatedDevicePools).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// NodeName is the name of the i-th simulated node.
func NodeName(i int) string { return fmt.Sprintf("bench-node-%04d", i) }

// CreateNodes creates nodes [from, to) with the labels, allocatable resources for pods and a
// Ready condition (no kubelet runs; kube-scheduler only needs the object).
func (e *Env) CreateNodes(ctx context.Context, from, to int, labels map[string]string) error {
	return parallel(ctx, to-from, 32, func(ctx context.Context, k int) error {
		i := from + k
		res := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods: resource.MustParse("110"),
		}
		l := map[string]string{"kubernetes.io/hostname": NodeName(i)}
		for k, v := range labels {
			l[k] = v
		}
		n, err := e.Setup.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName(i), Labels: l}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}}
		if n, err = e.Setup.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		// The TaintNodesByCondition admission plugin taints new nodes not-ready; the node
		// lifecycle controller would lift it, but it does not run here.
		if len(n.Spec.Taints) > 0 {
			n.Spec.Taints = nil
			_, err = e.Setup.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	})
}

// Namespace creates a namespace and its default ServiceAccount (kube-controller-manager does
// not run in most phases, and pods need the ServiceAccount to be admitted).
func (e *Env) Namespace(ctx context.Context, name string) error {
	_, err := e.Setup.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = e.Setup.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// DeviceClass creates a class selecting the simulated devices whose "scenario" attribute is
// scenario.
func (e *Env) DeviceClass(ctx context.Context, name, scenario string) error {
	d := simdevice.DefaultDriverName
	_, err := e.Setup.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].scenario == %q`, d, d, scenario),
		}}}},
	}, metav1.CreateOptions{})
	return err
}

// PoolObject is a SimulatedDevicePool with deviceType gpu and attribute scenario; it targets
// nodes by selector, or by name when targets is set.
func PoolObject(ns, name, scenario string, devices int, selector map[string]string, targets []string) *unstructured.Unstructured {
	spec := map[string]any{
		"deviceType": "gpu", "deviceCount": int64(devices),
		"attributes": map[string]any{"scenario": map[string]any{"string": scenario}},
	}
	if len(selector) > 0 {
		sel := map[string]any{}
		for k, v := range selector {
			sel[k] = v
		}
		spec["nodeSelector"] = sel
	}
	if len(targets) > 0 {
		var t []any
		for _, n := range targets {
			t = append(t, n)
		}
		spec["targetNodes"] = t
	}
	return pooltest.Object(ns, name, spec)
}

// PoolReady reports whether the pool shows Ready=True for its current generation.
func PoolReady(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		if m["type"] == "Ready" && m["status"] == "True" && g == u.GetGeneration() {
			return true
		}
	}
	return false
}

// Claim is a claim for one device of class.
func Claim(ns, name, class string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
}

// CreateClaims creates claims name-0000..name-(n-1) with the setup client.
func (e *Env) CreateClaims(ctx context.Context, ns, prefix, class string, n int) error {
	return parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		_, err := e.Setup.ResourceV1().ResourceClaims(ns).Create(ctx, Claim(ns, fmt.Sprintf("%s-%04d", prefix, i), class), metav1.CreateOptions{})
		return err
	})
}

// Controller is a `draforge controller` process spawned under the cluster.
type Controller struct {
	Name string
	Addr string
	// DebugAddr is its --debug-address (Go profiles), a free loopback port: bench controllers
	// run side by side, and the default port would collide.
	DebugAddr string
	Log       string
	// Pid is the process id (for /proc readings).
	Pid int
	e   *Env
}

// StartController spawns the controller with the measured QPS/burst and waits for /readyz.
func (e *Env) StartController(ctx context.Context, args ...string) (*Controller, error) {
	return e.StartControllerWith(ctx, e.Cluster.Kubeconfig, args...)
}

// StartControllerWith spawns the controller talking to the API server through kubeconfig;
// args come last, so they may override the measured QPS/burst.
func (e *Env) StartControllerWith(ctx context.Context, kubeconfig string, args ...string) (*Controller, error) {
	e.mu.Lock()
	e.procs++
	name := fmt.Sprintf("draforge-controller-%d", e.procs)
	e.mu.Unlock()
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	debugAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// --allocator simulator: the bench's controller phases measure the simulator's own
	// allocator (kube-scheduler runs only where its side is measured; template claims of the
	// workloads phase are kube-scheduler's in either mode).
	argv := []string{e.Bin, "controller", "--kubeconfig", kubeconfig, "--runtime-address", addr, "--debug-address", debugAddr,
		"--kube-api-qps", strconv.Itoa(QPS), "--kube-api-burst", strconv.Itoa(Burst), "--allocator", "simulator"}
	if os.Getenv(ProfileDirEnv) != "" {
		argv = append(argv, "--profiling")
	}
	argv = append(argv, args...)
	p, err := e.Cluster.Spawn(name, argv)
	if err != nil {
		return nil, err
	}
	c := &Controller{Name: name, Addr: addr, DebugAddr: debugAddr, Log: p.Log, Pid: p.Pid, e: e}
	if dir := os.Getenv(ProfileDirEnv); dir != "" {
		go c.profile(ctx, dir)
	}
	if err := poll(ctx, 60*time.Second, func() (bool, error) {
		code, _ := c.get("/readyz")
		return code == http.StatusOK, nil
	}); err != nil {
		c.Stop()
		return nil, fmt.Errorf("controller not ready: %w\n%s", err, tail(p.Log, 20))
	}
	return c, nil
}

// ProfileDirEnv names a directory: when set, every bench controller, kube-apiserver and
// kube-scheduler run with profiling on and their CPU profiles are saved there in 5 s pieces
// (NAME-N.pprof; merge them with go tool pprof).
const ProfileDirEnv = "DRAFORGE_BENCH_PROFILE_DIR"

// profile saves the controller's CPU profile in 5 s pieces until it stops.
func (c *Controller) profile(ctx context.Context, dir string) {
	saveProfiles(ctx, dir, c.Name, httpGetter(&http.Client{Timeout: 30 * time.Second}, "http://"+c.DebugAddr), nil)
}

// Stop ends the controller (SIGTERM, then SIGKILL after 10s).
func (c *Controller) Stop() {
	_ = c.e.Cluster.StopComponent(cluster.Component(c.Name))
}

func (c *Controller) get(path string) (int, string) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + c.Addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Metrics scrapes /metrics.
func (c *Controller) Metrics() (Sample, error) {
	code, body := c.get("/metrics")
	if code != http.StatusOK {
		return "", fmt.Errorf("/metrics: %d %s", code, body)
	}
	return Sample(body), nil
}

// Sample is one scrape of a Prometheus text endpoint.
type Sample string

// Sum adds the samples of metric name whose label set contains every given `k="v"` pair.
func (s Sample) Sum(name string, labels ...string) float64 {
	return e2eutil.SumMetric(string(s), name, labels...)
}

// Requests is the controller's rest_client_requests_total by method.
type Requests map[string]float64

// WriteMethods are the mutating verbs.
var WriteMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

// Requests returns rest_client_requests_total per method.
func (s Sample) Requests() Requests {
	r := Requests{}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		r[m] = s.Sum("rest_client_requests_total", `method="`+m+`"`)
	}
	return r
}

// Sub returns r - o per method.
func (r Requests) Sub(o Requests) Requests {
	out := Requests{}
	for k, v := range r {
		out[k] = v - o[k]
	}
	return out
}

// Total is the sum over methods; Writes over the mutating ones.
func (r Requests) Total() float64 {
	var n float64
	for _, v := range r {
		n += v
	}
	return n
}

// Writes is the number of mutating requests.
func (r Requests) Writes() float64 {
	var n float64
	for _, m := range WriteMethods {
		n += r[m]
	}
	return n
}

func (r Requests) String() string {
	var parts []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if r[m] != 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", m, r[m]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// SyncAttempts is draforge_controller_sync_attempts_total over all machines.
func (s Sample) SyncAttempts() float64 { return s.Sum("draforge_controller_sync_attempts_total") }

// Quiesce waits until the controller's queues are empty and no sync started for quiet.
func (c *Controller) Quiesce(ctx context.Context, quiet, timeout time.Duration) error {
	last, since := -1.0, time.Now()
	return poll(ctx, timeout, func() (bool, error) {
		s, err := c.Metrics()
		if err != nil {
			return false, err
		}
		n := s.SyncAttempts()
		if n != last || s.Sum("draforge_controller_queue_depth") > 0 || s.Sum("draforge_controller_sync_in_flight") > 0 {
			last, since = n, time.Now()
			return false, nil
		}
		return time.Since(since) >= quiet, nil
	})
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func tail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// poll calls cond every 50ms until it returns true, an error, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not reached within %s", timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// parallel runs fn(0..n-1) with at most workers at once and returns the first error.
func parallel(ctx context.Context, n, workers int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
loop:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break loop
		}
	}
	close(next)
	wg.Wait()
	return first
}
