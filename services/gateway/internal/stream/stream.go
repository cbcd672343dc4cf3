package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
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
	// MaxWriteBytes bounds the frame bytes written between two flushes. Zero means 256 KiB.
	MaxWriteBytes int
	// Logger receives connection logs. Nil means slog.Default().
	Logger *slog.Logger
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
	Frames atomic.Int64 // frames written
	Bytes  atomic.Int64 // bytes written, frames and everything else
	Closed [numReasons]atomic.Int64

	ResumedFromRing  atomic.Int64             // resumes and catch-ups served from the ring alone
	ResumedFromKafka atomic.Int64             // resumes and catch-ups that read from Kafka
	Resyncs          [numResyncs]atomic.Int64 // resync frames, by reason (see ResyncReasons)
	Skipped          atomic.Int64             // offsets clients will never get, reported by resyncs
}

// Server serves SSE streams from rings.
type Server struct {
	cfg       Config
	log       *slog.Logger
	drainOnce sync.Once
	draining  chan struct{}
}

// NewServer returns a Server with cfg's zero fields set to their defaults.
func NewServer(cfg Config) *Server {
	if cfg.Retry == 0 {
		cfg.Retry = 3 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.MaxWriteBytes == 0 {
		cfg.MaxWriteBytes = 256 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, log: cfg.Logger, draining: make(chan struct{})}
}

// Drain makes every open and future stream end within the drain window.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// Serve streams topic t to the client from the position p asks for (see Params) until the client leaves, the
// server drains, or a write or a Kafka replay fails. The caller has validated the request. stats may be
// shared by many connections.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, t *Topic, p Params, stats *Stats) CloseReason {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	stats.Open.Add(1)
	defer stats.Open.Add(-1)
	c := conn{s: s, w: w, rc: http.NewResponseController(w), stats: stats, draining: s.draining}
	reason := c.run(r.Context(), t, p)
	stats.Closed[reason].Add(1)
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("stream closed", "reason", reason.String(), "remote", r.RemoteAddr, "frames", c.frames)
	}
	return reason
}

type conn struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	stats  *Stats
	frames int64

	draining   <-chan struct{}  // the server's drain signal; nil once seen
	drainTimer *time.Timer      // fires at this stream's moment to close; nil until draining
	drainC     <-chan time.Time // drainTimer.C, or nil

	pos      position.Vector // the client's position: what it has been sent (or passed by a filter); on the fast path it is not kept up to date, see last
	last     []byte          // on the fast path, the last frame written (the client's position is its id); nil when pos is current
	keyParts []int32         // the partitions of a key-filtered stream, ascending; nil for others
	cursor   uint64          // next ring frame to look at
	synced   bool            // pos is the ring's position at cursor, so ring frames can be written as they are
	buf      []byte          // frames being built on the slow path
	idBuf    []byte
}

