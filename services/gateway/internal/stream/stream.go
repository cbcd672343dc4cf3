package stream

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// Config configures a Server.
type Config struct {
	// Retry is the reconnection delay sent to clients in the "retry:" line. Zero means 3 seconds.
	Retry time.Duration
	// WriteTimeout bounds each write of a batch of frames; a client that does not take the bytes in time is
	// disconnected. Zero means 10 seconds.
	WriteTimeout time.Duration
	// Drain is the window over which open streams are closed when the server drains, each at a random moment
	// in it, so that clients do not all reconnect at once. Zero means they all close at once.
	Drain time.Duration
	// MaxWriteBytes bounds the frame bytes written between two flushes. Zero means 64 KiB.
	MaxWriteBytes int
	// PendingBytes bounds, pod-wide, the bytes of writes to clients that have not finished: writes under way
	// on streams' own goroutines (their frames stay referenced, even once the ring evicted them) and the
	// rest of a writer's write that a full socket did not take (copied for the stream's goroutine to write).
	// A write that would pass the bound is not made: its stream ends as write_failed and its client resumes
	// from its last whole frame, so clients that stop reading cannot hold the pod's memory. Writes to
	// clients that read finish at once and hold nothing for long. Zero means no bound.
	PendingBytes int64
	// Writers is the number of writer goroutines that serve idle HTTP/1.1 streams, whose connections are
	// taken over from net/http (see pool.go). Zero means none: every stream keeps its handler goroutine.
	Writers int
	// Linger is how long the writer pool waits after a publish before it writes, so that more frames go out
	// in each write. Zero means it writes at once.
	Linger time.Duration
	// CatchUps is how many catch-ups (streams reading back from Kafka, or from far back in the ring) build
	// and write at once; they wait for the writers' passes too (see liveFirst). Zero means half the CPUs, at
	// least one.
	CatchUps int
	// Snapshots is how many from=snapshot streams build their snapshot at once (each holds its snapshot's
	// frames until the cut); the others wait their turn, with keep-alives. Zero means 2.
	Snapshots int
	// Logger receives connection logs. Nil means slog.Default().
	Logger *slog.Logger
	// Tracer starts the spans of stream starts and resumes, children of the trace context in the request's
	// context (a traceparent the caller extracted). Nil means a no-op tracer: no spans.
	Tracer trace.Tracer
	// Observer receives resume latencies and sampled delivery lags (see Observer). Nil means none.
	Observer Observer
	// WS configures the WebSocket transport (ws.go). A zero ReadLimit means 64 KiB.
	WS WSConfig
}

// Indexes of Stats.Resyncs.
const (
	resyncRetention = iota
	resyncAhead
	resyncInvalid
	numResyncs
)

// ResyncReasons lists the resync reasons in the order of Stats.Resyncs.
var ResyncReasons = [numResyncs]string{ResyncRetention, ResyncAhead, ResyncInvalidID}

// Stats are a topic's connection counters. The zero value is ready to use.
type Stats struct {
	Open   atomic.Int64 // connections open now
	Parked atomic.Int64 // connections served by the writer pool now (a part of Open)
	Frames atomic.Int64 // frames written
	Bytes  atomic.Int64 // bytes written, frames and everything else
	Writes atomic.Int64 // writes that carried frames: system calls on the writer pool, flushes on a stream's goroutine
	Closed [numReasons]atomic.Int64

	ResumedFromRing  atomic.Int64             // resumes and catch-ups served from the ring alone
	ResumedFromKafka atomic.Int64             // resumes and catch-ups that read from Kafka
	Resyncs          [numResyncs]atomic.Int64 // resync frames, by reason (see ResyncReasons)
	Skipped          atomic.Int64             // offsets clients will never get, reported by resyncs

	TokenNotices  atomic.Int64 // token-expiring frames written (see Params.ExpiryNotice)
	SlowConflated atomic.Int64 // streams that fell behind the ring and went on conflated (Topic.SlowConflate)

	SnapshotsIndexed atomic.Int64 // snapshots copied from the ring's key index
	SnapshotsRead    atomic.Int64 // snapshots read from the topic (ring, replay cache, Kafka), and resumed ones
}

