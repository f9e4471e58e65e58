package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configures a local control plane.
type Options struct {
	// Dir holds certificates, etcd data, logs, the kubeconfig and the state file. Stop removes it.
	Dir string
	// CacheDir holds built binaries (see DefaultCacheDir).
	CacheDir string
	// Extra components beyond etcd and kube-apiserver.
	Extra []Component
	// Detach leaves the processes running after this process exits (the CLI); otherwise they are
	// killed with it (tests).
	Detach bool
	// Log receives build output and progress.
	Log io.Writer
	// Args are extra command-line arguments per component (benchmarks raise the scheduler's
	// client QPS, for example).
	Args map[Component][]string
	// NodeLifecycle tunes kube-controller-manager's node lifecycle controller; zero fields keep
	// the upstream defaults (monitor period 5s, grace period 50s, startup grace period 60s).
	NodeLifecycle NodeLifecycle
	// Profile names the feature gates and API versions turned on (see Profiles); "" is
	// "default", Kubernetes' own defaults. Args come after the profile's flags.
	Profile string
}

// NodeLifecycle holds the node lifecycle controller's timing flags. A Node whose Ready
// heartbeat and Lease are both older than GracePeriod is marked Ready=Unknown (tainted
// unreachable) at the next check, which runs every MonitorPeriod.
type NodeLifecycle struct {
	MonitorPeriod, GracePeriod, StartupGracePeriod time.Duration
}

func (n NodeLifecycle) args() []string {
	var out []string
	for _, f := range []struct {
		flag string
		d    time.Duration
	}{{"--node-monitor-period", n.MonitorPeriod}, {"--node-monitor-grace-period", n.GracePeriod}, {"--node-startup-grace-period", n.StartupGracePeriod}} {
		if f.d > 0 {
			out = append(out, f.flag+"="+f.d.String())
		}
	}
	return out
}

// Workloads are the components beyond etcd and kube-apiserver that pods, Jobs and Deployments
// need: the scheduler and the controller manager.
var Workloads = []Component{ControllerManager, Scheduler}

// Controllers are the kube-controller-manager controllers the local control plane runs (names
// from k8s.io/kubernetes cmd/kube-controller-manager/names): what DRA workloads need (service
// accounts and their tokens, namespace deletion, garbage collection, ResourceClaims from
// templates, device taint eviction, Jobs, ReplicaSets, Deployments), the node lifecycle
// controller that marks nodes without heartbeats Unknown and taints them, the taint eviction
// controller that evicts pods from such nodes, and the pod garbage collector. Left out: IPAM
// (no pod network), volumes, certificates, endpoints and the rest nothing here uses.
var Controllers = []string{
	"serviceaccount-controller", "serviceaccount-token-controller", "namespace-controller",
	"garbage-collector-controller", "resourceclaim-controller", "device-taint-eviction-controller",
	"job-controller", "replicaset-controller", "deployment-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller",
}

// Cluster is a running local control plane.
type Cluster struct {
	Dir        string `json:"dir"`
	Kubeconfig string `json:"kubeconfig"`
	Server     string `json:"server"`
	// Procs are the running components in start order.
	Procs  []*Proc `json:"procs"`
	detach bool
}

// Proc is one component process.
type Proc struct {
	Name Component `json:"name"`
	Bin  string    `json:"bin"`
	Args []string  `json:"args"`
	Pid  int       `json:"pid"`
	Log  string    `json:"log"`
}

const stateFile = "state.json"

