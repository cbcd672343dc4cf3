package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// Resync reasons, the "reason" of an "event: resync" frame (see feed.ResyncData).
const (
	ResyncRetention = feed.ResyncRetention
	ResyncAhead     = feed.ResyncAhead
	ResyncInvalidID = feed.ResyncInvalidID
)

// ResyncData is the JSON data of an "event: resync" frame; the feed writes the same into the ring when
// retention passed offsets it had not read.
type ResyncData = feed.ResyncData

// ResumedData is the JSON data of an "event: resumed" frame (see Params.Explain).
type ResumedData struct {
	// Source is where the frames the client missed come from: SourceRing (this pod's memory) or SourceKafka
	// (a replay).
	Source string `json:"source"`
	// From is the id the client resumed from.
	From string `json:"from"`
}

// ResyncPartition describes one partition a resync is about.
type ResyncPartition = feed.ResyncPartition

// slowFlushBytes is how many bytes the slow path (replays, rewritten ids, filters) gathers before it
// writes: large enough for few writes, small enough that the buffer it keeps per connection stays small.
const slowFlushBytes = 32 << 10

// nextOffset is the offset after off, the largest offset for the largest: an id may name any offset up to
// math.MaxInt64, and a resync must not report the one after it as a negative number.
func nextOffset(off int64) int64 {
	if off == math.MaxInt64 {
		return off
	}
	return off + 1
}

// catchUp brings the stream from c.pos to the ring position c0 (whose position is head): records the ring
// still holds are read from it, the others from Kafka, positions Kafka no longer has (or never had) become
// a resync. It leaves c.cursor where the stream continues in the ring. resuming says c.pos came from the
// client, so that a gap in it is a loss to report rather than a start position.
func (c *conn) catchUp(ctx context.Context, t *Topic, p *kept, c0 uint64, head position.Vector, resuming bool) error {
	var from []byte
	if resuming && p.Explain {
		from, _ = c.pos.AppendText(nil)
	}
	if t.Replay != nil && t.Watermarks != nil {
		// What the ring cannot serve will most likely be read from Kafka: start its first fetches now, so that
		// they overlap the watermark look-up (a round trip to Kafka when the cache is stale).
		t.Replay.Prefetch(c.prefetchContext(ctx), t.Name, c.epoch, likelyReads(c.pos, head, t.Ring))
	}
	pl, err := c.plan(ctx, t, planInput{pos: c.pos, head: head, c0: c0, resuming: resuming, ring: t.Ring})
	if err != nil {
		return err
	}
	c.cursor, c.pos = pl.cursor, pl.pos
	c.stats.Skipped.Add(pl.skipped)
	if c.rt != nil {
		c.rt.skipped += pl.skipped
	}
	ranges, retention, ahead := pl.ranges, pl.retention, pl.ahead
	for _, rs := range []struct {
		reason string
		idx    int
		parts  []ResyncPartition
	}{{ResyncRetention, resyncRetention, retention}, {ResyncAhead, resyncAhead, ahead}} {
		if len(rs.parts) > 0 {
			c.stats.Resyncs[rs.idx].Add(1)
			if c.rt != nil {
				c.rt.reasons = append(c.rt.reasons, rs.reason)
			}
			if err := c.writeResync(ResyncData{Reason: rs.reason, Partitions: rs.parts}); err != nil {
				return err
			}
		}
	}
	if resuming && p.Explain {
		d := ResumedData{Source: SourceRing, From: string(from)}
		if len(ranges) > 0 {
			d.Source = SourceKafka
		}
		if err := c.writeEvent(feed.EventResumed, d); err != nil {
			return err
		}
	}
	if len(ranges) > 0 {
		c.stats.ResumedFromKafka.Add(1)
		if c.rt != nil {
			c.rt.ranges += len(ranges)
		}
		if err := c.replay(ctx, t, p, ranges, head, resuming); err != nil {
			return err
		}
	} else if resuming {
		c.stats.ResumedFromRing.Add(1)
	}
	c.synced = c.cursor == c0 && c.pos.Equal(head)
	err = c.flushBuf()
	c.releaseBuf()
	return err
}