// Server serves SSE streams from rings.
type Server struct {
	cfg       Config
	log       *slog.Logger
	drainOnce sync.Once
	draining  chan struct{}
	leaving   atomic.Bool   // see Leave
	sockets   atomic.Int64  // WebSocket streams open (ws.go), which net/http does not track
	pool      *pool         // nil when Writers is zero
	live      *liveFirst    // catch-ups after live delivery
	snapshots chan struct{} // the snapshots being built (Config.Snapshots)
	tracer    trace.Tracer
	pending   atomic.Int64 // bytes of writes not finished (see Config.PendingBytes)
	conflated atomic.Int64 // bytes conflated streams hold (ConflatedBytes)
}

// PendingBytes returns the bytes of writes to clients not finished now (see Config.PendingBytes).
func (s *Server) PendingBytes() int64 { return s.pending.Load() }

// hold counts n more bytes of writes not finished, unless they would pass Config.PendingBytes; release gives
// them back.
func (s *Server) hold(n int) bool {
	if s.pending.Add(int64(n)) > s.cfg.PendingBytes && s.cfg.PendingBytes > 0 {
		s.pending.Add(-int64(n))
		return false
	}
	return true
}

func (s *Server) release(n int) { s.pending.Add(-int64(n)) }

// NewServer returns a Server with cfg's zero fields set to their defaults. With a writer pool, Close stops it.
func NewServer(cfg Config) *Server {
	if cfg.Retry == 0 {
		cfg.Retry = 3 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.WS.ReadLimit == 0 {
		cfg.WS.ReadLimit = 64 << 10
	}
	if cfg.MaxWriteBytes == 0 {
		cfg.MaxWriteBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, draining: make(chan struct{}), tracer: cfg.Tracer}
	if s.tracer == nil {
		s.tracer = noop.NewTracerProvider().Tracer("")
	}
	s.live = newLiveFirst(cfg.CatchUps)
	s.snapshots = make(chan struct{}, cmp.Or(cfg.Snapshots, DefaultSnapshots))
	if cfg.Writers > 0 {
		s.pool = newPool(s, cfg.Writers, cfg.Linger)
	}
	return s
}

// Leave makes every future stream a redirect: it gets a short, jittered retry (leavingRetry to three times
// that), the id of the position it would have started from, and ends at once, so that its client reconnects
// soon, to another pod, and resumes there exactly. Open streams carry on until Drain. A gateway leaves when
// it is told to stop, while the endpoints and proxies that still send it clients drop it.
func (s *Server) Leave() { s.leaving.Store(true) }

// leavingRetry is the shortest retry a stream that starts while the server is leaving gets.
const leavingRetry = 500 * time.Millisecond

// Drain makes every open stream end within the drain window, and every future one a redirect (see Leave).
func (s *Server) Drain() {
	s.Leave()
	s.drainOnce.Do(func() { close(s.draining) })
}

// Wait waits until every stream whose connection was taken over from net/http (the writer pool's, and
// WebSockets) has ended (http.Server's Shutdown does not wait for those), or ctx ends.
func (s *Server) Wait(ctx context.Context) error {
	for s.sockets.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	if s.pool == nil {
		return nil
	}
	return s.pool.wait(ctx)
}

// Close ends every stream whose connection was taken over from net/http at once, and stops the writer pool.
func (s *Server) Close() {
	if s.pool != nil {
		s.pool.close()
	}
}

// Serve streams topic t to the client from the position p asks for (see Params) until the client leaves, the
// server drains, or a write or a Kafka replay fails, and returns why it ended. The caller has validated the
// request. stats may be shared by many connections.
//
// With a writer pool, a plain HTTP/1.1 stream is taken over from net/http: Serve returns a parked Outcome
// once it is idle and handed to the pool, and its end is counted in stats alone.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, t *Topic, p Params, stats *Stats) Outcome {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")

	stats.Open.Add(1)
	c := &conn{
		s: s, t: t, p: p.kept(t), stats: stats, draining: s.draining, remote: r.RemoteAddr,
		parent: spanParent(r.Context()),
	}
	c.setExpiry(&p, monoNow(), time.Now())
	if s.pool != nil && r.ProtoMajor == 1 && r.ProtoMinor >= 1 && r.TLS == nil {
		if nc, _, err := http.NewResponseController(w).Hijack(); err == nil {
			// A listener may wrap its connections for net/http's sake (the gateway's answers its early errors
			// as JSON); the stream writes to the connection itself, with writev and non-blocking writes.
			if u, ok := nc.(interface{ NetConn() net.Conn }); ok {
				nc = u.NetConn()
			}
			return outcome(s.pool.serve(c, nc, responseHead(h), p))
		}
	}
	if s.leaving.Load() {
		// A stream that only says where it is: its connection closes after it (an HTTP/2 one with a GOAWAY, as
		// net/http reads this header there), so that the client reconnects on a new connection, which the
		// Service can send to another pod.
		h.Set("Connection", "close")
	}
	w.WriteHeader(http.StatusOK)
	c.out = &httpSink{w: w, rc: http.NewResponseController(w)}
	reason := c.run(r.Context(), p)
	c.end(reason)
	return Outcome{Reason: reason}
}

