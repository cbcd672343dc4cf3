package stream

import (
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// The planner decides how a stream gets from the client's position to the ring's head: which partitions the
// ring still serves (and so where in the ring the stream continues), which ranges must be read back from
// Kafka, and which partitions the client can no longer have (a resync). It is pure: positions, the ring's
// index and Kafka's watermarks in, a plan out, no I/O. When it needs the watermarks it says so (plan.need);
// the caller (conn.catchUp) looks them up and plans again, so a stream that the ring serves alone, or that
// starts at the head, never asks Kafka.
//
// The rules, per partition of the position or the head (have: the client's offset, -1 when absent; top: the
// head's):
//   - have < top: Kafka's low watermark first, so that every pod answers an id the same way whatever its ring
//     holds: below it, a resuming client gets a retention resync and continues at the head; a new stream
//     starts at the low watermark, and its position names the offset before it (so its ids do). Then the ring, when it holds have+1; else a range read from Kafka. When
//     the watermarks cannot be had, the ring (trimmed to the last low watermark seen) still serves what it
//     holds, and anything else fails the plan.
//   - have > top, resuming: the client is ahead of this pod. When it is at or past the partition's high
//     watermark (a cached one can only be too low, so it is checked against a fresh one first) the id is of
//     a topic created again or of another cluster: an ahead resync, and the stream continues at the head.
//     Otherwise the pod lags and the frames up to have are skipped as they come.

// ringIndex is what the planner asks of the ring: the sequence of the first frame at or after a partition's
// offset, when the ring holds it (ring.Ring.Seek).
type ringIndex interface {
	Seek(partition int32, offset int64) (uint64, bool)
}

// wmNeed is the watermark look-up a plan is waiting for.
type wmNeed int

const (
	needNone   wmNeed = iota // the plan is made
	needCached               // watermarks from the feed's cache (at most a second old) are enough
	needFresh                // a high watermark must be listed now: a cached one said the client is ahead
)

// planInput is what a plan is made from.
type planInput struct {
	pos  position.Vector // the client's position
	head position.Vector // the position of the ring's head
	c0   uint64          // the ring's head sequence
	// resuming says pos came from the client: a gap in it is a loss to report, not a start.
	resuming bool
	ring     ringIndex
	// wm are the watermarks looked up so far (nil: none yet), fresh says they were listed now rather than
	// taken from a cache, and wmErr is the last look-up's failure.
	wm    map[int32]feed.Watermarks
	fresh bool
	wmErr error
}

// plan is how a stream catches up, or what it needs to know first.
type plan struct {
	need   wmNeed
	cursor uint64          // where the stream continues in the ring
	pos    position.Vector // the client's position once the resyncs are told
	ranges []replay.Range  // what to read back from Kafka
	// retention and ahead are the partitions of the two resyncs; skipped counts the offsets retention took.
	retention, ahead []ResyncPartition
	skipped          int64
}

// makePlan plans a catch-up (see the rules above). Its error is a failed watermark look-up the plan could not
// do without.
func makePlan(in planInput) (plan, error) {
	pl := plan{cursor: in.c0, pos: in.pos.Clone()}
	for _, q := range union(in.pos, in.head) {
		have, top := offsetOr(in.pos, q), offsetOr(in.head, q)
		switch {
		case have > top && in.resuming:
			switch {
			case in.wm == nil && in.wmErr == nil:
				return plan{need: needCached}, nil
			case in.wmErr != nil:
				return plan{}, in.wmErr
			case have >= in.wm[q].High && !in.fresh:
				return plan{need: needFresh}, nil
			case have >= in.wm[q].High:
				pl.ahead = append(pl.ahead, ResyncPartition{
					Partition: q, Requested: nextOffset(have), LowWatermark: in.wm[q].Low, ResumesAt: top + 1,
				})
				pl.pos = setOrDrop(pl.pos, q, top)
			}
		case have < top:
			if in.wm == nil && in.wmErr == nil {
				return plan{need: needCached}, nil
			}
			if in.wmErr == nil && have+1 < in.wm[q].Low {
				if in.resuming {
					pl.retention = append(pl.retention, ResyncPartition{
						Partition: q, Requested: have + 1, LowWatermark: in.wm[q].Low, ResumesAt: top + 1, Skipped: top - have,
					})
					pl.pos = setOrDrop(pl.pos, q, top)
					pl.skipped += top - have
					continue
				}
				// A new stream starts at the log start, and its ids say so from here on.
				have = in.wm[q].Low - 1
				pl.pos.Set(q, have)
			}
			if seq, ok := in.ring.Seek(q, have+1); ok {
				pl.cursor = min(pl.cursor, seq)
				continue
			}
			if in.wmErr != nil {
				return plan{}, in.wmErr
			}
			pl.ranges = append(pl.ranges, replay.Range{Partition: q, After: have, Upto: top})
		}
	}
	return pl, nil
}

// likelyReads returns the ranges a catch-up from pos to head will most likely read from Kafka: those the
// ring does not hold, before the watermarks say which are really owed. Their first fetches can start while
// the watermarks are looked up.
func likelyReads(pos, head position.Vector, rg ringIndex) []replay.Range {
	var out []replay.Range
	for _, q := range union(pos, head) {
		have := offsetOr(pos, q)
		if top, ok := head.Offset(q); ok && have < top {
			if _, ok := rg.Seek(q, have+1); !ok {
				out = append(out, replay.Range{Partition: q, After: have, Upto: top})
			}
		}
	}
	return out
}

// offsetOr returns q's offset in v, or -1 when v has none.
func offsetOr(v position.Vector, q int32) int64 {
	if off, ok := v.Offset(q); ok {
		return off
	}
	return -1
}
