package stream

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// Snapshot, then live (from=snapshot): a stream that starts with the current state of a topic of keyed
// records (a compacted topic, typically) and goes on with its changes. It is a catch-up from the topic's
// start to the head the stream joined the ring at, conflated with no interval: of each key, only the latest
// record, in offset order within each partition; keys whose latest record is a tombstone are left out. Then
// an "event: live" frame, whose id is the position of the cut, and then every record after it, as any
// stream.
//
// The cut is exact per partition: everything up to the joined head is in the snapshot (or superseded in
// it), everything after comes live. A snapshot frame's id is, as with conflation, the position with its own
// offset, so a client that drops during the snapshot resumes from its id: a resume of a from=snapshot stream
// (its URL keeps the parameter, and EventSource sends Last-Event-ID) is a snapshot of what changed since the
// id, tombstones included (the client has those keys), then "live" again. A snapshot bigger than
// SnapshotMaxBytes is sent in parts: a key may then come more than once before "live", the last one wins, and
// a key an earlier part sent gets its tombstone when it is deleted after that part.
//
// A snapshot is the latest state of each key the stream may see, the same from the topic as from a key index:
// with event=, filter= or a token's filter, a record of a key the stream follows that the filters do not pass
// (a tombstone whose type is not asked for, a value that stopped matching) takes the key out of the state: a
// record of it held from earlier is dropped, and when the client may have had the key (a resume that saw a
// record of it pass, or an earlier part that sent it) it gets the key's tombstone frame ("event: delete", the
// key as data), whatever its event filter, since that is what the key's state is now. A key the stream never
// saw pass is never named (a token's filter hides other users' keys, their deletes too).

// SnapshotMaxBytes bounds what a snapshot stream holds before it sends; 0 means 16 MiB. A variable for tests.
var SnapshotMaxBytes = 16 << 20

// DefaultSnapshots is how many snapshots a pod builds at once when Config.Snapshots is zero.
const DefaultSnapshots = 2

// SnapshotsMemory is what the snapshots a pod builds at once (Config.Snapshots, zero for the default) may
// take: each its held frames (SnapshotMaxBytes, entries counted) and the buffer they go out through (up to
// twice that with append's growth; released once the snapshot went out). The chart counts it in a pod's
// memory.
func SnapshotsMemory(builds int) int { return cmp.Or(builds, DefaultSnapshots) * 3 * snapshotLimit() }

// snapshotLimit is SnapshotMaxBytes, or its default.
func snapshotLimit() int {
	if SnapshotMaxBytes <= 0 {
		return 16 << 20
	}
	return SnapshotMaxBytes
}

// OpenedEvent is the event type of the frame that repeats the opening block's id (Params.Opened).
const OpenedEvent = feed.EventOpened

// LiveEvent is the event type of the frame that ends a snapshot.
const LiveEvent = feed.EventLive

// snapshotForever is a snapshot's interval: it sends when the catch-up ends, not on a clock.
const snapshotForever = 100 * 365 * 24 * time.Hour

// startSnapshot makes the stream hold what its catch-up reads; a resume keeps tombstones (the client has
// the keys they delete).
func (c *conn) startSnapshot(resuming bool) {
	c.cf = &conflation{every: snapshotForever, maxBytes: snapshotLimit(), live: !resuming, state: true, byKey: map[heldKey]int{}}
	c.cf.sent = c.pos.Clone()
}