type conn struct {
	s      *Server
	t      *Topic
	p      kept
	out    sink
	stats  *Stats
	remote string
	parent *trace.SpanContext // the request's trace context: the parent of the stream's spans
	rt     *resumeTrace       // what the resume under way found, for its span; nil when none is traced
	began  int64              // when the stream started (monoNow)
	frames int64
	pulled int64 // frames of the fast path read by pull and not yet written

	draining <-chan struct{} // the server's drain signal; nil once seen
	drainAt  int64           // when this stream closes (monoNow); 0 until the server drains

	tokNotice int64     // when the token-expiring frame is due (monoNow); 0 for none
	tokEnd    int64     // when the token expires and the stream ends (monoNow); 0 for never
	tokUntil  time.Time // the wall-clock time tokEnd stands for (Params.Expires, or where a Renewal moved it)

	pos      position.Vector // the client's position: what it has been sent (or passed by a filter); on the fast path it is not kept up to date, see last
	last     []byte          // on the fast path, the last frame written (the client's position is its id); nil when pos is current
	keyParts []int32         // the partitions of a key-filtered stream, ascending; nil for others
	gen      uint64          // the topic's partition generation keyParts was computed for
	epoch    uint64          // the topic's recreation epoch the stream joined in
	cursor   uint64          // next ring frame to look at
	buf      []byte          // frames being built on the slow path
	idBuf    []byte
	cf       *conflation // a conflated stream's held records (conflate.go); nil for others

	// A connection taken over from net/http (see pool.go). Its parked fields belong to its writer.
	pool *pool
	raw  *rawSink
	// cancel ends the context of a taken-over connection's run on its own goroutine (see runContext): the
	// connection outlives its request and moves between goroutines (its own, a writer's, its own again), so
	// each run has a context that ends when the peer leaves (hangups), when the pool closes, or when the run
	// ends. nil while the connection is parked. lifeMu guards cancel and gone.
	lifeMu sync.Mutex
	cancel context.CancelFunc
	// prefetchEnd ends the block reads the connection's resumes prefetched (see prefetchContext); nil for none.
	prefetchEnd context.CancelFunc
	owner       atomic.Pointer[writer] // the writer of a parked connection, for hangups; nil on its own goroutine
	pending     []byte                 // chunk bytes a writer could not write without waiting
	w           *writer                // the writer of a parked connection
	hbDue       int64                  // when the stream's next keep-alive is due (monoNow), unless it writes before
	probeDue    int64                  // when its writer next looks whether the peer closed it
	due         int64                  // its place in the timer heap

	// The small fields, together so that they pack: a parked connection is this struct and its socket, and
	// every byte of it is a pod's connection budget (BenchmarkParkedConnMemory).
	fd     int32 // the socket's descriptor: net's while c.raw.nc is set, its duplicate while parked (pool.detach); -1 when not known
	ri, hi int32 // a parked connection's index among its writer's connections of its ring, and in the timer heap
	// tokState is tokenLive, tokenNoticed or tokenEnded (deliver.go).
	tokState uint8
	opened   bool // the response head has gone out (see open)
	leaving  bool // the stream started while the server was leaving: it only says where it is (see Server.Leave)
	// meta: every record frame carries its partition, offset and key in a comment line (appendMeta), and its
	// id as the stream's own v1 position, for a transport that tells them to its client (WebSocket). Such a
	// stream reads frame by frame, as a filtered one does.
	meta bool
	// muxed: the stream is one topic of a stream of several (multi.go), which gives every frame the id of all
	// the topics' positions. It writes its own position (v1) as every frame's id, so it takes the slow path.
	muxed   bool
	synced  bool // pos is the ring's position at cursor, so ring frames can be written as they are
	gone    bool // the peer left (hangups); guarded by lifeMu
	watched bool // hangups watches fd; guarded by its lock
}