// Start builds what is missing, starts etcd, kube-apiserver and the extra components, waits for
// /readyz and writes a kubeconfig with cluster-admin credentials.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	profile, err := ProfileNamed(o.Profile)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if fileExists(filepath.Join(dir, stateFile)) {
		return nil, fmt.Errorf("a cluster already runs from %s: stop it first", dir)
	}
	bins := map[Component]string{}
	for _, c := range append([]Component{Etcd, APIServer}, o.Extra...) {
		if bins[c], err = Binary(ctx, o.CacheDir, c, o.Log); err != nil {
			return nil, err
		}
	}
	var kueueBin, kueueModule string
	if profile.Kueue {
		if kueueBin, kueueModule, err = KueueBinary(ctx, o.CacheDir, o.Log); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	certs, err := writePKI(dir)
	if err != nil {
		return nil, fmt.Errorf("generate certificates: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c := &Cluster{
		Dir:        dir,
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		Server:     fmt.Sprintf("https://127.0.0.1:%d", ports[2]),
		detach:     o.Detach,
	}
	if err := writeKubeconfig(c.Kubeconfig, c.Server, certs); err != nil {
		return nil, err
	}
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	c.Procs = append(c.Procs, &Proc{Name: Etcd, Bin: bins[Etcd], Args: []string{
		"--name=default", "--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		// Throwaway data: skipping fsync makes a laptop-speed control plane.
		"--unsafe-no-fsync", "--log-level=warn",
	}}, &Proc{Name: APIServer, Bin: bins[APIServer], Args: []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + certs.ServingCert, "--tls-private-key-file=" + certs.ServingKey,
		"--client-ca-file=" + certs.CACert,
		"--service-account-key-file=" + certs.SAPub,
		"--service-account-signing-key-file=" + certs.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--profiling=false",
		// The kubernetes Service endpoint may not point at loopback; nothing in-cluster needs it.
		"--endpoint-reconciler-type=none",
	}})
	for _, x := range o.Extra {
		common := []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0"}
		switch x {
		case ControllerManager:
			c.Procs = append(c.Procs, &Proc{Name: x, Bin: bins[x], Args: append(common,
				"--service-account-private-key-file="+certs.SAKey, "--root-ca-file="+certs.CACert,
				"--use-service-account-credentials=false",
				"--controllers="+strings.Join(append(slices.Clone(Controllers), profile.Controllers...), ","),
				// The default 20 QPS would let the node lifecycle controller mark 100 silent
				// nodes Unknown (status, NoSchedule and NoExecute taint writes) ~15s late.
				"--kube-api-qps=200", "--kube-api-burst=400")})
			c.Procs[len(c.Procs)-1].Args = append(c.Procs[len(c.Procs)-1].Args, o.NodeLifecycle.args()...)
		case Scheduler:
			c.Procs = append(c.Procs, &Proc{Name: x, Bin: bins[x], Args: common})
		}
	}
	for _, p := range c.Procs {
		p.Args = append(append(p.Args, profile.args(p.Name)...), o.Args[p.Name]...)
	}
	for _, p := range c.Procs {
		if err := c.start(p); err != nil {
			c.Stop()
			return nil, err
		}
		if err := c.saveState(); err != nil {
			c.Stop()
			return nil, err
		}
		if p.Name == APIServer {
			if err := WaitReady(ctx, c.Server, certs, 90*time.Second); err != nil {
				tail := logTail(p.Log, 30)
				c.Stop()
				return nil, fmt.Errorf("%w; last lines of its log:\n%s", err, tail)
			}
		}
	}
	// A component that exits right after starting (a bad flag, a port in use) would otherwise
	// go unnoticed until some test misbehaves.
	time.Sleep(time.Second)
	for _, p := range c.Procs {
		if syscall.Kill(p.Pid, 0) != nil {
			tail := logTail(p.Log, 30)
			c.Stop()
			return nil, fmt.Errorf("%s exited right after starting; last lines of its log:\n%s", p.Name, tail)
		}
	}
	if profile.Kueue {
		if err := c.startKueue(ctx, kueueBin, kueueModule); err != nil {
			c.Stop()
			return nil, fmt.Errorf("start kueue: %w", err)
		}
	}
	return c, nil
}

// Load reads a running cluster's state from dir (for stopping it from another process).
func Load(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no cluster state in %s: %w", dir, err)
	}
	c := &Cluster{detach: true}
	return c, json.Unmarshal(b, c)
}