// plan makes the catch-up plan of in (see makePlan), looking the watermarks up as the planner asks: from the
// feed's cache (a reconnect storm asks Kafka once, not once per connection), or fresh when a cached high
// watermark said the client is ahead. A failed look-up is the planner's to judge: the ring may still serve
// everything.
func (c *conn) plan(ctx context.Context, t *Topic, in planInput) (plan, error) {
	for {
		pl, err := makePlan(in)
		if err != nil || pl.need == needNone {
			return pl, err
		}
		if t.Watermarks == nil {
			in.wmErr = fmt.Errorf("%w: no watermarks", errReplay)
			continue
		}
		maxAge := time.Second
		if pl.need == needFresh {
			maxAge = 0
		}
		var wm map[int32]feed.Watermarks
		err = c.await(ctx, func(ctx context.Context) (err error) {
			wm, err = t.Watermarks(ctx, maxAge)
			return err
		})
		switch {
		case errors.Is(err, errWrite):
			return plan{}, err
		case err != nil:
			in.wmErr = err
		case wm == nil:
			in.wm = map[int32]feed.Watermarks{}
		default:
			in.wm = wm
		}
		in.fresh = in.fresh || (err == nil && pl.need == needFresh)
	}
}

// releaseBuf drops the slow path's buffer once the stream is on the fast path, which needs none: a
// connection that resumed does not keep tens of kilobytes for the rest of its life. A stream that stays on
// the slow path (filtered, projected, conflated, one topic of several) keeps a buffer of what one live write
// carries (keptBufBytes), not one that a snapshot, a catch-up or a conflated burst grew.
func (c *conn) releaseBuf() {
	if cap(c.buf) > 1<<10 && ((c.synced && !c.filtered()) || cap(c.buf) > c.keptBufBytes()) {
		c.buf = nil
	}
}

// keptBufBytes is the largest buffer a stream on the slow path keeps between writes: twice what one write
// of live frames carries (a batch of MaxWriteBytes of ring frames, with their ids rewritten, and append's
// growth), at least twice slowFlushBytes.
func (c *conn) keptBufBytes() int { return 2 * max(c.s.cfg.MaxWriteBytes, slowFlushBytes) }

// appendRecord appends rec's frame to c.buf, with the stream's position as its id, as deliverFrame appends a
// ring frame (appendOut); scratch holds the frame on the way, and is returned grown. json is rec's value as
// the filter decoded it (decoded true), so that the frame does not decode it again.
func (c *conn) appendRecord(rec *kgo.Record, t *Topic, scratch, json []byte, decoded bool) []byte {
	c.idBuf, _ = c.pos.AppendText(c.idBuf[:0])
	if c.cf != nil {
		now := monoNow()
		scratch = feed.AppendDecodedFrame(scratch[:0], c.idBuf, rec, t.format(), json, decoded)
		c.cf.hold(rec.Partition, rec.Offset, rec.Key, scratch[len("id: ")+len(c.idBuf)+1:], false, now)
		c.flushDue(now)
		return scratch
	}
	if c.meta || c.p.Fields != nil {
		scratch = feed.AppendDecodedFrame(scratch[:0], c.idBuf, rec, t.format(), json, decoded)
		c.buf = c.appendOut(c.buf, scratch[len("id: ")+len(c.idBuf)+1:], rec.Partition, rec.Offset, rec.Key)
	} else {
		c.buf = feed.AppendDecodedFrame(c.buf, c.idBuf, rec, t.format(), json, decoded)
	}
	c.frames++
	c.stats.Frames.Add(1)
	return scratch
}

