package stream

import (
	"bytes"
	"sync/atomic"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
)

// Conflation (the conflate query parameter): within each interval a stream holds the records it would send,
// and at the interval's end sends, of each key (in each partition), only the latest, in the order they came;
// records without a key (or with an empty one) are all sent. A record left out was superseded by a later record of its key that
// the client gets after it.
//
// Positions stay exact in that sense. Held records go out in the order the ring (or Kafka) gave them, so in
// each partition by offset; each gets the id of the stream's position with its own offset in its
// partition. A record left out has a later record of its key in the same partition; if that one was sent,
// the id the client holds covers both; if not, the id stops before it, and a resume from that id delivers it
// (and, after it, nothing it superseded). Held records not yet sent when the stream ends (a client gone, a
// drain, a token's expiry) are not lost: the client's id stops before them.
//
// A conflated stream runs on its own goroutine (the writer pool does not serve it), whose loop wakes at the
// interval's end; a client that reads slowly gets more records conflated into each write rather than being
// cut, and one that falls behind the ring catches up from Kafka, conflated the same way.

// Bounds of the conflate parameter, and of what a stream holds: past maxHeldBytes it sends at once.
const (
	MinConflate  = 10 * time.Millisecond
	MaxConflate  = time.Minute
	maxHeldBytes = 1 << 20
	// ConflatedBytes bounds what all the conflated streams of a pod hold together: past it, a stream that
	// holds anything sends it at once, as past its own maxHeldBytes. The chart counts it in a pod's memory.
	ConflatedBytes = 32 << 20
)

// conflation is a conflated stream's held records.
type conflation struct {
	every    time.Duration
	maxBytes int  // past this much held (heldCost), it sends at once
	live     bool // a fresh snapshot: tombstones are left out (the client never had their keys), see snapshot.go
	// state: a snapshot, the latest state of each key: a record that the stream's filters do not pass takes
	// its key out of it (see snapshot.go); sentKeys, once it went out in parts, the keys it sent (hashes).
	state    bool
	final    bool // the snapshot's last part is going out: its keys need not be remembered
	sentKeys map[uint64]struct{}
	due      int64 // monotonic time of the next send; 0 while nothing is held
	// sent is the client's position as of the frames it was sent: held frames' ids are built from it.
	sent  position.Vector
	held  []heldFrame
	byKey map[heldKey]int // a key's latest record: its index in held
	dead  int             // entries of held superseded by a later record of their key
	bytes int             // what held and byKey take, as heldCost counts it
	// pod, for a conflated stream (not a snapshot, which Config.Snapshots bounds), counts bytes in the pod's
	// total (Server.conflated), bounded by podMax.
	pod    *atomic.Int64
	podMax int64
}

// addBytes counts n more bytes held (n < 0: fewer), in the pod's total too.
func (cf *conflation) addBytes(n int) {
	cf.bytes += n
	if cf.pod != nil {
		cf.pod.Add(int64(n))
	}
}

// release gives back to the pod's total what cf holds (its stream ended, or sent it).
func (cf *conflation) release() {
	cf.addBytes(-cf.bytes)
}

// over says cf must send what it holds now: past its own bound, or the pod's.
func (cf *conflation) over() bool {
	return cf.bytes > cf.maxBytes || (cf.pod != nil && cf.pod.Load() > cf.podMax)
}

type heldKey struct {
	partition int32
	key       string
}

// heldFrame is a record held until the interval's end: its frame after the id line, as a ring frame has it.
type heldFrame struct {
	partition int32
	offset    int64
	key       []byte
	rest      []byte // nil once a later record of the key superseded it
	own       bool   // a frame of the gateway's own (ring.Frame.Own), held in its place among the records
}

// heldOverhead is what an entry of held costs besides its bytes: the heldFrame, and its key's map entry.
const heldOverhead = 128

// heldCost is what a held record of this key and frame takes: its entry, its frame, and its key twice (the
// frame's copy and the map's).
func heldCost(key, rest []byte) int { return heldOverhead + 2*len(key) + len(rest) }

// conflating returns the stream's conflation, made on first use; nil when it is not conflated.
func (c *conn) conflating() *conflation {
	if c.cf == nil && c.p.Conflate > 0 { // else the one made already (a snapshot's too), or none
		c.cf = &conflation{
			every: c.p.Conflate, maxBytes: maxHeldBytes, byKey: map[heldKey]int{},
			pod: &c.s.conflated, podMax: ConflatedBytes,
		}
	}
	return c.cf
}