// end counts the stream's end, calls Params.OnEnd, and closes a taken-over connection (with the chunked
// body's end, when the stream did not end by a failed write). It runs exactly once per stream.
func (c *conn) end(reason CloseReason) {
	if c.raw != nil && c.pool.ctx.Err() != nil && reason == ReasonClientGone {
		reason = ReasonShutdown
	}
	if c.cf != nil {
		c.cf.release() // held frames never sent: the pod's total no longer has them
	}
	// Counted before the client can see the end: whoever sees it (a test, a client) sees the count.
	c.stats.Open.Add(-1)
	c.stats.Closed[reason].Add(1)
	// end runs once per stream (its one owner ends it), so OnEnd does too; before the close, so that a client
	// reconnecting at once finds what OnEnd gave back (a quota slot) free again.
	if c.p.OnEnd != nil {
		c.p.OnEnd(reason)
	}
	if c.raw != nil {
		c.pool.hang.remove(c) // before the close: its descriptor may be reused at once
		c.dropContext()
		if c.prefetchEnd != nil {
			c.prefetchEnd()
			c.prefetchEnd = nil
		}
		c.closeRaw(reason != ReasonWriteFailed && reason != ReasonClientGone && c.raw.head == nil)
	}
	if c.s.log.Enabled(context.Background(), slog.LevelDebug) {
		c.s.log.Debug("stream closed", "reason", reason.String(), "remote", c.remote, "frames", c.frames)
	}
	if c.raw != nil {
		c.pool.forget(c) // last: Server.Wait returns once every taken-over stream is counted
	}
}

// closeRaw closes a taken-over connection, after the chunked body's end when last is set: through net's
// wrapper, or on the duplicate descriptor of a parked connection.
func (c *conn) closeRaw(last bool) {
	c.pool.mu.Lock()
	nc := c.raw.nc
	c.pool.mu.Unlock()
	if nc == nil { // parked: detached from net
		if last {
			_, _ = newRawIO().writeFD(c.fd, lastChunk)
		}
		closeFD(c.fd)
		return
	}
	if last {
		_ = nc.SetWriteDeadline(time.Time{}) // a deadline left from an earlier write must not fail this one
		if c.raw.rc != nil {
			_, _ = newRawIO().writeNow(c.raw.rc, lastChunk)
		} else {
			_, _ = c.raw.writeFramed(lastChunk, 100*time.Millisecond)
		}
	}
	_ = nc.Close()
}