// replay reads ranges from Kafka into the stream, in record-timestamp order across partitions.
func (c *conn) replay(ctx context.Context, t *Topic, p *kept, ranges []replay.Range, head position.Vector, resuming bool) error {
	if t.Replay == nil {
		return fmt.Errorf("%w: no replay reader", errReplay)
	}
	if err := c.flushBuf(); err != nil {
		return err
	}
	// Each batch is built and written under live delivery's priority (liveFirst), and what was built goes out
	// before the read waits for Kafka, rather than wait with it.
	pace := paced{g: c.s.live}
	defer pace.give()
	flush := func() error {
		err := c.flushBuf()
		pace.give()
		return err
	}
	waits := replay.Waits{Interval: p.Heartbeat, Idle: c.keepAliveIfDue, Before: flush}
	first := true
	var frameBuf []byte // scratch for a record's frame
	var valBuf []byte   // scratch for a record's value as a filter sees it
	err := t.Replay.ReadWith(ctx, t.Name, c.epoch, ranges, waits, func(rec *kgo.Record) error {
		c.seen(rec.Partition, rec.Offset)
		// A schema format's value decoded for the filter is kept for the frame: decoded once.
		var json []byte
		decoded := false
		value := func() []byte {
			json, valBuf, decoded = t.format().FilterValue(valBuf, rec)
			return json
		}
		if !p.keeps(rec.Key, func() string { return recordType(rec) }, value) {
			c.unseen(rec.Partition, rec.Offset, rec.Key)
			return nil
		}
		if err := pace.take(ctx); err != nil {
			return err
		}
		frameBuf = c.appendRecord(rec, t, frameBuf, json, decoded)
		if len(c.buf) >= slowFlushBytes || first {
			// The first frame goes out at once: the client waited for it; the rest are gathered.
			first = false
			return flush()
		}
		return nil
	})
	var oor *replay.OutOfRangeError
	switch {
	case errors.As(err, &oor) && resuming:
		// Retention passed the position while it was being read: report it, and catch up again from
		// where the stream now is.
		if err := c.flushBuf(); err != nil {
			return err
		}
		var w map[int32]feed.Watermarks
		if werr := c.await(ctx, func(ctx context.Context) (err error) {
			w, err = t.Watermarks(ctx, 0)
			return err
		}); werr != nil {
			return werr
		}
		have, ok := c.pos.Offset(oor.Partition)
		if !ok {
			have = -1
		}
		top, _ := head.Offset(oor.Partition)
		c.stats.Resyncs[resyncRetention].Add(1)
		c.stats.Skipped.Add(top - have)
		if c.rt != nil {
			c.rt.reasons = append(c.rt.reasons, ResyncRetention)
			c.rt.skipped += top - have
		}
		c.pos = setOrDrop(c.pos, oor.Partition, top)
		if err := c.writeResync(ResyncData{Reason: ResyncRetention, Partitions: []ResyncPartition{{
			Partition: oor.Partition, Requested: have + 1, LowWatermark: w[oor.Partition].Low, ResumesAt: top + 1, Skipped: top - have,
		}}}); err != nil {
			return err
		}
		c0, h := c.join(t)
		return c.catchUp(ctx, t, p, c0, h, true)
	case errors.Is(err, errWrite):
		return err
	case err != nil:
		return fmt.Errorf("%w: %w", errReplay, err)
	}
	return c.flushBuf()
}

// writeResync writes an "event: resync" frame carrying the stream's current position.
func (c *conn) writeResync(d ResyncData) error {
	d.Topic = c.t.Name
	return c.writeEvent(feed.EventResync, d)
}

// writeEvent writes a frame of the gateway's own, of type typ with d as JSON data, carrying the stream's
// current position.
func (c *conn) writeEvent(typ string, d any) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	c.flushDue(0) // what a conflated stream holds goes first: the event's id passes it
	c.idBuf, _ = c.pos.AppendText(c.idBuf[:0])
	c.buf = sse.AppendEventBytes(c.buf, c.idBuf, []byte(typ), data)
	return c.flushBuf()
}

// flushBuf writes and flushes the stream's buffer, if anything is in it.
func (c *conn) flushBuf() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.write([][]byte{c.buf})
	c.buf = c.buf[:0]
	if cap(c.buf) > c.keptBufBytes() {
		c.buf = nil // a snapshot's or a burst's buffer is not kept (releaseBuf drops the rest on the fast path)
	}
	return err
}