// seen moves the stream's position over a record it has looked at (sent, held or passed over by its
// filters). A conflated stream's first record of an interval also fixes where the ids of that interval's
// frames start: the position before it.
func (c *conn) seen(partition int32, offset int64) {
	if cf := c.conflating(); cf != nil && len(cf.held) == 0 {
		cf.sent = c.pos.Clone()
	}
	c.pos.Set(partition, offset)
}

// hold keeps a record's frame (rest: after its id line) until the interval's end; a record of a key already
// held replaces it there. The hold grows with the keys, not the records: a superseded entry stays in held
// (the order of the others is the order they came, which their ids need) until superseded entries are half of
// held, when held is compacted; so a million updates of one key hold a few entries, not a million.
func (cf *conflation) hold(partition int32, offset int64, key, rest []byte, own bool, now int64) {
	if len(cf.held) == 0 {
		cf.due = now + int64(cf.every)
	}
	h := heldFrame{partition: partition, offset: offset, rest: append([]byte(nil), rest...), own: own}
	if len(key) > 0 { // the ring does not tell a null key from an empty one: both are sent, never conflated
		// A copy: the key must not keep the ring's (or a replay's) memory of the record alive.
		h.key = append([]byte(nil), key...)
		k := heldKey{partition, string(key)}
		if i, ok := cf.byKey[k]; ok {
			old := &cf.held[i]
			cf.addBytes(heldOverhead - heldCost(old.key, old.rest)) // the entry stays until compacted
			old.rest, old.key = nil, nil
			cf.dead++
		}
		cf.byKey[k] = len(cf.held)
	}
	cf.held = append(cf.held, h)
	cf.addBytes(heldCost(h.key, h.rest))
	if cf.dead > 16 && 2*cf.dead >= len(cf.held) {
		cf.compact()
	}
	if cf.over() {
		cf.due = now // too much held: out at once
	}
}

// compact drops the superseded entries of held, keeping the others in their order.
func (cf *conflation) compact() {
	n := 0
	for _, h := range cf.held {
		if h.rest == nil {
			continue
		}
		if len(h.key) > 0 {
			cf.byKey[heldKey{h.partition, string(h.key)}] = n
		}
		cf.held[n] = h
		n++
	}
	clear(cf.held[n:])
	cf.addBytes(-(len(cf.held) - n) * heldOverhead)
	cf.held, cf.dead = cf.held[:n], 0
	if cap(cf.held) > 64 && n < cap(cf.held)/4 {
		cf.held = append([]heldFrame(nil), cf.held...) // a burst's array is not kept for what remains
	}
}

// flushDue appends to c.buf the held frames when their interval is over (or always, when now is 0), each
// with its id, and empties the hold.
func (c *conn) flushDue(now int64) {
	cf := c.cf
	if cf == nil || len(cf.held) == 0 || (now != 0 && now < cf.due) {
		return
	}
	keep := cf.state && !cf.final
	for _, h := range cf.held {
		if c.sendHeld(h) && keep {
			cf.remember(h)
		}
	}
	clear(cf.held)
	cf.held = cf.held[:0]
	if cap(cf.held) > 1024 {
		cf.held = nil // a burst's array is not kept for the quiet intervals after it
	}
	clear(cf.byKey)
	cf.release()
	cf.due, cf.dead = 0, 0
}

// sendHeld appends to c.buf a frame that was held (unless a later record of its key superseded it, or it is a
// tombstone in a fresh snapshot, whose client never had the key unless an earlier part sent it), with its id:
// the position sent so far with the frame's own offset.
func (c *conn) sendHeld(h heldFrame) (sent bool) {
	cf := c.cf
	if h.rest == nil || (cf.live && !h.own && bytes.HasPrefix(h.rest, deleteTypeLine) && !cf.wasSent(h.partition, h.key)) {
		return false
	}
	cf.sent.Set(h.partition, h.offset)
	c.idBuf, _ = cf.sent.AppendText(c.idBuf[:0])
	if h.own {
		c.buf = c.appendOwnOut(c.buf, h.rest)
	} else {
		c.buf = c.appendOut(c.buf, h.rest, h.partition, h.offset, h.key)
	}
	c.frames++
	c.stats.Frames.Add(1)
	return true
}

// clientPos is the position the client has: the stream's, less what a conflated stream holds unsent (the
// id of a frame of the gateway's own that does not send them first, such as the token's).
func (c *conn) clientPos() position.Vector {
	if c.cf != nil && len(c.cf.held) > 0 {
		return c.cf.sent
	}
	return c.pos
}

// flushDueAt is when the loop must wake to send held frames: 0 when nothing is held.
func (c *conn) flushDueAt() int64 {
	if c.cf == nil || len(c.cf.held) == 0 {
		return 0
	}
	return c.cf.due
}
