// Package browser drives headless Chromium over the DevTools protocol for dashboard tests:
// load a page, wait until a JavaScript condition holds, return the rendered DOM.
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
	dir, err := os.MkdirTemp("", "draforge-chromium-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, Path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir="+dir, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", url)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return "", err
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
			return "", fmt.Errorf("chromium did not open its DevTools port: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	wsURL, err := pageSocket(ctx, port)
	if err != nil {
		return "", err
	}
	conn, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		return "", fmt.Errorf("devtools: %w", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	id := 0
	eval := func(expr string) (json.RawMessage, error) {
		id++
		msg, _ := json.Marshal(map[string]any{"id": id, "method": "Runtime.evaluate",
			"params": map[string]any{"expression": expr, "returnByValue": true}})
		if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
			return nil, err
		}
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return nil, err
			}
			var resp struct {
				ID     int `json:"id"`
				Result struct {
					Result struct {
						Value json.RawMessage `json:"value"`
					} `json:"result"`
					ExceptionDetails json.RawMessage `json:"exceptionDetails"`
				} `json:"result"`
			}
			if json.Unmarshal(b, &resp) != nil || resp.ID != id {
				continue // an event
			}
			if resp.Result.ExceptionDetails != nil {
				return nil, fmt.Errorf("evaluate %q: %s", expr, resp.Result.ExceptionDetails)
			}
			return resp.Result.Result.Value, nil
		}
	}
	for {
		// The page may still be loading (no body yet): errors mean "not yet".
		v, err := eval("(() => { try { return Boolean(" + ready + "); } catch (e) { return false; } })()")
		if err != nil {
			return "", err
		}
		if string(v) == "true" {
			break
		}
		select {
		case <-ctx.Done():
			dom, _ := eval("document.documentElement.outerHTML")
			var s string
			_ = json.Unmarshal(dom, &s)
			return s, fmt.Errorf("condition %q not met: %w", ready, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	v, err := eval("document.documentElement.outerHTML")
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", err
	}
	return s, nil
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
