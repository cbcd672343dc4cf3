package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
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
	// Inbound publishes a client's message and returns the message that answers it, and the HTTP status a
	// POST of it would have got: 200 when it is published, 4xx when it was refused, 5xx when Kafka did not
	// take it. The caller sets it when Publish is allowed. It may wait (Kafka slow): the connection is not
	// read meanwhile.
	Inbound func(ctx context.Context, msg []byte) (reply []byte, status int)
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
	if o.Acks, err = flag(q, "ack"); err != nil {
		return o, err
	}
	if o.Hello, err = flag(q, "hello"); err != nil {
		return o, err
	}
	if o.Publish, err = flag(q, "publish"); err != nil {
		return o, err
	}
	if o.Results, err = flag(q, "publish_results"); err != nil {
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

// ServeWebSocket upgrades the request to a WebSocket and streams the topics of ts on it, as Serve (one topic)
// or ServeTopics (several) do on an event stream; the caller has validated the request (and its Origin). A
// request that cannot be upgraded is answered by the upgrade itself, and ends as client_gone. onEnd, when not
// nil, is called once with the reason the stream ended (for one topic, in place of its Params.OnEnd).
func (s *Server) ServeWebSocket(w http.ResponseWriter, r *http.Request, ts []TopicStream, onEnd func(CloseReason), o WSOptions) Outcome {
	mode := websocket.CompressionDisabled
	if s.cfg.WS.Compression {
		mode = websocket.CompressionContextTakeover
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: mode})
	if err != nil {
		if onEnd != nil {
			onEnd(ReasonClientGone)
		}
		return Outcome{Reason: ReasonClientGone}
	}
	s.sockets.Add(1)
	defer s.sockets.Add(-1)
	ws.SetReadLimit(s.cfg.WS.ReadLimit)
	// Two lifetimes: the connection's (ctx, ended when its reads fail: the client is gone), which bounds the
	// writes, and the stream's (run), which a client breaking the protocol ends too. A write's context must
	// not end while the connection lives: the library closes a connection whose write context ends, even
	// one ending just after the write went out, and the client would get no close frame saying why.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	run, stop := context.WithCancel(ctx)
	defer stop()
	sink := newWSSink(ctx, s, run.Done(), ws, o, ts[0].Topic.Name)
	ts = slices.Clone(ts)
	if o.Hello {
		if err := sink.hello(ctx, &ts[0].Params); err != nil {
			for _, t := range ts {
				t.Stats.Closed[ReasonClientGone].Add(1) // a stream that never started, counted as ended
			}
			if onEnd != nil {
				onEnd(ReasonClientGone)
			}
			sink.close(ReasonClientGone, err)
			return Outcome{Reason: ReasonClientGone}
		}
		for i := range ts {
			ts[i].Params.LastEventID = ts[0].Params.LastEventID
		}
	}
	// The reads outlive the stream: a read whose context ends closes the connection at once, and the close
	// frame must go out first. They end with the connection; a read that fails ends the stream.
	read := make(chan struct{})
	go func() {
		defer close(read)
		sink.readLoop(context.WithoutCancel(ctx), cancel, stop)
	}()
	var reason CloseReason
	if len(ts) == 1 {
		p := ts[0].Params
		p.OnEnd = onEnd
		ts[0].Stats.Open.Add(1)
		c := &conn{
			s: s, t: ts[0].Topic, p: p.kept(ts[0].Topic), stats: ts[0].Stats, draining: s.draining, remote: r.RemoteAddr,
			meta: true, parent: spanParent(r.Context()), out: sink,
		}
		c.setExpiry(&p, monoNow(), time.Now())
		reason = c.run(run, p)
		c.end(reason)
	} else {
		ts = sortedTopics(ts)
		m := newMux(ts, sink)
		reason = m.run(run, s, ts, r.RemoteAddr, spanParent(r.Context()), s.leaving.Load(), func(c *conn) { c.meta = true })
		if onEnd != nil {
			onEnd(reason)
		}
	}
	sink.close(reason, nil)
	<-read
	return Outcome{Reason: reason}
}

