package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/inventory/inventorytest"
	"github.com/draforge/draforge/engine"
)

type fakeMachines struct{}

func (fakeMachines) Machine(_ context.Context, m, ns, name string) (*MachineView, error) {
	switch {
	case m == "node" && ns == "" && name == "sim-node-0":
		return &MachineView{Machine: m, Name: name, State: "ready", HistorySource: "none"}, nil
	case m != "claim":
		return nil, fmt.Errorf("%w %q", engine.ErrUnknownMachine, m)
	case ns != "demo" || name != "used":
		return nil, engine.ErrObjectNotFound
	}
	return &MachineView{Machine: m, Namespace: ns, Name: name, State: "allocated", HistorySource: "none"}, nil
}

// fixed is a Publish source that always returns snap.
func fixed(snap *inventory.Snapshot) func() *inventory.Snapshot {
	return func() *inventory.Snapshot { return snap }
}

func newTestServer(t *testing.T, o Options) (*Server, *httptest.Server) {
	t.Helper()
	if o.Readiness == nil {
		o.Readiness = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "ready": true, "reason": "ok"})
		})
	}
	if o.Liveness == nil {
		o.Liveness = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	}
	if o.Machines == nil {
		o.Machines = fakeMachines{}
	}
	o.Version = "test"
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Close(); ts.Close() })
	return s, ts
}

func do(t *testing.T, method, url string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an error envelope: %s", b)
	}
	return e.Error.Code
}

func TestNotReadyBeforeFirstSnapshot(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, p := range []string{"/api/summary", "/api/pools", "/api/claims/demo/used", "/api/explain/demo/used", "/api/doctor"} {
		resp, b := do(t, "GET", ts.URL+p, nil)
		if resp.StatusCode != 503 || errCode(t, b) != codeNotReady || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %s", p, resp.StatusCode, b)
		}
	}
}

func TestRoutes(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	s.Publish(inventorytest.Healthy, nil)
	type check func(t *testing.T, b []byte)
	jsonHas := func(subs ...string) check {
		return func(t *testing.T, b []byte) {
			for _, sub := range subs {
				if !bytes.Contains(b, []byte(sub)) {
					t.Errorf("body lacks %q:\n%s", sub, b)
				}
			}
		}
	}
	count := func(want int) check {
		return func(t *testing.T, b []byte) {
			var v []json.RawMessage
			if err := json.Unmarshal(b, &v); err != nil || len(v) != want {
				t.Errorf("want a list of %d, got %d (%v): %s", want, len(v), err, b)
			}
		}
	}
	for _, tc := range []struct {
		path   string
		status int
		ctype  string
		check  check
	}{
		{"/api/version", 200, "application/json", jsonHas(`"version": "test"`)},
		{"/api/summary", 200, "application/json", jsonHas(`"claims": 2`, `"devices": 4`, `"Pending": 1`, `"version": 1`, `"doctor"`)},
		{"/api/pools", 200, "application/json", count(2)},
		{"/api/devices", 200, "application/json", count(4)},
		{"/api/claims", 200, "application/json", func(t *testing.T, b []byte) {
			var v []struct{ Namespace, Name, State string }
			_ = json.Unmarshal(b, &v)
			if len(v) != 2 || v[0].Name != "used" || v[0].State != "Reserved" || v[1].Name != "waiting" || v[1].State != "Pending" {
				t.Errorf("claims: %+v", v)
			}
		}},
		{"/api/claims/demo/used", 200, "application/json", jsonHas(`"name": "used"`, `"device": "gpu-0"`)},
		{"/api/claims/demo/nope", 404, "application/json", func(t *testing.T, b []byte) {
			if errCode(t, b) != codeNotFound {
				t.Error(string(b))
			}
		}},
		{"/api/graph", 200, "application/json", jsonHas(`"claim:demo/used"`, `"kind": "ResourcePool"`, `"edges"`)},
		{"/api/explain/demo/waiting", 200, "application/json", jsonHas(`"state": "Pending"`, `"requests"`, `"reasons"`)},
		{"/api/explain/demo/used", 200, "application/json", jsonHas(`allocated on node node-a`)},
		{"/api/explain/demo/missing", 404, "application/json", func(t *testing.T, b []byte) {
			if errCode(t, b) != codeNotFound || bytes.Contains(b, []byte("missing")) {
				t.Error(string(b))
			}
		}},
		{"/api/doctor", 200, "application/json", jsonHas(`"results"`, `"snapshotVersion": 1`, `"DRA006"`)},
		{"/api/machines/claim/demo/used", 200, "application/json", jsonHas(`"state": "allocated"`, `"historySource": "none"`)},
		{"/api/machines/node/sim-node-0", 200, "application/json", jsonHas(`"state": "ready"`, `"name": "sim-node-0"`)},
		{"/api/machines/claim/demo/other", 404, "application/json", func(t *testing.T, b []byte) {
			if errCode(t, b) != codeNotFound {
				t.Error(string(b))
			}
		}},
		{"/api/machines/nope/demo/used", 404, "application/json", func(t *testing.T, b []byte) {
			if errCode(t, b) != codeMachineNotFound {
				t.Error(string(b))
			}
		}},
		{"/api/nothing", 404, "application/json", nil},
		{"/healthz", 200, "application/json", nil},
		{"/readyz", 200, "application/json", jsonHas(`"ready"`)},
		{"/", 200, "text/html", jsonHas(`<script src="/app.js" defer></script>`)},
		{"/app.js", 200, "text/javascript", jsonHas(`EventSource`)},
		{"/app.css", 200, "text/css", nil},
		{"/nope.html", 404, "application/json", nil},
		{"/metrics", 200, "text/plain", jsonHas(`draforge_server_http_requests_total{code="200",method="GET",route="GET /api/pools"}`, "draforge_server_sse_clients")},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, b := do(t, "GET", ts.URL+tc.path, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
				t.Errorf("Content-Type %q, want %s", ct, tc.ctype)
			}
			if tc.check != nil {
				tc.check(t, b)
			}
			hresp, hb := do(t, "HEAD", ts.URL+tc.path, nil)
			if hresp.StatusCode != tc.status || len(hb) != 0 {
				t.Errorf("HEAD: %d with %d bytes", hresp.StatusCode, len(hb))
			}
		})
	}
}

