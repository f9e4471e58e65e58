package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/draforge/draforge/drivers/inventory/inventorytest"
)

// fuzzServer is a server over the healthy test inventory, after `events` published snapshots.
func fuzzServer(f *testing.F, o Options, events int) *Server {
	o.Version, o.Machines = "fuzz", fakeMachines{}
	srv, err := New(o)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	for i := range events {
		srv.Publish(inventorytest.Healthy, []Change{{Kind: "ResourceClaim", Namespace: "demo", Name: fmt.Sprint("c", i+1), Op: OpAdd}})
	}
	return srv
}

// queryRoutes are the routes that read query parameters, and some that read none.
var queryRoutes = []string{"/api/occupancy", "/api/explain/demo/used", "/api/occupancy/node-a", "/api/summary", "/api/claims/demo/used"}

// FuzzAPIQuery sends arbitrary query strings to the API routes of `draforge serve`. Seeds: the
// dashboard's own queries and the bad ones of TestOccupancy. Invariants: no panic; 200 or 400
// only; a 400 is the bad_request envelope whose message starts with the name of a parameter
// the query holds ("limit: ..."); an accepted occupancy query is answered with the page it
// asked for.
func FuzzAPIQuery(f *testing.F) {
	for _, s := range []struct {
		route uint8
		query string
	}{
		{0, "offset=0&limit=100"}, {0, "offset=100&limit=100&q=rack%3Dr1&state=free"}, {0, "q=node-b"},
		{0, "q=kubernetes.io%2Fhostname%3Dnode-a"}, {0, "state=tainted"}, {0, "limit=0"}, {0, "limit=1001"},
		{0, "offset=-1"}, {0, "offset=x"}, {0, "state=busy"}, {0, "limit=%zz"}, {0, "limit=1&limit=2"},
		{0, "%zz=1"}, {0, "a;b=1&limit=5;6"}, {0, "offset=99999999999999999999"}, {1, "devices=false"},
		{1, "devices=no"}, {1, ""}, {2, "x=1"}, {3, "devices=false"}, {4, "limit=%"},
	} {
		f.Add(s.route, s.query)
	}
	h := fuzzServer(f, Options{}, 1).Handler()
	f.Fuzz(func(t *testing.T, route uint8, raw string) {
		if strings.ContainsAny(raw, " #\r\n\x00") {
			return // not in a request line's query
		}
		path := queryRoutes[int(route)%len(queryRoutes)]
		req := httptest.NewRequest("GET", "http://draforge.local"+path, nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest:
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != codeBadRequest {
				t.Fatalf("%s?%s: 400 without the bad_request envelope: %s", path, raw, rec.Body)
			}
			name, _, ok := strings.Cut(e.Error.Message, ": ")
			if !ok || !queryHasName(raw, name) {
				t.Fatalf("%s?%s: the rejection %q does not start with a parameter of the query", path, raw, e.Error.Message)
			}
			return
		default:
			t.Fatalf("%s?%s: status %d: %s", path, raw, rec.Code, rec.Body)
		}
		if path != "/api/occupancy" {
			return
		}
		var page OccupancyPage
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		if page.Limit < 1 || page.Limit > maxOccupancyLimit || page.Offset < 0 || len(page.Rows) > page.Limit || page.Total > page.Nodes {
			t.Fatalf("%s?%s: page out of bounds: %+v", path, raw, page)
		}
		// Where the standard parser reads the query too, the page is the one it names.
		if q, err := url.ParseQuery(raw); err == nil {
			want := defaultOccupancyLimit
			if s := q.Get("limit"); s != "" {
				want, _ = strconv.Atoi(s)
			}
			if page.Limit != want {
				t.Fatalf("%s?%s: answered limit %d", path, raw, page.Limit)
			}
		}
	})
}

// queryHasName: name is a parameter name of the raw query, as written or decoded (and, as
// JSON carries it, with invalid UTF-8 replaced by U+FFFD).
func queryHasName(raw, name string) bool {
	for _, pair := range strings.Split(raw, "&") {
		k, _, _ := strings.Cut(pair, "=")
		d, err := url.QueryUnescape(k)
		for _, c := range []string{k, d} {
			if (c == k || err == nil) && asJSON(c) == name {
				return true
			}
		}
	}
	return false
}

// FuzzStreamLastEventID opens /api/stream with an arbitrary Last-Event-ID after events 1..5
// of which the ring keeps 3..5. Invariants: no panic; the stream is never refused (status
// 200, as EventSource cannot change the id it sends); an id it can resume from gets exactly
// the missed events in order and no snapshot; any other value gets a comment naming
// Last-Event-ID and a snapshot of the latest id.
func FuzzStreamLastEventID(f *testing.F) {
	for _, s := range []string{"", "1", "2", "3", "5", "6", "99", "x", "-1", "+4", " 4", "04", "18446744073709551615",
		"18446744073709551616", "4\x00", "１"} {
		f.Add(s)
	}
	h := fuzzServer(f, Options{RingSize: 3}, 5).Handler()
	f.Fuzz(func(t *testing.T, last string) {
		if strings.ContainsAny(last, "\r\n") {
			return // net/http refuses such a header before any handler
		}
		req := httptest.NewRequest("GET", "http://draforge.local/api/stream", nil)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		// A canceled request: the handler writes what it owes the client at once, then ends.
		ctx, cancel := context.WithCancel(req.Context())
		cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		if rec.Code != http.StatusOK {
			t.Fatalf("Last-Event-ID %q: status %d: %s", last, rec.Code, rec.Body)
		}
		body := strings.TrimPrefix(rec.Body.String(), "retry: ")
		blocks := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")[1:] // after the retry hint
		n, err := strconv.ParseUint(last, 10, 64)
		if err == nil && n >= 2 && n <= 5 {
			if len(blocks) != int(5-n) {
				t.Fatalf("Last-Event-ID %q: want events %d..5, got %q", last, n+1, blocks)
			}
			for i, b := range blocks {
				if !strings.HasPrefix(b, fmt.Sprintf("id: %d\nevent: %s\n", n+1+uint64(i), EventChange)) {
					t.Fatalf("Last-Event-ID %q: event %d is %q", last, i, b)
				}
			}
			return
		}
		if last != "" {
			if len(blocks) == 0 || !strings.HasPrefix(blocks[0], ": Last-Event-ID ") || strings.Contains(blocks[0], "\n") {
				t.Fatalf("Last-Event-ID %q: no one-line comment naming the header before the snapshot: %q", last, body)
			}
			blocks = blocks[1:]
		}
		if len(blocks) != 1 || !strings.HasPrefix(blocks[0], "id: 5\nevent: "+EventSnapshot+"\n") {
			t.Fatalf("Last-Event-ID %q: want one snapshot of id 5, got %q", last, blocks)
		}
	})
}

// asJSON is s as it reads after a JSON round trip (each invalid UTF-8 byte becomes U+FFFD).
func asJSON(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}
