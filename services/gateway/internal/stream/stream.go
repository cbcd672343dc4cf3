package stream

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

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

// Stats are a topic's connection counters. The zero value is ready to use.
type Stats struct {
	Open   atomic.Int64 // connections open now
	Frames atomic.Int64 // frames written
	Bytes  atomic.Int64 // bytes written, frames and everything else
	Closed [numReasons]atomic.Int64
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

// Serve streams r from the live end of rg until the client leaves, falls behind, or the server drains.
// The caller has validated the request (topic, Params). stats may be shared by many connections.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, rg *ring.Ring, p Params, stats *Stats) CloseReason {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	stats.Open.Add(1)
	defer stats.Open.Add(-1)
	c := conn{s: s, w: w, rc: http.NewResponseController(w), stats: stats, draining: s.draining}
	reason := c.run(r.Context(), rg, p)
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
}

func (c *conn) run(ctx context.Context, rg *ring.Ring, p Params) CloseReason {
	cursor, id := rg.Start(nil)
	hello := sse.AppendRetry(nil, c.s.cfg.Retry.Milliseconds())
	hello = sse.AppendID(hello, string(id))
	if c.write([][]byte{hello}) != nil {
		return ReasonWriteFailed
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
		spans, next, wake, err = rg.Read(cursor, spans[:0], c.s.cfg.MaxWriteBytes)
		if errors.Is(err, ring.ErrBehind) {
			return ReasonBehind
		}
		if len(spans) > 0 {
			if c.write(spans) != nil {
				return ReasonWriteFailed
			}
			c.frames += int64(next - cursor)
			c.stats.Frames.Add(int64(next - cursor))
			cursor = next
			if hb != nil {
				hb.Reset(p.Heartbeat)
			}
			continue
		}
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

// write writes spans and flushes them under one write deadline.
func (c *conn) write(spans [][]byte) error {
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