// wsSink turns the SSE frames a stream writes into WebSocket messages.
type wsSink struct {
	ctx   context.Context //nolint:containedctx // the connection's: a client that leaves ends every wait of a write
	srv   *Server         // whose budget of unfinished writes the sink's writes hold
	stop  <-chan struct{} // closed when the stream ends early (the client broke the protocol): waits for room end
	ws    *websocket.Conn
	o     WSOptions
	topic string

	pend     []byte // bytes of a frame not whole yet
	opened   bool   // a message went out
	openSent bool   // the open message went out
	retry    int64  // the retry line that came before the open message, for it; valid with hasRetry
	hasRetry bool
	lastID   []byte // the id of the last message sent: the client's position
	msg      []byte // scratch

	// publishing: the read loop is publishing a message of the client's (Inbound), so its pongs and
	// acknowledgements wait unread; the time does not count against the client (ping, waitRoom), nor does
	// a write timeout after it ended (published, monoNow), for what waited behind it to be read.
	publishing atomic.Bool
	published  atomic.Int64

	mu       sync.Mutex
	inflight []uint64      // the idHash of each message not acknowledged yet, in order
	room     chan struct{} // signaled when acknowledgements make room
	bad      error         // why the stream ended early (the client did wrong, a message was not published), for the close
	badCode  websocket.StatusCode
}

func newWSSink(ctx context.Context, srv *Server, stop <-chan struct{}, ws *websocket.Conn, o WSOptions, topic string) *wsSink {
	return &wsSink{ctx: ctx, srv: srv, stop: stop, ws: ws, o: o, topic: topic, room: make(chan struct{}, 1)}
}

// errAckTimeout: the client acknowledged nothing for the write timeout with MaxInFlight messages waiting.
var errAckTimeout = errors.New("stream: messages not acknowledged within the write timeout")

// write turns the frames of spans into messages and sends them. It holds the pod's budget of unfinished writes
// (Config.PendingBytes) itself, for the bytes not sent yet, only while it sends: with acknowledgements it
// waits for room between messages, and a client that acknowledges slowly must not hold the budget other
// clients' writes need meanwhile (its own bound is max_in_flight). The write timeout bounds the sending
// between two waits for room, and each wait: a client is too slow when it takes no message, or acknowledges
// nothing, for that long, not when a batch of many messages takes longer than it in all.
func (s *wsSink) write(spans [][]byte, timeout time.Duration) (int, error) {
	for _, b := range spans {
		s.pend = append(s.pend, b...)
	}
	n := 0
	for {
		m, blocked, err := s.sendSome(timeout)
		n += m
		if err != nil || !blocked {
			if len(s.pend) == 0 && cap(s.pend) > wsKeepPend {
				s.pend = nil
			}
			return n, err
		}
		if err := s.waitRoom(timeout); err != nil {
			return n, err
		}
	}
}

// sendSome sends the whole frames pend holds, within one write timeout, holding the bytes not sent yet, until
// a message needs room that acknowledgements have not made yet (blocked).
func (s *wsSink) sendSome(timeout time.Duration) (n int, blocked bool, err error) {
	if !bytes.Contains(s.pend, []byte("\n\n")) {
		return 0, false, nil
	}
	held := len(s.pend)
	if !s.srv.hold(held) {
		return 0, false, errPending
	}
	defer s.srv.release(held)
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	for {
		i := bytes.Index(s.pend, []byte("\n\n"))
		if i < 0 {
			return n, false, nil
		}
		f := parseWSFrame(s.pend[:i+1])
		if f.hasData && s.o.Acks && !s.hasRoom() {
			return n, true, nil
		}
		m, err := s.send(ctx, f, timeout)
		n += m
		s.pend = s.pend[:copy(s.pend, s.pend[i+2:])]
		if err != nil {
			return n, false, err
		}
	}
}

