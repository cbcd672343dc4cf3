package stream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel/trace"
)

// The WebSocket transport: the same stream (start, resume, ring, replay, filters, token moments, drain) on a
// WebSocket, each SSE frame the stream writes sent as one JSON message by wsSink. Record frames carry their
// partition, offset and key to it (conn.meta). Optionally the client acknowledges what it processed, and at
// most MaxInFlight messages wait unacknowledged.

// WSOptions are a WebSocket stream's own query parameters.
type WSOptions struct {
	// Format is how messages are written: "json" (the gateway's fields) or "cloudevents" (structured
	// CloudEvents JSON).
	Format string
	// Acks: the client acknowledges messages ({"ack": "<id>"}, cumulative); at most MaxInFlight wait.
	Acks        bool
	MaxInFlight int
	// Hello: the client sends its position in its first message ({"last_event_id": "<id>"}), not in the URL.
	Hello bool
	// Publish: the client's messages other than acknowledgements are published (publish=1); Results: each is
	// answered (publish_results=1).
	Publish, Results bool
	// Inbound publishes a client's message and returns the message that answers it, and whether it was
	// taken; the caller sets it when Publish is allowed. It may wait (Kafka slow): the connection is not read
	// meanwhile.
	Inbound func(ctx context.Context, msg []byte) (reply []byte, ok bool)
}

// WSConfig is the WebSocket transport's configuration.
type WSConfig struct {
	// ReadLimit bounds a client message; a larger one closes the connection (1009).
	ReadLimit int64
	// Compression offers permessage-deflate.
	Compression bool
}

// Close codes of a WebSocket stream, besides RFC 6455's (1001 going away, 1008 policy violation, 1009 too big,
// 1011 internal error).
const (
	// CloseTokenExpired: the stream's token expired; reconnect with a new one from the last id.
	CloseTokenExpired websocket.StatusCode = 4001
	// CloseTooSlow: the client did not take a message, or acknowledge, within the write timeout.
	CloseTooSlow websocket.StatusCode = 4002
)

// ParseWSOptions reads a WebSocket stream's own parameters: format, ack, max_in_flight, hello.
func ParseWSOptions(q url.Values) (WSOptions, error) {
	o := WSOptions{Format: "json", MaxInFlight: 100}
	if v, ok, err := single(q, "format"); err != nil {
		return o, err
	} else if ok {
		if v != "json" && v != "cloudevents" {
			return o, &ParamError{Param: "format", Msg: fmt.Sprintf("want json or cloudevents, got %q", v)}
		}
		o.Format = v
	}
	var err error
	if o.Acks, err = boolParam(q, "ack"); err != nil {
		return o, err
	}
	if o.Hello, err = boolParam(q, "hello"); err != nil {
		return o, err
	}
	if o.Publish, err = boolParam(q, "publish"); err != nil {
		return o, err
	}
	if o.Results, err = boolParam(q, "publish_results"); err != nil {
		return o, err
	}
	if o.Results && !o.Publish {
		return o, &ParamError{Param: "publish_results", Msg: "needs publish=1"}
	}
	if v, ok, err := single(q, "max_in_flight"); err != nil {
		return o, err
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return o, &ParamError{Param: "max_in_flight", Msg: fmt.Sprintf("want 1 to 10000, got %q", v)}
		}
		if !o.Acks {
			return o, &ParamError{Param: "max_in_flight", Msg: "needs ack=1"}
		}
		o.MaxInFlight = n
	}
	return o, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	v, ok, err := single(q, name)
	if err != nil || !ok {
		return false, err
	}
	switch v {
	case "", "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	}
	return false, &ParamError{Param: name, Msg: fmt.Sprintf("want 1, true, 0 or false, got %q", v)}
}

