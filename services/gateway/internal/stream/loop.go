package stream

import (
	"context"
	"errors"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// A stream on a goroutine of its own (its start, a resume after a writer let it go, and every stream the
// writer pool does not serve) runs loop: it writes what the ring has, catches up when it fell behind, and
// waits for the ring, its timers, its client and the drain.

// loop writes the ring's frames as they come, until the stream ends (or parks: it returns parked).
func (c *conn) loop(ctx context.Context) CloseReason {
	lt := c.newLoopTimers()
	defer lt.stop()
	var sc scratch
	for {
		// A stream that always has frames to write never blocks in wait, so the stop signals are checked
		// here too, without blocking, before every batch.
		if r, end := c.stopSignals(ctx, lt); end {
			return r
		}
		wake, r, end := c.step(ctx, &sc)
		switch {
		case end:
			return r
		case wake == nil:
			continue // it wrote, or caught up: there may be more
		case c.parkable():
			// Idle and caught up: a writer serves it from here. Nothing below may touch c.
			c.pool.park(c)
			return parked
		}
		if r, end := c.wait(ctx, lt, wake); end {
			return r
		}
	}
}

// step writes what the ring has for the stream (see pull), or catches it up from Kafka when it fell behind
// the ring or its partitions changed. It returns the ring's wake channel when the stream is idle (nothing
// more to write now), nil when it made progress, or the reason the stream ends.
func (c *conn) step(ctx context.Context, sc *scratch) (wake <-chan struct{}, r CloseReason, end bool) {
	out, next, wake, err := c.pull(sc)
	if behind := errors.Is(err, ring.ErrBehind); behind || errors.Is(err, errRejoin) {
		// The client read so slowly that the ring moved past it, or its partitions changed: catch up from
		// Kafka, as long as it keeps reading (the write deadline closes it otherwise); conflated from then on
		// when the topic allows it.
		if behind && c.p.Conflate == 0 && c.t.SlowConflate > 0 {
			c.p.Conflate = c.t.SlowConflate
			c.stats.SlowConflated.Add(1)
		}
		if err := c.rejoin(ctx); err != nil {
			if r := c.failure(ctx, err); r != ReasonReplayFailed || !behind {
				return nil, r, true
			}
			return nil, ReasonBehind, true
		}
		return nil, 0, false
	}
	if len(out) > 0 {
		// A read that leaves more behind it is a catch-up from far back in the ring: it writes after live
		// delivery (liveFirst).
		pace := paced{}
		if next < c.t.Ring.Head() {
			pace.g = c.s.live
		}
		if err := pace.take(ctx); err != nil {
			return nil, ReasonClientGone, true
		}
		err := c.write(out)
		pace.give()
		if err != nil {
			return nil, writeReason(err), true
		}
		c.written(sc, monoNow())
		c.sampleDelivery(next)
	}
	if next != c.cursor {
		c.cursor = next
		return nil, 0, false
	}
	return wake, 0, false
}

// loopTimers are the timers of a stream's loop: its next keep-alive, its token's next moment, its drain
// moment and, conflated, the end of its interval. A channel is nil while the stream has no such moment.
type loopTimers struct {
	hb, tok, drain, flush     *time.Timer
	hbC, tokC, drainC, flushC <-chan time.Time
}

func (c *conn) newLoopTimers() *loopTimers {
	lt := &loopTimers{}
	if c.p.Heartbeat > 0 {
		lt.hb = time.NewTimer(time.Hour)
		lt.hbC = lt.hb.C
	}
	if c.tokenDue() != 0 {
		lt.tok = time.NewTimer(time.Hour)
		lt.tokC = lt.tok.C
	}
	if c.drainAt != 0 {
		lt.startDrain(c)
	}
	lt.conflating(c)
	return lt
}

// conflating makes the flush timer of a conflated stream, once (a stream may become conflated on the way:
// Topic.SlowConflate).
func (lt *loopTimers) conflating(c *conn) {
	if c.p.Conflate > 0 && lt.flush == nil {
		lt.flush = time.NewTimer(time.Hour)
		lt.flushC = lt.flush.C
	}
}

// startDrain picks the stream's moment to close within the drain window, once the server drains.
func (lt *loopTimers) startDrain(c *conn) {
	c.draining = nil
	c.pickDrainMoment(monoNow())
	lt.drain = time.NewTimer(time.Duration(c.drainAt - monoNow()))
	lt.drainC = lt.drain.C
}

func (lt *loopTimers) stop() {
	for _, t := range []*time.Timer{lt.hb, lt.tok, lt.drain, lt.flush} {
		if t != nil {
			t.Stop()
		}
	}
}

// stopSignals checks, without waiting, whether the client left or the stream's drain moment came (noting
// that the server began to drain), and writes what the stream owes its client about its token.
func (c *conn) stopSignals(ctx context.Context, lt *loopTimers) (CloseReason, bool) {
	select {
	case <-ctx.Done():
		return ReasonClientGone, true
	case <-c.draining:
		lt.startDrain(c)
	case <-lt.drainC:
		return ReasonShutdown, true
	default:
	}
	return c.tokenMoment(monoNow())
}

// wait waits, idle, for the ring to wake the stream, a keep-alive (which it writes), the token's moment,
// the client to leave or the drain.
func (c *conn) wait(ctx context.Context, lt *loopTimers, wake <-chan struct{}) (CloseReason, bool) {
	if lt.hb != nil {
		lt.hb.Reset(max(time.Duration(c.hbDue-monoNow()), 0))
	}
	if lt.tok != nil {
		lt.tok.Reset(max(time.Duration(c.tokenDue()-monoNow()), 0))
	}
	lt.conflating(c)
	if lt.flush != nil {
		next := time.Hour
		if due := c.flushDueAt(); due != 0 {
			next = max(time.Duration(due-monoNow()), 0)
		}
		lt.flush.Reset(next)
	}
	select {
	case <-wake:
	case <-lt.flushC: // the held records go out in the next step
	case <-lt.tokC: // written by stopSignals
	case <-lt.hbC:
		if err := c.keepAliveIfDue(); err != nil {
			return writeReason(err), true
		}
	case <-ctx.Done():
		return ReasonClientGone, true
	case <-c.draining:
		lt.startDrain(c)
	case <-lt.drainC:
		return ReasonShutdown, true
	}
	return 0, false
}

// tokenMoment writes, from the stream's goroutine, what the stream owes its client about its token at now (see
// tokenStep), and says whether the stream ends, and why.
func (c *conn) tokenMoment(now int64) (CloseReason, bool) {
	frame, end := c.tokenStep(now)
	if frame != nil {
		kind := kindTokenExpiring
		if end {
			kind = kindTokenExpired
		}
		if err := c.writeOwn(kind, frame); err != nil {
			return writeReason(err), true
		}
	}
	return ReasonTokenExpired, end
}
