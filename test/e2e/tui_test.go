package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers/gvr"
)

// ansi matches the escape sequences a terminal renderer writes (CSI, OSC, charset, keypad).
var ansi = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78MDEc]|\x1bP[^\x1b]*\x1b\\`)

// screen collects what the TUI writes to its pseudo-terminal, without escape sequences.
type screen struct {
	mu  sync.Mutex
	raw bytes.Buffer
}

func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ansi.ReplaceAllString(s.raw.String(), "")
}

// TestTUILive runs `draforge tui` in a pseudo-terminal against the local control plane: the
// claims view filtered to a claim shows it Pending while its pool does not exist, then
// Allocated once the SimulatedDevicePool is applied and the controller allocates it, without
// any key press in between (the informer-fed snapshot redraws the screen). With --allow-faults,
// F then y marks the claim's device unhealthy in its pool.
func TestTUILive(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t)
	src, err := os.ReadFile("../../examples/scenarios/basic-gpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := decodeDocs(t, src)
	t.Cleanup(func() { e.DeleteDocs(t, docs) })
	var pool *unstructured.Unstructured
	for _, u := range docs {
		if u.GetKind() == "SimulatedDevicePool" {
			pool = u
			continue
		}
		e.Apply(t, "", u)
	}
	if pool == nil {
		t.Fatal("no SimulatedDevicePool in basic-gpu.yaml")
	}

	cmd := exec.CommandContext(t.Context(), draforgeBinary(t), "--kubeconfig", kubeconfigPath, "tui", "--allow-faults")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 180})
	if err != nil {
		t.Fatal(err)
	}
	scr := &screen{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := tty.Read(buf)
			scr.mu.Lock()
			scr.raw.Write(buf[:n])
			scr.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		tty.Close()
		<-done
	})
	waitFor := func(what string, from int, ok func(string) bool) int {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if s := scr.text(); len(s) > from && ok(s[from:]) {
				return len(s)
			}
			time.Sleep(100 * time.Millisecond)
		}
		s := scr.text()
		t.Fatalf("%s not on screen; screen since offset %d:\n%s", what, from, s[min(from, len(s)):])
		return 0
	}
	send := func(keys string) {
		t.Helper()
		if _, err := io.WriteString(tty, keys); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("the overview", 0, func(s string) bool {
		return strings.Contains(s, "Claims ") && strings.Contains(s, "F fault (asks first)")
	})
	send("4")
	time.Sleep(200 * time.Millisecond)
	send("/single-gpu")
	time.Sleep(200 * time.Millisecond)
	send("\r")
	at := waitFor("single-gpu Pending", 0, func(s string) bool {
		return regexp.MustCompile(`draforge-basic-gpu/single-gpu\s+Pending`).MatchString(s) && strings.Contains(s, "matching /single-gpu")
	})

	e.Apply(t, "", pool)
	at = waitFor("single-gpu Allocated", at, func(s string) bool { return strings.Contains(s, "Allocated") || strings.Contains(s, "Reserved") })

	// Fault injection asks first, then writes the device's fault into the pool.
	send("F")
	at = waitFor("the confirmation", at, func(s string) bool { return strings.Contains(s, "unhealthy? y to confirm") })
	send("y")
	waitFor("the outcome", at, func(s string) bool { return strings.Contains(s, "marked unhealthy") })
	u, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(pool.GetNamespace()).Get(t.Context(), pool.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs, _, _ := unstructured.NestedSlice(u.Object, "spec", "faults")
	if len(fs) != 1 || !strings.Contains(fmt.Sprint(fs), "unhealthy") || !strings.Contains(fmt.Sprint(fs), "node-a") {
		t.Errorf("pool faults after F, y: %v", fs)
	}

	send("q")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("tui exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("tui did not quit on q")
	}
}