// run starts the stream and serves it.
func (c *conn) run(ctx context.Context, p Params) CloseReason {
	c.began = monoNow()
	c.wroteAt(c.began)
	retry := c.s.cfg.Retry
	if c.leaving = c.s.leaving.Load(); c.leaving {
		retry = leavingRetry + jitter(2*leavingRetry)
	}
	c.buf = sse.AppendRetry(c.buf, retry.Milliseconds())
	sctx, span := c.startSpan(ctx, &p)
	err := c.start(sctx, c.t, p)
	c.endStartSpan(span, err)
	if err != nil {
		reason := c.failure(ctx, err)
		if reason != ReasonWriteFailed && reason != ReasonClientGone {
			// A stream that failed before it wrote anything (Kafka could not be asked where it starts) still
			// answers: the head, "retry:" and whatever it had to say, then the end of the body, which an
			// EventSource retries. A connection closed without a status line is a proxy's 502, which it
			// does not.
			_ = c.open()
		}
		return reason
	}
	return c.loop(ctx)
}

// open writes the response head, if it has not gone out yet, with what the stream has buffered (the
// "retry:" line, and the opening block when it is known). A stream opens before its first wait on Kafka, so
// that every request is answered whatever Kafka does; a stream that needs no Kafka call opens with its first
// write, head and opening block in one.
func (c *conn) open() error {
	if c.opened {
		return nil
	}
	return c.flushBuf()
}

// resume serves a connection a writer let go of: it writes what the writer could not, then carries on until
// the stream ends or parks again.
func (c *conn) resume() {
	if err := c.pool.attach(c); err != nil {
		c.s.release(len(c.pending))
		c.pending = nil
		c.end(ReasonShutdown)
		return
	}
	if len(c.pending) > 0 {
		n, err := c.raw.writeFramed(c.pending, c.s.cfg.WriteTimeout)
		c.stats.Bytes.Add(int64(n))
		c.s.release(len(c.pending))
		c.pending = nil
		if err != nil {
			c.end(writeReason(err))
			return
		}
	}
	if r := c.loop(c.runContext()); r != parked {
		c.end(r)
	}
}

// parkable says the stream can be handed to the writer pool when it is idle.
func (c *conn) parkable() bool {
	return c.raw != nil && c.raw.rc != nil && c.raw.head == nil && (c.synced || c.filtered()) && c.p.Conflate == 0
}

// filtered says the stream has an event or key filter, so it always takes the slow path.
func (c *conn) filtered() bool {
	return len(c.p.Events) > 0 || len(c.p.Keys) > 0 || c.p.Filter != nil || c.p.Fields != nil || c.p.Conflate > 0 || c.meta || c.muxed
}

// rejoin catches the stream up after its cursor fell out of the ring or its partitions changed: it takes the
// position the client has, recomputes a key filter's partitions (those of the new partition count join the
// old ones: producers that have not seen the new count still write to the old), joins the ring again and
// catches up from Kafka as a resume. Partitions new to the stream are read from their start, so a re-join
// has no gap.
func (c *conn) rejoin(ctx context.Context) error {
	// Held records go out first: the catch-up starts from the position after them.
	c.flushDue(0)
	if err := c.flushBuf(); err != nil {
		return err
	}
	if c.last != nil {
		v, err := c.t.frameIDOf(ctx, c.last)
		if err != nil {
			return err
		}
		c.pos = v
		c.last = nil
	}
	c0, head := c.joinAgain()
	return c.traceResume(ctx, true, monoNow(), nil, func(ctx context.Context) error {
		return c.catchUp(ctx, c.t, &c.p, c0, head, true)
	})
}

// joinAgain joins the ring again after pull asked for it (ring.ErrBehind, errRejoin): it takes the topic's
// recreation epoch and partition generation as they are now, with a key filter's partitions for that generation
// (those of the new partition count join the old ones), so that pull does not ask again for the same change.
// Every re-join goes through it: the loop's (rejoin) and a snapshot's (snapshotTo).
func (c *conn) joinAgain() (uint64, position.Vector) {
	c.synced = false
	c.epoch = c.t.epoch()
	if gen := c.t.generation(); gen != c.gen {
		c.gen = gen
		if c.keyParts != nil {
			c.keyParts = unionParts(c.keyParts, keyPartitions(c.t, &c.p))
		}
	}
	return c.join(c.t)
}