func TestStableOutput(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	s.Publish(inventorytest.Healthy, nil)
	for _, p := range []string{"/api/pools", "/api/devices", "/api/claims", "/api/graph", "/api/doctor"} {
		_, a := do(t, "GET", ts.URL+p, nil)
		s.Publish(inventorytest.Healthy, nil)
		_, b := do(t, "GET", ts.URL+p, nil)
		a = bytes.ReplaceAll(a, []byte(`"snapshotVersion"`), nil)
		if p != "/api/doctor" && !bytes.Equal(a, b) {
			t.Errorf("%s differs between equal snapshots", p)
		}
	}
}

func TestETag(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	s.Publish(inventorytest.Healthy, nil)
	resp, _ := do(t, "GET", ts.URL+"/api/pools", nil)
	tag := resp.Header.Get("ETag")
	if tag == "" {
		t.Fatal("no ETag")
	}
	if resp, _ := do(t, "GET", ts.URL+"/api/pools", map[string]string{"If-None-Match": tag}); resp.StatusCode != 304 {
		t.Errorf("same version: %d, want 304", resp.StatusCode)
	}
	s.Publish(inventorytest.Healthy, nil)
	if resp, _ := do(t, "GET", ts.URL+"/api/pools", map[string]string{"If-None-Match": tag}); resp.StatusCode != 200 {
		t.Errorf("new version: %d, want 200", resp.StatusCode)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	s, ts := newTestServer(t, Options{AllowedOrigins: []string{"https://ok.example"}})
	s.Publish(inventorytest.Healthy, nil)
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"} {
		for _, p := range []string{"/api/claims", "/api/stream", "/", "/healthz", "/metrics", "/api/nothing"} {
			resp, b := do(t, m, ts.URL+p, nil)
			if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d Allow=%q", m, p, resp.StatusCode, resp.Header.Get("Allow"))
				continue
			}
			if m != "CONNECT" && errCode(t, b) != codeMethodNotAllowed {
				t.Errorf("%s %s: %s", m, p, b)
			}
		}
	}
	// A preflight asking for a write method is refused too.
	resp, _ := do(t, "OPTIONS", ts.URL+"/api/claims", map[string]string{"Origin": "https://ok.example", "Access-Control-Request-Method": "POST"})
	if resp.StatusCode != 405 {
		t.Errorf("preflight for POST: %d", resp.StatusCode)
	}
}