// holdsOwn says the sink holds the bytes of its writes itself (see write).
func (s *wsSink) holdsOwn() bool { return true }

// send sends what f says: a ping for a keep-alive (answered within timeout), else one message.
func (s *wsSink) send(ctx context.Context, f wsFrame, timeout time.Duration) (int, error) {
	if !f.hasData && f.id == nil {
		if f.comment {
			return 0, s.ping(timeout)
		}
		return 0, nil // a retry line alone: the stream ends before it says where it is
	}
	s.msg = s.appendMessage(s.msg[:0], f)
	s.lastID = append(s.lastID[:0], f.id...)
	if f.hasData && s.o.Acks {
		s.waitAck(f.id)
	}
	n, err := len(s.msg), s.ws.Write(ctx, websocket.MessageText, s.msg)
	if cap(s.msg) > wsKeepMsg {
		s.msg = nil // a big record's message is not kept for the rest of the connection
	}
	return n, err
}

// waitAck counts the message with id as waiting for its acknowledgement.
func (s *wsSink) waitAck(id []byte) {
	s.mu.Lock()
	s.inflight = append(s.inflight, idHash(id))
	s.mu.Unlock()
}

// What a socket keeps of its scratch between writes: a big record's frame and message are let go once sent,
// so that one big record does not cost its size twice for the connection's life.
const (
	wsKeepMsg  = 16 << 10
	wsKeepPend = 128 << 10 // two writes of 64 KiB, what a catch-up sends
)

// idSeed seeds idHash, differently in every process, so that a client cannot choose an id that collides with
// another.
var idSeed = maphash.MakeSeed()

// idHash is what a socket keeps of a message waiting for its acknowledgement: 8 bytes, however long its id (a
// several-topic id over many partitions is kilobytes, and up to 10,000 may wait). An acknowledgement names an
// id; one whose hash is another's (a chance of 2^-64) would acknowledge that one, to its own client's harm
// only.
func idHash(id []byte) uint64 { return maphash.Bytes(idSeed, id) }

// ping pings the client and waits for its pong, at most timeout of the client's own time: while the read loop
// publishes a message of the client's (which may take longer than timeout when Kafka is slow), the pong cannot
// be read, and the wait goes on until a timeout has passed with nothing being published.
func (s *wsSink) ping(timeout time.Duration) error {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	pong := make(chan error, 1)
	go func() { pong <- s.ws.Ping(ctx) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case err := <-pong:
			return err
		case <-t.C:
			if rest := s.publishWait(timeout); rest > 0 {
				t.Reset(rest)
				continue
			}
			cancel()
			if err := <-pong; err == nil {
				return nil // the pong came as the wait ended
			}
			return errPongTimeout
		}
	}
}

// publishWait is how much longer a wait of the client's that timed out goes on because of a publish: all of
// timeout while one is under way, and what is left of timeout since one ended; 0 for none.
func (s *wsSink) publishWait(timeout time.Duration) time.Duration {
	if s.publishing.Load() {
		return timeout
	}
	if end := s.published.Load(); end != 0 {
		return timeout - time.Duration(monoNow()-end)
	}
	return 0
}

// errPongTimeout: the client answered no ping within the write timeout.
var errPongTimeout = errors.New("stream: no pong within the write timeout")

// hasRoom says fewer than MaxInFlight messages wait for acknowledgement.
func (s *wsSink) hasRoom() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight) < s.o.MaxInFlight
}