// frameID returns the position in a frame's id line.
func frameID(frame []byte) position.Vector {
	line := frame[len("id: "):bytes.IndexByte(frame, '\n')]
	v, err := position.Parse(string(line))
	if err != nil {
		panic("stream: the ring holds a frame with a malformed id: " + err.Error())
	}
	return v
}

// failure turns an error from start or catchUp into the reason the stream ends.
func (c *conn) failure(ctx context.Context, err error) CloseReason {
	switch {
	case ctx.Err() != nil:
		return ReasonClientGone
	case errors.Is(err, errDrained):
		return ReasonShutdown
	case errors.Is(err, errTokenExpired):
		return ReasonTokenExpired
	case errors.Is(err, errReplay):
		c.s.log.Warn("stream could not read what it needs from kafka", "err", err)
		return ReasonReplayFailed
	default:
		return writeReason(err)
	}
}

// writePiece bounds what one write of a stream's own buffer carries: a bigger one (a snapshot, a conflated
// catch-up) goes out in pieces, each under its own deadline and held (Config.PendingBytes) only while it is
// written, so that a thousand snapshots ending at once do not each hold their whole snapshot. A piece may end
// inside a frame: the client keeps the id of the last whole frame it got.
const writePiece = 256 << 10

// write writes spans and flushes them under one write deadline, holding their bytes (see
// Config.PendingBytes) while it does; one span longer than writePiece goes in pieces. Its errors wrap
// errWrite.
func (c *conn) write(spans [][]byte) error {
	if len(spans) == 1 && len(spans[0]) > writePiece {
		for b := spans[0]; len(b) > 0; {
			n := min(len(b), writePiece)
			if err := c.writeSpans([][]byte{b[:n]}); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	}
	return c.writeSpans(spans)
}

// writeSpans is write, in one piece.
func (c *conn) writeSpans(spans [][]byte) error {
	size := 0
	for _, b := range spans {
		size += len(b)
	}
	return c.writeOut(size, func(timeout time.Duration) (int, error) { return c.out.write(spans, timeout) })
}

// writeOwn writes frame, a frame of the gateway's own of kind, after what c.buf holds: in the same write as
// any other frame, or, to a sink that treats such frames apart (ownSink), c.buf first, then the frame told
// for what it is.
func (c *conn) writeOwn(kind frameKind, frame []byte) error {
	if os, ok := c.out.(ownSink); ok {
		if err := c.flushBuf(); err != nil {
			return err
		}
		return c.writeOut(len(frame), func(timeout time.Duration) (int, error) { return os.writeOwn(kind, frame, timeout) })
	}
	if len(c.buf) == 0 {
		return c.write([][]byte{frame})
	}
	c.buf = append(c.buf, frame...)
	return c.flushBuf()
}

// writeOut makes one write of size bytes through out, holding them (Config.PendingBytes) while it does.
func (c *conn) writeOut(size int, out func(timeout time.Duration) (int, error)) error {
	if holdsOwn(c.out) {
		size = 0
	} else if !c.s.hold(size) {
		return fmt.Errorf("%w: %w", errWrite, errPending)
	}
	n, err := out(c.s.cfg.WriteTimeout)
	c.s.release(size)
	c.stats.Bytes.Add(int64(n))
	c.stats.Writes.Add(1)
	if err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	c.opened = true
	c.wroteAt(monoNow())
	return nil
}

// pickDrainMoment sets, once, the moment this stream closes: random within the drain window from now, so that
// clients do not all reconnect at once.
func (c *conn) pickDrainMoment(now int64) {
	if c.drainAt == 0 {
		c.drainAt = now + int64(jitter(c.s.cfg.Drain))
	}
}

// jitter returns a random duration in [0, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d) //nolint:gosec // spreading reconnects needs no cryptographic randomness
}