// TestMethodLabelBounded: a method HTTP does not define is counted as method="other", so a
// client cannot add series by inventing methods; known ones keep their name.
func TestMethodLabelBounded(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	s.Publish(inventorytest.Healthy, nil)
	for _, m := range []string{"FROB", "get", "X-" + strings.Repeat("A", 200), "DELETE"} {
		if resp, _ := do(t, m, ts.URL+"/api/pools", nil); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%.10s: %d, want 405", m, resp.StatusCode)
		}
	}
	_, b := do(t, "GET", ts.URL+"/metrics", nil)
	metrics := string(b)
	for _, want := range []string{
		`draforge_server_http_requests_total{code="405",method="other",route="method_not_allowed"} 3`,
		`draforge_server_http_requests_total{code="405",method="DELETE",route="method_not_allowed"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, leak := range []string{`method="FROB"`, `method="get"`, `method="X-AAA`} {
		if strings.Contains(metrics, leak) {
			t.Errorf("metrics carry the raw method %s", leak)
		}
	}
}

func TestCORS(t *testing.T) {
	s, ts := newTestServer(t, Options{AllowedOrigins: []string{"https://ok.example", "http://localhost:3000"}})
	s.Publish(inventorytest.Healthy, nil)
	for _, tc := range []struct {
		origin string
		allow  bool
	}{
		{"https://ok.example", true}, {"http://localhost:3000", true},
		{"https://evil.example", false}, {"https://ok.example.evil", false}, {"http://ok.example", false},
		{"null", false}, {"*", false}, {"", false},
	} {
		resp, _ := do(t, "GET", ts.URL+"/api/pools", map[string]string{"Origin": tc.origin})
		got := resp.Header.Get("Access-Control-Allow-Origin")
		if (tc.allow && got != tc.origin) || (!tc.allow && got != "") {
			t.Errorf("origin %q: Allow-Origin %q", tc.origin, got)
		}
		if resp.Header.Get("Vary") != "Origin" {
			t.Errorf("origin %q: Vary %q", tc.origin, resp.Header.Get("Vary"))
		}
		pre, _ := do(t, "OPTIONS", ts.URL+"/api/pools", map[string]string{"Origin": tc.origin, "Access-Control-Request-Method": "GET"})
		switch {
		case tc.origin == "":
			if pre.StatusCode != 405 {
				t.Errorf("OPTIONS without Origin: %d", pre.StatusCode)
			}
		case tc.allow:
			if pre.StatusCode != 204 || pre.Header.Get("Access-Control-Allow-Methods") != "GET, HEAD" || pre.Header.Get("Access-Control-Allow-Origin") != tc.origin {
				t.Errorf("preflight %q: %d %v", tc.origin, pre.StatusCode, pre.Header)
			}
		default:
			if pre.StatusCode != 403 || pre.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight %q: %d", tc.origin, pre.StatusCode)
			}
		}
	}
}

func TestParseOrigins(t *testing.T) {
	good, err := ParseOrigins([]string{"https://A.example", " http://localhost:8080 ", ""})
	if err != nil || strings.Join(good, ",") != "https://a.example,http://localhost:8080" {
		t.Errorf("%v %v", good, err)
	}
	for _, bad := range []string{"*", "https://*.example", "https://a.example/path", "ftp://a", "a.example", "https://a.example?x=1", "https://u@a.example"} {
		if _, err := ParseOrigins([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
		if _, err := New(Options{AllowedOrigins: []string{bad}}); err == nil {
			t.Errorf("New accepted %q", bad)
		}
	}
}

func TestSecurityHeadersEverywhere(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	s.Publish(inventorytest.Healthy, nil)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/app.js"}, {"GET", "/api/pools"}, {"GET", "/api/nothing"}, {"POST", "/api/pools"},
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}, {"GET", "/api/explain/x/y"},
	} {
		resp, _ := do(t, tc.method, ts.URL+tc.path, nil)
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s %s: CSP %q", tc.method, tc.path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s %s: headers %v", tc.method, tc.path, h)
		}
	}
	// The dashboard has no inline script, style or event handler (the CSP would block them).
	for _, f := range []string{"web/index.html"} {
		b, _ := webFS.ReadFile(f)
		for _, bad := range []string{"<style", "style=", "onclick", "onload", "<script>", "javascript:", "http://", "https://"} {
			if bytes.Contains(b, []byte(bad)) {
				t.Errorf("%s contains %q", f, bad)
			}
		}
	}
}

func TestRequestLogOmitsQuery(t *testing.T) {
	var buf bytes.Buffer
	s, ts := newTestServer(t, Options{Log: zerolog.New(&buf)})
	s.Publish(inventorytest.Healthy, nil)
	do(t, "GET", ts.URL+"/api/pools?token=s3cret", nil)
	if !strings.Contains(buf.String(), `"path":"/api/pools"`) || strings.Contains(buf.String(), "s3cret") {
		t.Errorf("log: %s", buf.String())
	}
	if !strings.Contains(buf.String(), `"route":"GET /api/pools"`) {
		t.Errorf("log lacks the route pattern: %s", buf.String())
	}
}