func (c *conn) run(ctx context.Context, t *Topic, p Params) CloseReason {
	rg := t.Ring
	c.buf = sse.AppendRetry(c.buf, c.s.cfg.Retry.Milliseconds())
	if err := c.start(ctx, t, p); err != nil {
		return c.failure(ctx, err)
	}

	var heartbeat <-chan time.Time
	var hb *time.Timer
	if p.Heartbeat > 0 {
		hb = time.NewTimer(p.Heartbeat)
		defer hb.Stop()
		heartbeat = hb.C
	}
	defer c.stopDrainTimer()
	keepAlive := [][]byte{sse.AppendComment(nil, "keep-alive")}
	spans := make([][]byte, 0, 8)
	var frames []ring.Frame

	for {
		// A stream that always has frames to write never blocks in the select below, so the stop signals
		// are checked here too, without blocking, before every batch.
		select {
		case <-ctx.Done():
			return ReasonClientGone
		case <-c.draining:
			c.startDrainTimer()
		case <-c.drainC:
			return ReasonShutdown
		default:
		}
		var next uint64
		var wake <-chan struct{}
		var err error
		wrote := false
		if c.synced && len(p.Events) == 0 && len(p.Keys) == 0 {
			// The fast path: the ring's frames, ids and all, are exactly what this client needs next.
			spans, next, wake, err = rg.Read(c.cursor, spans[:0], c.s.cfg.MaxWriteBytes)
			if err == nil && len(spans) > 0 {
				if c.write(spans) != nil {
					return ReasonWriteFailed
				}
				// The fast path does not track the position frame by frame: the last frame's id is it.
				// Keeping the frame (not a copy) costs nothing; frames are immutable.
				c.last = lastFrame(spans[len(spans)-1])
				c.frames += int64(next - c.cursor)
				c.stats.Frames.Add(int64(next - c.cursor))
				wrote = true
			}
		} else {
			frames, next, wake, err = rg.ReadFrames(c.cursor, frames[:0], c.s.cfg.MaxWriteBytes)
			for _, f := range frames {
				synced, derr := c.deliver(f, p)
				if derr != nil {
					return ReasonWriteFailed
				}
				c.synced = c.synced || synced
			}
			if err == nil && len(frames) > 0 {
				if c.flushBuf() != nil {
					return ReasonWriteFailed
				}
				c.releaseBuf()
				clear(frames) // keep no references to frames the ring may evict
				wrote = true
			}
		}
		if errors.Is(err, ring.ErrBehind) {
			// The client read so slowly that the ring moved past it: catch up from Kafka, as long as it
			// keeps reading (the write deadline closes it otherwise).
			if c.last != nil {
				c.pos = frameID(c.last)
				c.last = nil
			}
			c.synced = false
			c0, head := c.join(t)
			if err := c.catchUp(ctx, t, p, c0, head, true); err != nil {
				if r := c.failure(ctx, err); r != ReasonReplayFailed {
					return r
				}
				return ReasonBehind
			}
			continue
		}
		if wrote {
			c.cursor = next
			if hb != nil {
				hb.Reset(p.Heartbeat)
			}
			continue
		}
		c.cursor = next
		select {
		case <-wake:
		case <-heartbeat:
			if c.write(keepAlive) != nil {
				return ReasonWriteFailed
			}
			hb.Reset(p.Heartbeat)
		case <-ctx.Done():
			return ReasonClientGone
		case <-c.draining:
			c.startDrainTimer()
		case <-c.drainC:
			return ReasonShutdown
		}
	}
}

// lastFrame returns the last frame in span, a run of whole frames. Frames end with a blank line and no frame
// holds one inside (every data line starts with "data:"), so the last frame starts after the second-to-last
// blank line.
func lastFrame(span []byte) []byte {
	if i := bytes.LastIndex(span[:len(span)-2], []byte("\n\n")); i >= 0 {
		return span[i+2:]
	}
	return span
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
	case errors.Is(err, errReplay):
		c.s.log.Warn("stream could not read what it needs from kafka", "err", err)
		return ReasonReplayFailed
	default:
		return ReasonWriteFailed
	}
}

// startDrainTimer arms the moment, random within the drain window, at which this stream closes, and stops
// listening for the drain signal.
func (c *conn) startDrainTimer() {
	c.draining = nil
	c.drainTimer = time.NewTimer(jitter(c.s.cfg.Drain))
	c.drainC = c.drainTimer.C
}

func (c *conn) stopDrainTimer() {
	if c.drainTimer != nil {
		c.drainTimer.Stop()
	}
}

// write writes spans and flushes them under one write deadline. Its errors wrap errWrite.
func (c *conn) write(spans [][]byte) error {
	if err := c.writeSpans(spans); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

func (c *conn) writeSpans(spans [][]byte) error {
	if err := c.rc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout)); err != nil &&
		!errors.Is(err, http.ErrNotSupported) {
		return err
	}
	n := 0
	for _, s := range spans {
		m, err := c.w.Write(s)
		n += m
		if err != nil {
			c.stats.Bytes.Add(int64(n))
			return err
		}
	}
	c.stats.Bytes.Add(int64(n))
	return c.rc.Flush()
}

// jitter returns a random duration in [0, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d) //nolint:gosec // spreading reconnects needs no cryptographic randomness
}
