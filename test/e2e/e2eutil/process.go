package e2eutil

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu   sync.Mutex
	buildDir  string
	buildPath = map[string]string{} // ldflags -> binary
	buildErrs = map[string]error{}
)

// DraforgeBinary builds ./cmd/draforge once per test binary and returns its path.
func DraforgeBinary(t testing.TB) string { return DraforgeBinaryWith(t, "") }

// DraforgeBinaryWith builds ./cmd/draforge with the given -ldflags (e.g. a different
// -X .../buildinfo.Version, a second build for upgrade tests), once per distinct ldflags.
func DraforgeBinaryWith(t testing.TB, ldflags string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildPath[ldflags]; ok {
		return p
	}
	if err, ok := buildErrs[ldflags]; ok {
		t.Fatalf("go build ./cmd/draforge: %v", err)
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "draforge-e2e-bin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	out := filepath.Join(buildDir, fmt.Sprintf("draforge-%d", len(buildPath)))
	// A cold -trimpath build on a busy 2-core machine has taken over 5 minutes: the limit only
	// guards against a hung toolchain.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// Static and -trimpath like the container image's amd64 binary (build/containerimage), so
	// both share the Go build cache: only the link step differs.
	args := []string{"build", "-trimpath", "-o", out}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/draforge")...)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		buildErrs[ldflags] = fmt.Errorf("%w\n%s", err, b)
		t.Fatalf("go build ./cmd/draforge: %v", buildErrs[ldflags])
	}
	buildPath[ldflags] = out
	return out
}

// RemoveBinaries deletes what DraforgeBinary built; TestMain calls it after the tests.
func RemoveBinaries() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// Controller is a running `draforge controller` (or `draforge serve`) process.
type Controller struct {
	Cmd  *exec.Cmd
	Addr string
	// DebugAddr is the controller's --debug-address (/debug/machines, /debug/pprof/), a free
	// loopback port: the default one would collide between controllers on one host. Empty for
	// other subcommands and with NoDebugAddress.
	DebugAddr string
	Exited    chan struct{}
	ExitErr   error
	log       *bytes.Buffer
	logMu     *sync.Mutex
}

// ControllerSpec says how to run a controller.
type ControllerSpec struct {
	// Bin is the draforge binary (DraforgeBinary when empty).
	Bin        string
	Kubeconfig string
	Args       []string
	// NoWait returns right after the start instead of waiting for /readyz 200.
	NoWait bool
	// Subcommand is "controller" when empty; "serve" runs the API server (same probes).
	Subcommand string
	// AddrFlag is the listen-address flag, "--runtime-address" when empty ("--address" for serve).
	AddrFlag string
	// NoDebugAddress passes no --debug-address to a controller: for binaries older than the flag.
	NoDebugAddress bool
}

// StartController runs `draforge controller` against kubeconfig; it is killed at test end.
func StartController(t *testing.T, kubeconfig string, args ...string) *Controller {
	t.Helper()
	return Run(t, ControllerSpec{Kubeconfig: kubeconfig, Args: args})
}

// Run starts a controller as spec says; it is killed at test end.
func Run(t *testing.T, spec ControllerSpec) *Controller {
	t.Helper()
	if spec.Bin == "" {
		spec.Bin = DraforgeBinary(t)
	}
	if spec.Subcommand == "" {
		spec.Subcommand = "controller"
	}
	if spec.AddrFlag == "" {
		spec.AddrFlag = "--runtime-address"
	}
	addr := FreeAddr(t)
	c := &Controller{Addr: addr, log: &bytes.Buffer{}, logMu: &sync.Mutex{}, Exited: make(chan struct{})}
	args := []string{spec.Subcommand, "--kubeconfig", spec.Kubeconfig, spec.AddrFlag, addr, "--log-level", "debug"}
	if spec.Subcommand == "controller" && !spec.NoDebugAddress {
		c.DebugAddr = FreeAddr(t)
		args = append(args, "--debug-address", c.DebugAddr)
	}
	c.Cmd = exec.Command(spec.Bin, append(args, spec.Args...)...)
	pr, pw := io.Pipe()
	c.Cmd.Stdout, c.Cmd.Stderr = pw, pw
	if err := c.Cmd.Start(); err != nil {
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
		c.ExitErr = c.Cmd.Wait()
		pw.Close()
		close(c.Exited)
	}()
	t.Cleanup(func() {
		c.Signal(syscall.SIGKILL)
		<-c.Exited
		if t.Failed() {
			t.Logf("%s %s log:\n%s", spec.Subcommand, addr, c.Log())
		}
	})
	if !spec.NoWait {
		Eventually(t, 60*time.Second, func() (bool, string) {
			code, body := c.Get("/readyz")
			return code == http.StatusOK, fmt.Sprintf("readyz %d %s", code, body)
		})
	}
	return c
}

// Signal sends s unless the process already exited.
func (c *Controller) Signal(s syscall.Signal) {
	select {
	case <-c.Exited:
	default:
		_ = c.Cmd.Process.Signal(s)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (c *Controller) Kill() {
	c.Signal(syscall.SIGKILL)
	<-c.Exited
}

// Running reports whether the process has not exited.
func (c *Controller) Running() bool {
	select {
	case <-c.Exited:
		return false
	default:
		return true
	}
}

// Gauge reads one unlabelled series; -1 when the endpoint or series is missing.
func (c *Controller) Gauge(name string) float64 {
	code, body := c.Get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, "\n"+name+" ") {
		return -1
	}
	return SumMetric(body, name)
}

// Log returns the process output so far.
func (c *Controller) Log() string {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return c.log.String()
}

// ErrorLines returns the error-level lines of the process output so far, so a failure can
// show them without the whole debug log.
func (c *Controller) ErrorLines() string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(c.Log(), "\n") {
		if strings.Contains(l, `"level":"error"`) {
			b.WriteString(l)
		}
	}
	return b.String()
}

// Get fetches a path of the runtime server: status code and body (0 and the error text when
// the request failed).
func (c *Controller) Get(path string) (int, string) { return get(c.Addr, path) }

// GetDebug fetches a path of the debug server (--debug-address: /debug/machines/...).
func (c *Controller) GetDebug(path string) (int, string) { return get(c.DebugAddr, path) }

func get(addr, path string) (int, string) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Metric sums the samples of a metric whose labels contain every given label="value" pair.
func (c *Controller) Metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	code, body := c.Get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return SumMetric(body, name, labels...)
}

// SumMetric sums the samples of name in a Prometheus text body whose labels contain every
// given label="value" pair.
func SumMetric(body, name string, labels ...string) float64 {
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

// Writes is the number of mutating requests the controller made (client-side attribution).
func (c *Controller) Writes(t testing.TB) float64 {
	t.Helper()
	var n float64
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		n += c.Metric(t, "rest_client_requests_total", `method="`+m+`"`)
	}
	return n
}