// sseReader parses an event stream.
type sseReader struct {
	t  *testing.T
	sc *bufio.Scanner
	ch chan sseMsg
}

type sseMsg struct {
	ID, Event, Data string
	Comment         bool
}

func openStream(t *testing.T, url string, hdr map[string]string) (*http.Response, *sseReader) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/api/stream", nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	r := &sseReader{t: t, sc: bufio.NewScanner(resp.Body), ch: make(chan sseMsg, 100)}
	go func() {
		defer close(r.ch)
		var m sseMsg
		have := false
		for r.sc.Scan() {
			line := r.sc.Text()
			switch {
			case line == "":
				if have {
					r.ch <- m
				}
				m, have = sseMsg{}, false
			case strings.HasPrefix(line, ":"):
				r.ch <- sseMsg{Comment: true, Data: line}
			case strings.HasPrefix(line, "id: "):
				m.ID, have = line[4:], true
			case strings.HasPrefix(line, "event: "):
				m.Event, have = line[7:], true
			case strings.HasPrefix(line, "data: "):
				m.Data += line[6:]
				have = true
			}
		}
	}()
	return resp, r
}

// next returns the next event (comments included only when wanted).
func (r *sseReader) next(comments bool) sseMsg {
	r.t.Helper()
	for {
		select {
		case m, ok := <-r.ch:
			if !ok {
				r.t.Fatal("stream ended")
			}
			if m.Comment && !comments {
				continue
			}
			return m
		case <-time.After(5 * time.Second):
			r.t.Fatal("no event within 5s")
		}
	}
}

