package ssetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Handler answers one connection. It returns when the response is complete; the Server then ends it
// (a clean end of stream for the client).
type Handler func(s *Stream, r *http.Request)

// Server is a running scripted SSE server.
type Server struct {
	// URL is the base URL of the server, http://127.0.0.1:port.
	URL string

	srv      *httptest.Server
	handlers []Handler
	closing  chan struct{}
	once     sync.Once

	mu   sync.Mutex
	reqs []*http.Request // clones without bodies, in arrival order
}

// New starts a Server whose n-th connection is answered by handlers[n] (the last handler answers every
// later one) and registers its Close with t.Cleanup. It panics without handlers.
func New(t testing.TB, handlers ...Handler) *Server {
	t.Helper()
	if len(handlers) == 0 {
		panic("ssetest: New needs at least one handler")
	}
	s := &Server{handlers: handlers, closing: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close ends every open stream and shuts the server down, waiting for the handlers to return.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// CloseClientConnections cuts every open connection at once, as a network failure would.
func (s *Server) CloseClientConnections() { s.srv.CloseClientConnections() }

// Requests returns the requests received so far, in order. Their bodies are not kept.
func (s *Server) Requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*http.Request, len(s.reqs))
	copy(out, s.reqs)
	return out
}

// Connections returns how many requests the server has received.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, r.Clone(r.Context()))
	s.mu.Unlock()
	h := s.handlers[min(n, len(s.handlers)-1)]
	h(&Stream{w: w, rc: http.NewResponseController(w), req: r, closing: s.closing}, r)
}

// Stream is the response of one connection.
type Stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	req     *http.Request
	closing <-chan struct{}
	started bool
}

// Header returns the response header, to change before the first Write or Start.
func (s *Stream) Header() http.Header { return s.w.Header() }

// Start sends the status line and headers: 200 with Content-Type text/event-stream unless the handler set
// another content type. Write calls it when needed.
func (s *Stream) Start() {
	if s.started {
		return
	}
	s.started = true
	if s.w.Header().Get("Content-Type") == "" {
		s.w.Header().Set("Content-Type", "text/event-stream")
	}
	s.w.Header().Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	_ = s.rc.Flush()
}

// Write sends text to the client at once. It returns an error when the client is gone.
func (s *Stream) Write(text string) error {
	s.Start()
	if _, err := s.w.Write([]byte(text)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// Sleep waits d, or less if the client goes away or the Server closes. It reports whether the whole d
// passed.
func (s *Stream) Sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.req.Context().Done():
	case <-s.closing:
	}
	return false
}

// Hold keeps the response open until the client goes away or the Server closes.
func (s *Stream) Hold() {
	s.Start()
	select {
	case <-s.req.Context().Done():
	case <-s.closing:
	}
}

// Abort breaks the connection without ending the response, as a network reset would: the client sees
// an error instead of a clean end of stream. It does not return.
func (s *Stream) Abort() {
	panic(http.ErrAbortHandler)
}

// Status answers with code and the given header pairs (name, value, name, value...) and an empty body.
func Status(code int, header ...string) Handler {
	return func(s *Stream, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			s.Header().Set(header[i], header[i+1])
		}
		s.w.WriteHeader(code)
	}
}

// ContentType answers 200 with the given content type and body, then ends the response.
func ContentType(contentType, body string) Handler {
	return func(s *Stream, _ *http.Request) {
		s.Header().Set("Content-Type", contentType)
		_ = s.Write(body)
	}
}

// Script writes each part, flushing after each one, then ends the response when hold is false or keeps
// it open when hold is true. A part cut in the middle of an event, with hold false, is a stream that drops
// mid-event.
func Script(hold bool, parts ...string) Handler {
	return func(s *Stream, _ *http.Request) {
		for _, p := range parts {
			if s.Write(p) != nil {
				return
			}
		}
		if hold {
			s.Hold()
		}
	}
}

// LogConfig describes the numbered event log served by Log.
type LogConfig struct {
	// Events is how many events the log holds; event i (1-based) has id "i", type Type and data
	// Data(i). Zero means an endless log.
	Events int
	// Type is the event type written in an "event:" field. Empty means none (type "message").
	Type string
	// Data returns the data of event i. Nil means "event-<i>".
	Data func(i int) string
	// Every is the pause before each event. Zero means none.
	Every time.Duration
	// Cut, when not nil, is asked before each event how many bytes of it to write before ending the
	// connection (a value below the event's length cuts it mid-event); a negative answer writes it
	// whole. Nil means never cut.
	Cut func(i int, frame string) int
	// Hold keeps the connection open after the last event instead of ending it.
	Hold bool
	// Abort makes a cut break the connection (as a reset would) instead of ending the response cleanly.
	Abort bool
}

// Log serves a replayable numbered log: each connection starts after the event named by its
// Last-Event-ID header (from the first event without one, or with one that is not a number).
func Log(c LogConfig) Handler {
	data := c.Data
	if data == nil {
		data = func(i int) string { return "event-" + strconv.Itoa(i) }
	}
	return func(s *Stream, r *http.Request) {
		next := 1
		if n, err := strconv.Atoi(r.Header.Get("Last-Event-ID")); err == nil && n >= 0 {
			next = n + 1
		}
		s.Start()
		for i := next; c.Events == 0 || i <= c.Events; i++ {
			if c.Every > 0 && !s.Sleep(c.Every) {
				return
			}
			frame := Frame(strconv.Itoa(i), c.Type, data(i))
			if c.Cut != nil {
				if n := c.Cut(i, frame); n >= 0 && n < len(frame) {
					_ = s.Write(frame[:n])
					if c.Abort {
						s.Abort()
					}
					return
				}
			}
			if s.Write(frame) != nil {
				return
			}
		}
		if c.Hold {
			s.Hold()
		}
	}
}

// Frame returns one event in the text/event-stream format with LF line ends. Empty id or typ leave the
// field out. Data must not contain CR; each of its LF-separated lines becomes a data field.
func Frame(id, typ, data string) string {
	out := ""
	if id != "" {
		out += "id: " + id + "\n"
	}
	if typ != "" {
		out += "event: " + typ + "\n"
	}
	start := 0
	for i := 0; i <= len(data); i++ {
		if i == len(data) || data[i] == '\n' {
			out += "data: " + data[start:i] + "\n"
			start = i + 1
		}
	}
	return out + "\n"
}

// String describes the server for test logs.
func (s *Server) String() string { return fmt.Sprintf("ssetest.Server(%s)", s.URL) }

// IDBlock returns a block with an id field and no data: it fires no event but moves the stream's last
// event id.
func IDBlock(id string) string { return "id: " + id + "\n\n" }