// Stop kills every component in reverse start order and removes the state directory.
func (c *Cluster) Stop() error {
	for _, p := range slices.Backward(c.Procs) {
		stopPid(p.Pid)
	}
	return os.RemoveAll(c.Dir)
}

// Spawn starts an extra process (a controller, an API server) under the cluster's supervision:
// it logs to the cluster's log directory and Stop ends it before the control plane.
func (c *Cluster) Spawn(name string, argv []string) (*Proc, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("spawn %s: no command", name)
	}
	p := &Proc{Name: Component(name), Bin: argv[0], Args: argv[1:]}
	if err := c.start(p); err != nil {
		return nil, err
	}
	c.Procs = append(c.Procs, p)
	return p, c.saveState()
}

// StopComponent stops one component, leaving the rest running (outage tests).
func (c *Cluster) StopComponent(name Component) error {
	for _, p := range c.Procs {
		if p.Name == name {
			stopPid(p.Pid)
			p.Pid = 0
			return c.saveState()
		}
	}
	return fmt.Errorf("component %s not running", name)
}

// StartComponent restarts a stopped component with its original arguments.
func (c *Cluster) StartComponent(ctx context.Context, name Component) error {
	for _, p := range c.Procs {
		if p.Name == name && p.Pid == 0 {
			if err := c.start(p); err != nil {
				return err
			}
			if err := c.saveState(); err != nil {
				return err
			}
			if name == APIServer {
				return WaitReady(ctx, c.Server, certsIn(c.Dir), 90*time.Second)
			}
			return nil
		}
	}
	return fmt.Errorf("component %s is not stopped", name)
}

func (c *Cluster) saveState() error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, stateFile), b, 0o644)
}

func (c *Cluster) start(p *Proc) error {
	p.Log = filepath.Join(c.Dir, "logs", string(p.Name)+".log")
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group: a Ctrl-C meant for the caller does not reach the control plane.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !c.detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.Pid = cmd.Process.Pid
	// Reap in the background so a stopped child does not linger as a zombie.
	go func() { _ = cmd.Wait() }()
	return nil
}

// spawnRequests are served by one goroutine locked to its OS thread: Pdeathsig fires when the
// thread that forked the child exits, so that thread must live as long as the process.
var spawnRequests = make(chan spawnRequest)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func init() {
	go func() {
		runtime.LockOSThread()
		for r := range spawnRequests {
			r.done <- r.cmd.Start()
		}
	}()
}

func spawn(cmd *exec.Cmd) error {
	done := make(chan error)
	spawnRequests <- spawnRequest{cmd, done}
	return <-done
}

func stopPid(pid int) {
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for range 100 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(100 * time.Millisecond)
}

func certsIn(dir string) pki {
	return pki{
		CACert: filepath.Join(dir, "ca.crt"), AdminCert: filepath.Join(dir, "admin.crt"),
		AdminKey: filepath.Join(dir, "admin.key"),
	}
}

// WaitReady polls /readyz with the admin credentials until it answers 200.
func WaitReady(ctx context.Context, server string, certs pki, timeout time.Duration) error {
	pair, err := tls.LoadX509KeyPair(certs.AdminCert, certs.AdminKey)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(certs.CACert)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool},
	}}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("kube-apiserver did not become ready")
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func logTail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func writeKubeconfig(path, server string, certs pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["draforge-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: certs.CACert}
	cfg.AuthInfos["draforge-admin"] = &clientcmdapi.AuthInfo{ClientCertificate: certs.AdminCert, ClientKey: certs.AdminKey}
	cfg.Contexts["draforge-local"] = &clientcmdapi.Context{Cluster: "draforge-local", AuthInfo: "draforge-admin"}
	cfg.CurrentContext = "draforge-local"
	return clientcmd.WriteToFile(*cfg, path)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