// ServeWebSocket upgrades the request to a WebSocket and streams topic t on it, as Serve does on an event
// stream; the caller has validated the request (and its Origin). A request that cannot be upgraded is
// answered by the upgrade itself, and ends as client_gone.
func (s *Server) ServeWebSocket(w http.ResponseWriter, r *http.Request, t *Topic, p Params, o WSOptions, stats *Stats) Outcome {
	mode := websocket.CompressionDisabled
	if s.cfg.WS.Compression {
		mode = websocket.CompressionContextTakeover
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: mode})
	if err != nil {
		if p.OnEnd != nil {
			p.OnEnd(ReasonClientGone)
		}
		return Outcome{Reason: ReasonClientGone}
	}
	s.sockets.Add(1)
	defer s.sockets.Add(-1)
	ws.SetReadLimit(s.cfg.WS.ReadLimit)
	stats.Open.Add(1)
	c := &conn{
		s: s, t: t, p: p, stats: stats, draining: s.draining, remote: r.RemoteAddr, meta: true,
		parent: trace.SpanContextFromContext(r.Context()),
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sink := newWSSink(ctx, ws, o, t.Name)
	if o.Hello {
		if err := sink.hello(ctx, &c.p); err != nil {
			c.end(ReasonClientGone)
			sink.close(ReasonClientGone, err)
			return Outcome{Reason: ReasonClientGone}
		}
	}
	c.setExpiry(monoNow(), time.Now())
	c.out = sink
	// The reads outlive the stream: a read whose context ends closes the connection at once, and the close
	// frame must go out first. They end with the connection; a read that fails ends the stream.
	read := make(chan struct{})
	go func() {
		defer close(read)
		sink.readLoop(context.WithoutCancel(ctx), cancel)
	}()
	reason := c.run(ctx)
	c.end(reason)
	sink.close(reason, nil)
	<-read
	return Outcome{Reason: reason}
}

// wsSink turns the SSE frames a stream writes into WebSocket messages.
type wsSink struct {
	ctx   context.Context //nolint:containedctx // the stream's: a client that leaves ends every wait of a write
	ws    *websocket.Conn
	o     WSOptions
	topic string

	pend   []byte // bytes of a frame not whole yet
	opened bool   // the opening message went out
	msg    []byte // scratch

	mu       sync.Mutex
	inflight []string      // ids of messages not acknowledged yet, in order
	room     chan struct{} // signaled when acknowledgements make room
	bad      error         // what the client did wrong, for the close
}

func newWSSink(ctx context.Context, ws *websocket.Conn, o WSOptions, topic string) *wsSink {
	return &wsSink{ctx: ctx, ws: ws, o: o, topic: topic, room: make(chan struct{}, 1)}
}

// errAckTimeout: the client acknowledged nothing for the write timeout with MaxInFlight messages waiting.
var errAckTimeout = errors.New("stream: messages not acknowledged within the write timeout")

func (s *wsSink) write(spans [][]byte, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	for _, b := range spans {
		s.pend = append(s.pend, b...)
	}
	n := 0
	for {
		i := bytes.Index(s.pend, []byte("\n\n"))
		if i < 0 {
			return n, nil
		}
		frame := s.pend[:i+1]
		m, err := s.send(ctx, parseWSFrame(frame))
		n += m
		s.pend = s.pend[:copy(s.pend, s.pend[i+2:])]
		if err != nil {
			return n, err
		}
	}
}

// wsFrame is an SSE frame's fields.
type wsFrame struct {
	id, event, data []byte
	hasData         bool
	retry           int64 // -1 for none
	meta            []byte
	comment         bool // comments alone: a keep-alive
}

func parseWSFrame(frame []byte) wsFrame {
	f := wsFrame{retry: -1}
	var data [][]byte
	for line := range bytes.Lines(frame) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		switch {
		case bytes.HasPrefix(line, metaPrefix[:len(metaPrefix)-1]):
			f.meta = line[len(metaPrefix):]
		case len(line) > 0 && line[0] == ':':
			f.comment = true
		case bytes.HasPrefix(line, []byte("id: ")):
			f.id = line[len("id: "):]
		case bytes.HasPrefix(line, []byte("event: ")):
			f.event = line[len("event: "):]
		case bytes.HasPrefix(line, []byte("data: ")) || bytes.Equal(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
			f.hasData = true
		case bytes.HasPrefix(line, []byte("retry: ")):
			f.retry, _ = strconv.ParseInt(string(line[len("retry: "):]), 10, 64)
		}
	}
	f.data = bytes.Join(data, []byte("\n"))
	return f
}