// snapshotTo builds the snapshot up to the ring position c0 (whose position is head): the catch-up reads
// from Kafka what the ring does not hold, then the ring's frames up to c0 are held too. A ring that moved
// past the stream meanwhile makes it catch up from Kafka again, from where it is.
func (c *conn) snapshotTo(ctx context.Context, t *Topic, c0 uint64, head position.Vector, resuming bool) error {
	// Each snapshot holds its frames until the cut: a storm of them is built a few at a time (Config.Snapshots),
	// the others waiting with keep-alives, so that a pod's memory bounds a storm's speed, not its survival.
	if err := c.await(ctx, func(ctx context.Context) error {
		select {
		case c.s.snapshots <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}); err != nil {
		return err
	}
	defer func() { <-c.s.snapshots }()
	if !resuming {
		if ok, err := c.snapshotFromIndex(t); ok || err != nil {
			return err
		}
	}
	c.stats.SnapshotsRead.Add(1)
	if err := c.catchUp(ctx, t, &c.p, c0, head, resuming); err != nil {
		return err
	}
	var sc scratch
	for c.cursor < c0 {
		out, next, _, err := c.pull(&sc)
		if errors.Is(err, ring.ErrBehind) || errors.Is(err, errRejoin) {
			c0, head = c.joinAgain()
			if err := c.catchUp(ctx, t, &c.p, c0, head, true); err != nil {
				return err
			}
			continue
		}
		if len(out) > 0 { // a snapshot past its bound goes out in parts
			if err := c.write(out); err != nil {
				return err
			}
			c.written(&sc, monoNow())
		}
		if next == c.cursor {
			break // nothing more in the ring (it cannot be, below c0; but never spin)
		}
		c.cursor = next
	}
	return c.endSnapshot()
}

// snapshotFromIndex builds a fresh snapshot from the ring's key index when it has one that holds every
// partition of the topic from its log start: each key's latest frame that the stream's filters pass goes out
// as a held frame does (sendHeld), and the cut is the index's (a moment later than the stream joined the
// ring, which is as exact). ok is false when the index cannot give it; the snapshot is then read from the
// topic.
func (c *conn) snapshotFromIndex(t *Topic) (ok bool, err error) {
	var parts []int32
	if t.Partitions != nil {
		parts = t.Partitions()
	}
	frames, c1, id, err := t.Ring.KeySnapshot(nil, parts, c.idBuf[:0])
	if err != nil {
		return false, nil
	}
	c.idBuf = id
	head, err := position.Parse(string(id))
	if err != nil {
		return false, nil // no head yet: nothing published
	}
	if c.keyParts != nil {
		head = head.Restrict(c.keyParts)
	}
	c.stats.SnapshotsIndexed.Add(1)
	// The index holds one frame per key, immutable: nothing to conflate or copy, each goes out as held frames
	// do, in parts of about the stream's bound.
	c.cf.sent = c.pos.Clone()
	for _, f := range frames {
		nl := bytes.IndexByte(f.Bytes, '\n')
		if !c.ownPartition(f.Partition) || !c.keepsFrame(f, nl, &c.p) {
			continue
		}
		c.sendHeld(heldFrame{partition: f.Partition, offset: f.Offset, key: f.Key, rest: f.Bytes[nl+1:]})
		if len(c.buf) > c.cf.maxBytes {
			if err := c.flushBuf(); err != nil {
				return true, err
			}
		}
	}
	// The cut: the index's position, which covers the records it holds and those they superseded.
	c.pos, c.cursor = head, c1
	return true, c.endSnapshot()
}

// endSnapshot sends what the snapshot holds, then the live frame at the cut, and makes the stream an
// ordinary one.
func (c *conn) endSnapshot() error {
	c.cf.final = true
	c.flushDue(0)
	c.cf = nil
	c.idBuf, _ = c.pos.AppendText(c.idBuf[:0])
	return c.writeOwn(kindLive, sse.AppendEventBytes(nil, c.idBuf, []byte(LiveEvent), fmt.Appendf(nil, `{"id":%q}`, c.idBuf)))
}

// unseen takes into account, in a snapshot, a record of a key the stream follows that its filters do not pass
// (see above): the key's held record is superseded, by its tombstone when the client may have the key. Other
// streams, and records without a key, are not concerned.
func (c *conn) unseen(partition int32, offset int64, key []byte) {
	cf := c.cf
	if cf == nil || !cf.state || len(key) == 0 || (len(c.p.Keys) > 0 && !c.p.Keys[string(key)]) {
		return
	}
	i, held := cf.byKey[heldKey{partition, string(key)}]
	switch {
	case held && cf.live && !cf.wasSent(partition, key):
		// A fresh snapshot whose client never had the key: it just leaves the state.
		old := &cf.held[i]
		cf.addBytes(heldOverhead - heldCost(old.key, old.rest)) // the entry stays until compacted
		old.rest, old.key = nil, nil
		cf.dead++
		delete(cf.byKey, heldKey{partition, string(key)})
	case held, cf.wasSent(partition, key):
		frame := feed.AppendFrame(nil, []byte("-"), &kgo.Record{Key: key, Partition: partition, Offset: offset}, c.t.format())
		now := monoNow()
		cf.hold(partition, offset, key, frame[bytes.IndexByte(frame, '\n')+1:], false, now)
		c.flushDue(now)
	}
}

// keySeed seeds the hashes of the keys a snapshot sent in parts.
var keySeed = maphash.MakeSeed()

// keyHash is the hash of a key of a partition, as sentKeys holds it.
func keyHash(partition int32, key []byte) uint64 {
	return maphash.Bytes(keySeed, key) ^ uint64(partition)*0x9e3779b97f4a7c15 //nolint:gosec // a partition is never negative
}

// remember notes a key a part of the snapshot sent: a later tombstone of it is the client's to have.
func (cf *conflation) remember(h heldFrame) {
	if len(h.key) == 0 {
		return
	}
	if cf.sentKeys == nil {
		cf.sentKeys = map[uint64]struct{}{}
	}
	cf.sentKeys[keyHash(h.partition, h.key)] = struct{}{}
}

// wasSent says an earlier part of the snapshot sent the key (by its hash: a collision, one in 2^64, sends a
// key's tombstone that was not needed, which changes no state).
func (cf *conflation) wasSent(partition int32, key []byte) bool {
	if len(cf.sentKeys) == 0 {
		return false
	}
	_, ok := cf.sentKeys[keyHash(partition, key)]
	return ok
}
