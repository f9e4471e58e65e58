// Package browser drives headless Chromium over the DevTools protocol for dashboard tests and
// the README's pictures: load a page, wait until a JavaScript condition holds, return the
// rendered DOM or a screenshot.
package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// Path is where the tests expect Chromium (Debian's package).
const Path = "/usr/bin/chromium"

// SkipEnv, set to 1, lets tests skip when Chromium is missing; otherwise they fail.
const SkipEnv = "DRAFORGE_SKIP_BROWSER"

// Available reports whether Chromium is installed, and if not, what to do.
func Available() (bool, string) {
	if _, err := os.Stat(Path); err == nil {
		return true, ""
	}
	return false, Path + " is missing: install it (apt-get install -y --no-install-recommends chromium) or set " + SkipEnv + "=1 to skip the browser tests"
}

// RenderedDOM opens url in a fresh headless Chromium, polls until the JavaScript expression
// ready evaluates to true, and returns document.documentElement.outerHTML.
func RenderedDOM(ctx context.Context, url, ready string) (string, error) {
	var dom string
	err := open(ctx, url, 0, 0, func(p *page) error {
		err := p.await(ready)
		v, derr := p.eval("document.documentElement.outerHTML")
		if derr == nil {
			derr = json.Unmarshal(v, &dom)
		}
		return errors.Join(err, derr)
	})
	return dom, err
}

// Screenshot opens url in a fresh headless Chromium of width × height, waits until the
// JavaScript expression ready evaluates to true, and returns the page as PNG.
func Screenshot(ctx context.Context, url, ready string, width, height int) ([]byte, error) {
	var png []byte
	err := open(ctx, url, width, height, func(p *page) error {
		if err := p.await(ready); err != nil {
			return err
		}
		// The window includes what headless Chromium keeps of a browser's frame: the viewport
		// is set exactly.
		if _, err := p.call("Emulation.setDeviceMetricsOverride", map[string]any{
			"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}); err != nil {
			return err
		}
		v, err := p.call("Page.captureScreenshot", map[string]any{"format": "png"})
		if err != nil {
			return err
		}
		var shot struct{ Data []byte }
		if err := json.Unmarshal(v, &shot); err != nil {
			return err
		}
		png = shot.Data
		return nil
	})
	return png, err
}

// page is one Chromium page over the DevTools protocol.
type page struct {
	ctx  context.Context
	conn *websocket.Conn
	id   int
}

// open starts Chromium on url and runs fn with its page; a zero width keeps Chromium's window size.
func open(ctx context.Context, url string, width, height int, fn func(*page) error) error {
	dir, err := os.MkdirTemp("", "draforge-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir=" + dir, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"}
	if width > 0 {
		args = append(args, "--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", width, height))
	}
	cmd := exec.CommandContext(ctx, Path, append(args, url)...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(stderr)) }()

	// Chromium writes the chosen port to DevToolsActivePort in the profile directory.
	var port string
	for port == "" {
		b, err := os.ReadFile(filepath.Join(dir, "DevToolsActivePort"))
		if err == nil && strings.Contains(string(b), "\n") {
			port = strings.SplitN(string(b), "\n", 2)[0]
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chromium did not open its DevTools port: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	wsURL, err := pageSocket(ctx, port)
	if err != nil {
		return err
	}
	conn, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		return fmt.Errorf("devtools: %w", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	return fn(&page{ctx: ctx, conn: conn})
}

// call sends a DevTools command and returns its result, skipping the events in between.
func (p *page) call(method string, params map[string]any) (json.RawMessage, error) {
	p.id++
	msg, _ := json.Marshal(map[string]any{"id": p.id, "method": method, "params": params})
	if err := p.conn.Write(p.ctx, websocket.MessageText, msg); err != nil {
		return nil, err
	}
	for {
		_, b, err := p.conn.Read(p.ctx)
		if err != nil {
			return nil, err
		}
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(b, &resp) != nil || resp.ID != p.id {
			continue // an event
		}
		if resp.Error != nil {
			return nil, protocolError{method: method, msg: string(resp.Error)}
		}
		return resp.Result, nil
	}
}

// protocolError is Chromium's refusal of a command (e.g. no execution context while the page
// is still loading).
type protocolError struct{ method, msg string }

func (e protocolError) Error() string { return e.method + ": " + e.msg }

// eval evaluates a JavaScript expression and returns its value.
func (p *page) eval(expr string) (json.RawMessage, error) {
	v, err := p.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	if err != nil {
		return nil, err
	}
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, err
	}
	if r.ExceptionDetails != nil {
		return nil, fmt.Errorf("evaluate %q: %s", expr, r.ExceptionDetails)
	}
	return r.Result.Value, nil
}

// await polls until the JavaScript expression ready is true; the page may still be loading
// (no body, no execution context yet): those errors mean "not yet".
func (p *page) await(ready string) error {
	for {
		v, err := p.eval("(() => { try { return Boolean(" + ready + "); } catch (e) { return false; } })()")
		var notYet protocolError
		if errors.As(err, &notYet) {
			v = nil
		} else if err != nil {
			return err
		}
		if string(v) == "true" {
			return nil
		}
		select {
		case <-p.ctx.Done():
			return fmt.Errorf("condition %q not met: %w", ready, p.ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func pageSocket(ctx context.Context, port string) (string, error) {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/json/list", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var targets []struct {
				Type, URL            string
				WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
			}
			err = json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
			for _, t := range targets {
				if t.Type == "page" && t.WebSocketDebuggerURL != "" {
					return t.WebSocketDebuggerURL, nil
				}
			}
			if err == nil {
				err = errors.New("no page target yet")
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("devtools targets: %v: %w", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