// send sends what f says: a ping for a keep-alive, else one message.
func (s *wsSink) send(ctx context.Context, f wsFrame) (int, error) {
	if !f.hasData && f.id == nil {
		if f.comment {
			return 0, s.ws.Ping(ctx)
		}
		return 0, nil // a retry line alone: the stream ends before it says where it is
	}
	if f.hasData && s.o.Acks {
		if err := s.waitRoom(ctx); err != nil {
			return 0, err
		}
	}
	s.msg = s.appendMessage(s.msg[:0], f)
	if f.hasData && s.o.Acks {
		s.mu.Lock()
		s.inflight = append(s.inflight, string(f.id))
		s.mu.Unlock()
	}
	return len(s.msg), s.ws.Write(ctx, websocket.MessageText, s.msg)
}

// waitRoom waits until fewer than MaxInFlight messages wait for acknowledgement.
func (s *wsSink) waitRoom(ctx context.Context) error {
	for {
		s.mu.Lock()
		n := len(s.inflight)
		s.mu.Unlock()
		if n < s.o.MaxInFlight {
			return nil
		}
		select {
		case <-s.room:
		case <-ctx.Done():
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			return errAckTimeout
		}
	}
}

// appendMessage appends the JSON message of f.
func (s *wsSink) appendMessage(dst []byte, f wsFrame) []byte {
	m := map[string]any{}
	event := string(f.event)
	switch {
	case !f.hasData && !s.opened:
		event = "open"
		if f.retry >= 0 {
			m["retry"] = f.retry
		}
	case !f.hasData:
		event = "position"
	case event == "":
		event = "message"
	}
	s.opened = true
	m["id"] = string(f.id)
	if f.hasData {
		m["data"] = jsonValue(f.data)
	}
	var key any
	if f.meta != nil {
		var part int32
		var off int64
		var k string
		if _, err := fmt.Sscanf(string(f.meta), "%d %d %s", &part, &off, &k); err == nil {
			m["partition"], m["offset"] = part, off
			if k != "-" {
				key = keyValue(k)
			}
		}
	}
	if s.o.Format == "cloudevents" {
		ce := map[string]any{"specversion": "1.0", "id": m["id"], "source": "/topics/" + s.topic, "type": event}
		if f.hasData {
			ce["data"] = m["data"]
			ce["datacontenttype"] = "text/plain"
			if json.Valid(f.data) {
				ce["datacontenttype"] = "application/json"
			}
		}
		if key != nil {
			ce["subject"] = key
		}
		if p, ok := m["partition"]; ok {
			ce["kafkapartition"], ce["kafkaoffset"] = p, m["offset"]
		}
		if r, ok := m["retry"]; ok {
			ce["retry"] = r
		}
		m = ce
	} else {
		m["event"] = event
		if key != nil {
			m["key"] = key
		}
	}
	b, _ := json.Marshal(m) // strings, numbers and raw JSON always marshal
	return append(dst, b...)
}

// jsonValue is data as JSON when it is JSON, else as a string.
func jsonValue(data []byte) any {
	if json.Valid(data) {
		return json.RawMessage(bytes.Clone(data))
	}
	return string(data)
}

// keyValue is a key (base64 in a meta line) as text when it is UTF-8, else "base64:" and its base64, as
// value-format auto writes values.
func keyValue(b64 string) string {
	k, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return ""
	}
	if utf8.Valid(k) {
		return string(k)
	}
	return "base64:" + b64
}