func TestStream(t *testing.T) {
	s, ts := newTestServer(t, Options{Heartbeat: time.Hour})
	s.Publish(inventorytest.Healthy, nil) // id 1
	resp, r := openStream(t, ts.URL, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if resp.Header.Get("Content-Security-Policy") == "" {
		t.Error("no security headers on the stream")
	}
	first := r.next(false)
	if first.Event != EventSnapshot || first.ID != "1" || !strings.Contains(first.Data, `"claims":2`) {
		t.Fatalf("first event %+v", first)
	}
	s.Publish(inventorytest.Healthy, []Change{{Kind: "ResourceClaim", Namespace: "demo", Name: "new", Op: OpAdd}})
	ev := r.next(false)
	if ev.Event != EventChange || ev.ID != "2" || !strings.Contains(ev.Data, `{"kind":"ResourceClaim","namespace":"demo","name":"new","op":"add"}`) {
		t.Fatalf("change event %+v", ev)
	}
	many := make([]Change, 101)
	for i := range many {
		many[i] = Change{Kind: "Pod", Namespace: "demo", Name: fmt.Sprint(i), Op: OpAdd}
	}
	s.Publish(inventorytest.Healthy, many)
	if ev := r.next(false); ev.ID != "3" || !strings.Contains(ev.Data, `"truncated":true`) || strings.Contains(ev.Data, `"kind":"Pod"`) {
		t.Errorf("big change not truncated: %+v", ev)
	}
}

func TestStreamHeartbeat(t *testing.T) {
	s, ts := newTestServer(t, Options{Heartbeat: 50 * time.Millisecond})
	s.Publish(inventorytest.Healthy, nil)
	_, r := openStream(t, ts.URL, nil)
	r.next(false)
	for range 2 {
		if m := r.next(true); !m.Comment || m.Data != ": heartbeat" {
			t.Fatalf("want a heartbeat comment, got %+v", m)
		}
	}
}

func TestStreamResume(t *testing.T) {
	s, ts := newTestServer(t, Options{RingSize: 3, Heartbeat: time.Hour})
	for i := range 5 { // ids 1..5; the ring keeps 3, 4, 5
		s.Publish(inventorytest.Healthy, []Change{{Kind: "ResourceClaim", Namespace: "demo", Name: fmt.Sprint("c", i+1), Op: OpAdd}})
	}
	// Known id: replay what came after it, no snapshot.
	_, r := openStream(t, ts.URL, map[string]string{"Last-Event-ID": "3"})
	for _, want := range []string{"4", "5"} {
		if ev := r.next(false); ev.Event != EventChange || ev.ID != want || !strings.Contains(ev.Data, `"name":"c`+want+`"`) {
			t.Fatalf("replay: want change %s, got %+v", want, ev)
		}
	}
	s.Publish(inventorytest.Healthy, []Change{{Kind: "Node", Name: "n", Op: OpDelete}})
	if ev := r.next(false); ev.ID != "6" {
		t.Fatalf("live after replay: %+v", ev)
	}
	// Up to date: nothing to replay, the next live event follows.
	_, r2 := openStream(t, ts.URL, map[string]string{"Last-Event-ID": "6"})
	time.Sleep(50 * time.Millisecond)
	s.Publish(inventorytest.Healthy, nil)
	if ev := r2.next(false); ev.ID != "7" || ev.Event != EventChange {
		t.Fatalf("up to date client: %+v", ev)
	}
	// Too old, from the future or garbage: a snapshot of the latest id.
	for _, last := range []string{"1", "99", "x"} {
		_, r := openStream(t, ts.URL, map[string]string{"Last-Event-ID": last})
		if ev := r.next(false); ev.Event != EventSnapshot || ev.ID != "7" {
			t.Errorf("Last-Event-ID %s: %+v", last, ev)
		}
	}
}

func TestSlowClientCoalescedWithoutBlocking(t *testing.T) {
	h := newHub(8, 2, 10, func(int) {})
	slow, _, _, _, err := h.subscribe(0, false)
	if err != nil {
		t.Fatal(err)
	}
	fast, _, _, _, _ := h.subscribe(0, false)
	done := make(chan struct{})
	go func() {
		for range 50 {
			h.publish(EventChange, func(uint64) []byte { return []byte("{}") })
			<-fast.ch
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("publishing blocked on a slow client")
	}
	select {
	case <-slow.lag:
	default:
		t.Fatal("slow client not marked lagging")
	}
	if id := h.drain(slow); id != 50 || len(slow.ch) != 0 {
		t.Errorf("drain: id %d, %d left", id, len(slow.ch))
	}
	if _, _, _, _, err := h.subscribe(0, false); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		h.subscribe(0, false)
	}
	if _, _, _, _, err := h.subscribe(0, false); !errors.Is(err, errTooManyStreams) {
		t.Errorf("over MaxStreams: %v", err)
	}
}

func TestStreamLagSendsSnapshot(t *testing.T) {
	s, ts := newTestServer(t, Options{ClientBuffer: 1, Heartbeat: time.Hour})
	s.Publish(inventorytest.Healthy, nil)
	_, r := openStream(t, ts.URL, nil)
	r.next(false)
	// Fill the client's queue behind the hub's back, then publish: the client lags.
	for c := range s.hub.clients {
		c.ch <- sseEvent{id: 99, name: "filler", data: []byte("{}")}
	}
	s.hub.mu.Lock()
	for c := range s.hub.clients {
		select {
		case c.lag <- struct{}{}:
		default:
		}
	}
	s.hub.mu.Unlock()
	for {
		ev := r.next(false)
		if ev.Event == EventSnapshot {
			break
		}
		if ev.Event != "filler" {
			t.Fatalf("unexpected %+v", ev)
		}
	}
}

func TestShutdownCancelsStreams(t *testing.T) {
	s, err := New(Options{Heartbeat: time.Hour, ShutdownTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(inventorytest.Healthy, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	var readers []*sseReader
	for range 3 {
		_, r := openStream(t, url, nil)
		r.next(false)
		readers = append(readers, r)
	}
	if n := s.hub.clientCount(); n != 3 {
		t.Fatalf("%d clients", n)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("shutdown took %s with open streams", took)
	}
	for _, r := range readers {
		select {
		case _, ok := <-r.ch:
			for ok {
				_, ok = <-r.ch
			}
		case <-time.After(time.Second):
			t.Fatal("stream not ended")
		}
	}
	if _, err := http.Get(url + "/api/pools"); err == nil {
		t.Error("server still accepts requests")
	}
}

// TestStreamOutlivesServerTimeouts: a stream served by Serve survives the read and write
// timeouts of ordinary requests.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	s, err := New(Options{Heartbeat: 50 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(inventorytest.Healthy, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Serve(ctx, ln) }()
	_, r := openStream(t, "http://"+ln.Addr().String(), nil)
	r.next(false)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if m := r.next(true); !m.Comment {
			t.Fatalf("unexpected %+v", m)
		}
	}
	s.Publish(inventorytest.Healthy, nil)
	if ev := r.next(false); ev.ID != "2" {
		t.Fatalf("after 1s: %+v", ev)
	}
}