// waitRoom waits until fewer than MaxInFlight messages wait for acknowledgement, at most timeout without an
// acknowledgement.
func (s *wsSink) waitRoom(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for !s.hasRoom() {
		select {
		case <-s.room:
		case <-s.stop:
			return context.Canceled // the stream ended: the close says why
		case <-s.ctx.Done():
			return s.ctx.Err()
		case <-t.C:
			if rest := s.publishWait(timeout); rest > 0 {
				t.Reset(rest) // its acknowledgements wait unread behind the message being published
				continue
			}
			return errAckTimeout
		}
	}
	return nil
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
// messages to publish; anything else ends the stream (stop) and closes the connection as a policy violation.
// A read that fails ends the connection (gone).
func (s *wsSink) readLoop(ctx context.Context, gone, stop context.CancelFunc) {
	defer stop()
	for {
		typ, b, err := s.ws.Read(ctx)
		if err != nil {
			gone()
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
		s.publishing.Store(true)
		reply, status := s.o.Inbound(ctx, b)
		s.published.Store(monoNow())
		s.publishing.Store(false)
		if status != http.StatusOK && !s.o.Results {
			// Without answers, a message not published closes the connection: the client learns that it and
			// every message after it were not published. Kafka's failures are the server's (1011: send again).
			code := websocket.StatusPolicyViolation
			if status >= http.StatusInternalServerError {
				code = websocket.StatusInternalError
			}
			s.failWith(code, fmt.Errorf("message not published: %s", reply))
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

// parseAck returns the id of an acknowledgement, {"ack": "<id>"} and nothing else. The form clients send
// ({"ack":"v1:..."}, no spaces, nothing to unescape) is read without a decoder.
func parseAck(b []byte) (string, bool) {
	if id, ok := bytes.CutPrefix(b, []byte(`{"ack":"`)); ok {
		if id, ok := bytes.CutSuffix(id, []byte(`"}`)); ok && !bytes.ContainsAny(id, `"\\`) {
			return string(id), true
		}
	}
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

// fail ends the stream for what the client did wrong: the connection closes with 1008 and err.
func (s *wsSink) fail(err error) { s.failWith(websocket.StatusPolicyViolation, err) }

// failWith ends the stream early: the connection closes with code and err.
func (s *wsSink) failWith(code websocket.StatusCode, err error) {
	s.mu.Lock()
	s.bad, s.badCode = err, code
	s.mu.Unlock()
}

// ack acknowledges every message up to the last one with id; false when no message waiting has it.
func (s *wsSink) ack(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, last := maphash.String(idSeed, id), -1
	for i, x := range s.inflight {
		if x == h {
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
	badCode := websocket.StatusPolicyViolation // an error of the caller's: the hello broke the protocol
	if err == nil {
		s.mu.Lock()
		err = s.bad
		if s.bad != nil {
			badCode = s.badCode
		}
		s.mu.Unlock()
	}
	code, text := websocket.StatusNormalClosure, reason.String()
	switch {
	case err != nil:
		code, text = badCode, err.Error()
	case reason == ReasonClientGone:
		_ = s.ws.CloseNow()
		return
	case reason == ReasonShutdown:
		code, text = websocket.StatusGoingAway, "going away: reconnect from the last id"
		if s.opened {
			// The drain's message of its own, as resync and token-expiring have theirs: where the client is.
			msg := s.appendMessage(nil, wsFrame{id: s.lastID, event: eventDrain, hasData: true, data: []byte(`{"reason":"shutdown"}`)})
			ctx, cancel := context.WithTimeout(s.ctx, time.Second)
			_ = s.ws.Write(ctx, websocket.MessageText, msg)
			cancel()
		}
	case reason == ReasonTokenExpired:
		code, text = CloseTokenExpired, "token expired: reconnect with a new token from the last id"
	case reason == ReasonWriteFailed:
		code, text = CloseTooSlow, "too slow: messages not taken or acknowledged within the write timeout"
	case reason == ReasonReplayFailed || reason == ReasonBehind:
		code, text = websocket.StatusInternalError, "could not read what the stream needs from Kafka: reconnect from the last id"
	}
	text = cutUTF8(text, 120) // a close frame's reason fits 123 bytes
	// Close waits for the client's close frame, a few seconds at most, then closes the connection.
	_ = s.ws.Close(code, text)
}