// hello reads the client's first message, its position: {"last_event_id": "<id>"} ("" for none).
func (s *wsSink) hello(ctx context.Context, p *Params) error {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	typ, b, err := s.ws.Read(hctx)
	if err != nil {
		return err
	}
	var h struct {
		LastEventID *string `json:"last_event_id"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if typ != websocket.MessageText || dec.Decode(&h) != nil || h.LastEventID == nil {
		s.bad = errors.New(`the first message must be {"last_event_id": "<id or empty>"} (hello=1)`)
		return s.bad
	}
	if *h.LastEventID != "" {
		p.LastEventID = *h.LastEventID
	}
	return nil
}

// readLoop reads the client's messages until the connection ends: acknowledgements and, with publishing on,
// messages to publish; anything else closes the connection as a policy violation. A read that fails ends the
// stream (cancel).
func (s *wsSink) readLoop(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	for {
		typ, b, err := s.ws.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			s.fail(errors.New("binary message: the client sends JSON text"))
			return
		}
		if ack, isAck := parseAck(b); isAck {
			switch {
			case !s.o.Acks:
				s.fail(errors.New("acknowledgement on a stream without ack=1"))
				return
			case !s.ack(ack):
				s.fail(fmt.Errorf("acknowledgement of %q, which is not an id waiting for one", ack))
				return
			}
			continue
		}
		if s.o.Inbound == nil {
			s.fail(errors.New(`unexpected message: without publish=1 the client sends only {"ack": "<id>"}`))
			return
		}
		reply, ok := s.o.Inbound(ctx, b)
		if !ok && !s.o.Results {
			s.fail(fmt.Errorf("message not published: %s", reply))
			return
		}
		if s.o.Results {
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			err := s.ws.Write(wctx, websocket.MessageText, reply)
			wcancel()
			if err != nil {
				return
			}
		}
	}
}

// parseAck returns the id of an acknowledgement, {"ack": "<id>"} and nothing else.
func parseAck(b []byte) (string, bool) {
	var m struct {
		Ack *string `json:"ack"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&m) != nil || m.Ack == nil {
		return "", false
	}
	return *m.Ack, true
}

func (s *wsSink) fail(err error) {
	s.mu.Lock()
	s.bad = err
	s.mu.Unlock()
}

// ack acknowledges every message up to the last one with id; false when no message waiting has it.
func (s *wsSink) ack(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := -1
	for i, x := range s.inflight {
		if x == id {
			last = i
		} else if last >= 0 {
			break
		}
	}
	if last < 0 {
		return false
	}
	s.inflight = s.inflight[:copy(s.inflight, s.inflight[last+1:])]
	select {
	case s.room <- struct{}{}:
	default:
	}
	return true
}

// close closes the WebSocket with the code and reason of the stream's end.
func (s *wsSink) close(reason CloseReason, err error) {
	s.mu.Lock()
	bad := s.bad
	s.mu.Unlock()
	if err == nil {
		err = bad
	}
	code, text := websocket.StatusNormalClosure, reason.String()
	switch {
	case err != nil:
		code, text = websocket.StatusPolicyViolation, err.Error()
	case reason == ReasonClientGone:
		_ = s.ws.CloseNow()
		return
	case reason == ReasonShutdown:
		code, text = websocket.StatusGoingAway, "going away: reconnect from the last id"
	case reason == ReasonTokenExpired:
		code, text = CloseTokenExpired, "token expired: reconnect with a new token from the last id"
	case reason == ReasonWriteFailed:
		code, text = CloseTooSlow, "too slow: messages not taken or acknowledged within the write timeout"
	case reason == ReasonReplayFailed || reason == ReasonBehind:
		code, text = websocket.StatusInternalError, "could not read what the stream needs from Kafka: reconnect from the last id"
	}
	if len(text) > 120 {
		text = text[:120] // a close frame's reason fits 123 bytes
	}
	// Close waits for the client's close frame, a few seconds at most, then closes the connection.
	_ = s.ws.Close(code, text)
}
