package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// SSE event names.
const (
	EventSnapshot = "snapshot" // the whole state changed or is unknown to the client: reload
	EventChange   = "change"   // one snapshot rebuild: the changed objects and the new counts
)

type sseEvent struct {
	id   uint64
	name string
	data []byte
}

func (e sseEvent) encode(b *bytes.Buffer) {
	if e.id > 0 {
		b.WriteString("id: ")
		b.WriteString(strconv.FormatUint(e.id, 10))
		b.WriteByte('\n')
	}
	b.WriteString("event: ")
	b.WriteString(e.name)
	b.WriteByte('\n')
	for _, line := range bytes.Split(e.data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
}

type sseClient struct {
	ch chan sseEvent
	// lag is signalled when an event could not be queued: the client then skips its queue and
	// gets one snapshot event instead, so a slow client never blocks the publisher.
	lag chan struct{}
}

// hub keeps a bounded ring of change events and fans them out to stream clients.
type hub struct {
	mu      sync.Mutex
	ring    []sseEvent // ring[i] has id first+i
	first   uint64
	last    uint64
	size    int
	buf     int
	max     int
	clients map[*sseClient]struct{}
	done    chan struct{}
	closed  bool
	gauge   func(n int)
}

func newHub(size, buf, max int, gauge func(int)) *hub {
	return &hub{size: size, buf: buf, max: max, clients: map[*sseClient]struct{}{}, done: make(chan struct{}), gauge: gauge, first: 1}
}

// publish appends an event built for the next id and offers it to every client.
func (h *hub) publish(name string, data func(id uint64) []byte) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last++
	ev := sseEvent{id: h.last, name: name, data: data(h.last)}
	h.ring = append(h.ring, ev)
	if len(h.ring) > h.size {
		drop := len(h.ring) - h.size
		h.ring = append([]sseEvent(nil), h.ring[drop:]...)
		h.first += uint64(drop)
	}
	for c := range h.clients {
		select {
		case c.ch <- ev:
		default:
			select {
			case c.lag <- struct{}{}:
			default:
			}
		}
	}
	return ev.id
}

var errTooManyStreams = errors.New("too many streams")

// subscribe registers a client and returns the events to replay after lastID, or resync=true
// when lastID is unknown or older than the ring (the client then gets a snapshot event).
func (h *hub) subscribe(lastID uint64, haveLast bool) (c *sseClient, replay []sseEvent, resync bool, latest uint64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, false, 0, http.ErrServerClosed
	}
	if len(h.clients) >= h.max {
		return nil, nil, false, 0, errTooManyStreams
	}
	c = &sseClient{ch: make(chan sseEvent, h.buf), lag: make(chan struct{}, 1)}
	h.clients[c] = struct{}{}
	h.gauge(len(h.clients))
	switch {
	case !haveLast || lastID > h.last || lastID+1 < h.first:
		resync = true
	default:
		for _, ev := range h.ring {
			if ev.id > lastID {
				replay = append(replay, ev)
			}
		}
	}
	return c, replay, resync, h.last, nil
}

func (h *hub) unsubscribe(c *sseClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	h.gauge(len(h.clients))
}

// drain empties a lagging client's queue and returns the id its snapshot event should carry.
func (h *hub) drain(c *sseClient) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		select {
		case <-c.ch:
		default:
			return h.last
		}
	}
}

// close ends every stream; later subscriptions fail.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

func (h *hub) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// stream serves GET /api/stream.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	var lastID uint64
	haveLast := false
	header := r.Header.Get("Last-Event-ID")
	if header != "" {
		if n, err := strconv.ParseUint(header, 10, 64); err == nil {
			lastID, haveLast = n, true
		}
	}
	c, replay, resync, latest, err := s.hub.subscribe(lastID, haveLast)
	switch {
	case errors.Is(err, errTooManyStreams):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, codeTooManyStreams, "too many event streams are open; retry later")
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, codeShuttingDown, "the server is shutting down")
		return
	}
	defer s.hub.unsubscribe(c)
	// The server's write timeout does not apply to a stream; each write gets its own deadline
	// instead, so a client that stops reading is dropped.
	// The read deadline would otherwise end the stream too: the server's background read of
	// the idle connection fails at the deadline and cancels the request.
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}

	var b bytes.Buffer
	b.WriteString("retry: " + strconv.FormatInt(s.o.RetryHint.Milliseconds(), 10) + "\n\n")
	if resync {
		// A Last-Event-ID the stream cannot resume from is not refused: EventSource cannot
		// change the id it sends and gives up on any answer but 200. The snapshot replaces
		// the replay, and a comment says why (EventSource ignores comments).
		if header != "" {
			b.WriteString(resyncComment(header, haveLast))
		}
		s.snapshotEvent(latest).encode(&b)
	}
	for _, ev := range replay {
		ev.encode(&b)
	}
	if !s.write(rc, w, &b) {
		return
	}
	heartbeat := time.NewTicker(s.o.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case ev := <-c.ch:
			ev.encode(&b)
			// Send whatever else is already queued in the same write.
			for more := true; more; {
				select {
				case ev := <-c.ch:
					ev.encode(&b)
				default:
					more = false
				}
			}
		case <-c.lag:
			b.Reset()
			s.metrics.sseCoalesced.Inc()
			s.snapshotEvent(s.hub.drain(c)).encode(&b)
		case <-heartbeat.C:
			b.WriteString(": heartbeat\n\n")
		case <-r.Context().Done():
			return
		case <-s.hub.done:
			return
		}
		if !s.write(rc, w, &b) {
			return
		}
	}
}

func (s *Server) write(rc *http.ResponseController, w http.ResponseWriter, b *bytes.Buffer) bool {
	defer b.Reset()
	_ = rc.SetWriteDeadline(time.Now().Add(s.o.StreamWriteTimeout))
	if _, err := w.Write(b.Bytes()); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// snapshotEvent tells a client to (re)load everything; its data is the summary.
func (s *Server) snapshotEvent(id uint64) sseEvent {
	var v *view
	if g := s.store.current(); g != nil {
		v = g.view()
	}
	data, err := marshal(s.summary(v))
	if err != nil {
		data = []byte(`{}`)
	}
	return sseEvent{id: id, name: EventSnapshot, data: data}
}

// resyncComment is the SSE comment naming the Last-Event-ID a stream could not resume from.
func resyncComment(header string, parsed bool) string {
	if len(header) > 40 {
		header = header[:40] + "..."
	}
	why := "is not a decimal event id"
	if parsed {
		why = "is not in the replay ring (too old, or from another server process)"
	}
	return ": Last-Event-ID " + strconv.Quote(header) + " " + why + ": a snapshot follows\n\n"
}
