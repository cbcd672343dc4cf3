package feed

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// acked is a checkpoint Kafka has acknowledged: where it is, its vector, the topic epoch it belongs to, and
// its place among the topic's checkpoints (seq), so that an older one acknowledged late never replaces it.
type acked struct {
	ref   position.Ref
	vec   position.Vector
	epoch uint64
	seq   uint64
}

// defaultCheckpointsInFlight bounds the checkpoints of a topic being written at once. More than one lets a
// pod start the next checkpoint while the previous one waits for Kafka, so the base of its compact ids is
// one acknowledgement old rather than up to two.
const defaultCheckpointsInFlight = 4

// Topic is one topic's state: its ring and what the feed knows of its partitions.
type Topic struct {
	name      string
	ring      *ring.Ring
	refreshed *atomic.Bool  // the feed's: a metadata refresh has succeeded
	gen       atomic.Uint64 // bumped when partitions are added, or the topic is created again, after it was first served
	epoch     atomic.Uint64 // bumped when the topic is deleted and created again
	appeared  chan struct{} // closed once the topic exists
	format    *Format       // how values are written into frames
	// view is the partition table as Ready, Lag and Progress read it, without mu (see partsView); replaced
	// under mu whenever the table changes.
	view atomic.Pointer[partsView]

	mu     sync.Mutex
	kid    [16]byte       // the topic's id in Kafka when its partitions were assigned
	exists bool           // partitions are assigned: streams can be served
	absent bool           // the last metadata refresh found no such topic in Kafka
	atEnd  map[int32]bool // partitions that existed at the feed's first refresh: they start at the end
	// fromStart makes the partitions of the first refresh start at their log start rather than a prefill
	// before the end: the topic's ring keeps a key index (Config.KeyIndex).
	fromStart bool
	parts     map[int32]*partition
	latest    position.Vector // where a from=latest stream started when the partitions were first assigned
	pos       position.Vector
	batch     ring.Batch
	id        []byte
	head      []byte // the v1 id of pos, for the ring's head, when frame ids are compact

	// Compact ids (nil cps: none). The newest acknowledged checkpoint is swapped in by the writer's callback;
	// cpInFlight counts those being written (at most cpMaxInFlight), the newest of which started at cpStarted
	// (cpSeq of them so far; both under mu); cpDue says a frame of the batch being framed outgrew the base
	// (under mu); cpErrAt rate-limits the log of failed writes.
	cps           Checkpointer
	compactMax    int
	cpAfter       int
	cpMaxInFlight int32
	log           *slog.Logger
	cpAcked       atomic.Pointer[acked]
	cpInFlight    atomic.Int32
	cpDue         bool
	cpStarted     position.Vector
	cpSeq         uint64
	cpScratch     []byte
	cpErrAt       atomic.Int64
	cpStats       checkpointStats
	idCompact     atomic.Int64 // frames given a compact id
	idFallback    atomic.Int64 // frames given a v1 id while compact ids are on

	published uint64        // frames published to the ring so far: the ring's head sequence (under mu)
	newestSeq atomic.Uint64 // the ring's head after the latest publish (see Newest)
	newestTS  atomic.Int64  // the timestamp of the latest publish's newest record, Unix milliseconds
}

type partition struct {
	start int64 // offset reading began at; -1 when reading from the partition's start
	ready int64 // offset up to which the partition must be read before the feed is ready; -1 for none
	seen  bool  // a fetch covered an offset of this partition; owned by the fetch loop (under Topic.mu)
	// indexed says the ring's key index was told where reading the partition began (IndexFrom); owned by the
	// fetch loop (under Topic.mu).
	indexed bool
	// lowSeen is the highest low watermark a fetch reported; owned by the fetch loop (under Topic.mu).
	lowSeen int64
	// next is the offset after the last record or transaction marker read: the next offset to read. It starts
	// at start; -1 until the first fetch when reading from the partition's start.
	next   atomic.Int64
	end    atomic.Int64 // latest last-stable offset seen
	caught atomic.Bool  // a fetch reported a last stable offset at or below next
	// records counts the records read into the ring; fed is the offset of the last of them plus one (0 until
	// the first). Both are written by the fetch loop and read by metrics.
	records atomic.Int64
	fed     atomic.Int64
	// gaps counts the resyncs the feed published for offsets retention removed before it read them, and
	// skipped those offsets (see gap); written by the fetch loop, read by metrics.
	gaps    atomic.Int64
	skipped atomic.Int64
}

// stageBytes bounds the frames staged for one Publish: a poll is published in parts of about this size. The
// staging batch keeps the memory of its largest part, per topic, outside the ring's capacity; a whole poll
// while reading a prefill can be tens of MB.
const stageBytes = 1 << 20

// publish frames a poll's records of the topic and publishes them, in batches of about stageBytes.
func (t *Topic) publish(fs []Fetched) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.batch.Reset()
	var newest int64
	for _, fp := range fs {
		ps := t.parts[fp.Partition]
		if ps == nil || fp.Err != nil {
			continue
		}
		if next := ps.next.Load(); ps.seen && next >= 0 && fp.First > next && fp.LogStart > next {
			// Offsets from next on were not read and are gone (a gap above the log start is compaction's, or
			// aborted records': nothing to report).
			t.gap(ps, fp.Partition, next, fp.LogStart)
		}
		if !ps.indexed && fp.LogStart >= 0 {
			// Reading began at start (at the log start when start is -1): the key index holds the partition
			// from there, or from the log start when retention moved past start before the first fetch.
			ps.indexed = true
			t.ring.IndexFrom(fp.Partition, max(ps.start, fp.LogStart))
		}
		if !ps.seen && fp.First >= 0 {
			ps.seen = true
			// The ring holds the partition from its start offset only when reading really began there. When
			// retention moved past the start before the first fetch, reading began later, and the ring must
			// not claim offsets it never held: its low is then the first record's offset (Publish sets it).
			if ps.start >= 0 && fp.First == ps.start {
				t.ring.SetLow(fp.Partition, ps.start)
			}
		}
		for _, rec := range fp.Records {
			t.pos.Set(rec.Partition, rec.Offset)
			t.id = t.appendFrameID(t.id[:0])
			// Never waits for a schema lookup: the lock is held, and the fetch loop serves every topic.
			t.batch.Add(t.format.appendFrame(t.batch.Buf(), t.id, rec, false), rec.Partition, rec.Offset, rec.Key)
			if ts := rec.Timestamp.UnixMilli(); ts > newest {
				newest = ts
			}
			if t.batch.Bytes() >= stageBytes {
				// The id is the position after the last staged frame, so a part of a poll is published
				// like a whole one.
				t.publishBatch(newest)
			}
		}
		if n := len(fp.Records); n > 0 {
			ps.records.Add(int64(n))
			ps.fed.Store(fp.Records[n-1].Offset + 1)
		}
		if fp.Next > ps.next.Load() {
			ps.next.Store(fp.Next)
		}
		if fp.LastStable >= 0 {
			ps.end.Store(fp.LastStable)
			if fp.LastStable <= ps.next.Load() {
				ps.caught.Store(true)
			}
		}
		if fp.LogStart > ps.lowSeen {
			ps.lowSeen = fp.LogStart
			t.ring.Trim(fp.Partition, fp.LogStart)
		}
	}
	if t.batch.Len() > 0 {
		t.publishBatch(newest)
	}
}

// publishBatch publishes the staged frames, newest being the timestamp of the newest record among them, and
// empties the batch. The caller holds mu.
func (t *Topic) publishBatch(newest int64) {
	// Newest is stored before the frames are published: a stream that sees its sequence has them, or gets
	// them in this publish.
	t.published += uint64(t.batch.Len())
	t.newestTS.Store(newest)
	t.newestSeq.Store(t.published)
	head := t.id
	if t.cps != nil {
		// The ring's head id stays v1: streams parse it when they join, and a new stream's opening block
		// carries a position of its own.
		t.head, _ = t.pos.AppendText(t.head[:0])
		head = t.head
	}
	t.ring.Publish(&t.batch, head)
	t.batch.Reset()
	if t.cpDue {
		t.cpDue = false
		if t.wantCheckpoint() {
			t.checkpoint()
		}
	}
}

// appendFrameID appends the id of a frame whose position is t.pos: v1 without checkpoints; otherwise
// compact against the newest acknowledged checkpoint of this epoch when it fits, v1 when not. A compact id
// never names a checkpoint Kafka has not acknowledged, so a crash leaves no id that points at nothing. When
// the compact id grows past cpAfter or could not be used, a new checkpoint is due: it is started once the
// batch being framed is published (publishBatch), at the batch's last position. Framing a batch takes
// microseconds, an acknowledgement milliseconds, so a checkpoint started in the middle of a batch would not
// serve its later frames anyway; started at its end, the next batch's ids grow from where this one ended,
// not from the frame that crossed the threshold. The caller holds mu.
func (t *Topic) appendFrameID(dst []byte) []byte {
	if t.cps == nil {
		dst, _ = t.pos.AppendText(dst)
		return dst
	}
	if a := t.cpAcked.Load(); a != nil && a.epoch == t.epoch.Load() {
		if id, ok := position.AppendCompact(dst, a.ref, a.vec, t.pos, t.compactMax); ok {
			if len(id)-len(dst) > t.cpAfter {
				t.cpDue = true
			}
			t.idCompact.Add(1)
			return id
		}
	}
	t.cpDue = true
	t.idFallback.Add(1)
	dst, _ = t.pos.AppendText(dst)
	return dst
}

// wantCheckpoint says whether to start another checkpoint now that ids have outgrown the acknowledged one:
// yes when none is being written; when some are, only if fewer than cpMaxInFlight and the position
// has moved past the newest of them by more than cpAfter bytes of compact id, so that checkpoints in flight
// stay spread over the acknowledgement time rather than all start at once. The caller holds mu.
func (t *Topic) wantCheckpoint() bool {
	switch n := t.cpInFlight.Load(); {
	case n == 0:
		return true
	case n >= t.cpMaxInFlight:
		return false
	}
	id, ok := position.AppendCompact(t.cpScratch[:0], position.Ref{}, t.cpStarted, t.pos, t.compactMax)
	t.cpScratch = id
	return !ok || len(id) > t.cpAfter
}

// checkpoint starts writing a checkpoint of t.pos, unless the topic's Kafka id is not known yet. When Kafka
// acknowledges it, it becomes the base of compact ids unless a newer one of the same epoch already is. The
// caller holds mu.
func (t *Topic) checkpoint() {
	if t.kid == ([16]byte{}) {
		return
	}
	t.cpSeq++
	vec, epoch, seq, start := t.pos.Clone(), t.epoch.Load(), t.cpSeq, time.Now()
	t.cpStarted = vec
	t.cpInFlight.Add(1)
	t.cps.Write(t.name, t.kid, vec, func(ref position.Ref, err error) {
		if err == nil {
			t.swapAcked(&acked{ref: ref, vec: vec, epoch: epoch, seq: seq})
		}
		t.cpStats.record(time.Since(start), err) // after the swap: counted acknowledged, it is usable
		if now := time.Now().UnixNano(); err != nil && now-t.cpErrAt.Load() > int64(10*time.Second) {
			t.cpErrAt.Store(now)
			t.log.Warn("checkpoint write failed; frames get v1 ids until one succeeds", "topic", t.name, "err", err)
		}
		t.cpInFlight.Add(-1)
	})
}

// swapAcked makes a the base of compact ids unless the current base is newer: a later checkpoint of the same
// epoch, or one of a later epoch.
func (t *Topic) swapAcked(a *acked) {
	for {
		cur := t.cpAcked.Load()
		if cur != nil && (cur.epoch > a.epoch || cur.epoch == a.epoch && cur.seq > a.seq) {
			return
		}
		if t.cpAcked.CompareAndSwap(cur, a) {
			return
		}
	}
}

// checkpointStats counts a topic's checkpoint writes: acknowledged, failed, and the time acknowledged ones
// waited for Kafka, in all.
type checkpointStats struct {
	acked, failed atomic.Int64
	ackNanos      atomic.Int64
}

func (s *checkpointStats) record(d time.Duration, err error) {
	if err != nil {
		s.failed.Add(1)
		return
	}
	s.acked.Add(1)
	s.ackNanos.Add(int64(d))
}

// Checkpoints returns the topic's checkpoint counts: acknowledged, failed, and the seconds acknowledged ones
// waited in all (their mean is its rate over the rate of acknowledged ones).
func (t *Topic) Checkpoints() (acked, failed int64, ackSeconds float64) {
	return t.cpStats.acked.Load(), t.cpStats.failed.Load(), time.Duration(t.cpStats.ackNanos.Load()).Seconds()
}

// IDs returns how many frames got a compact id and how many a v1 id while compact ids are on.
func (t *Topic) IDs() (compact, fallback int64) { return t.idCompact.Load(), t.idFallback.Load() }

// ID returns the topic's Kafka id (zero until the feed has seen it).
func (t *Topic) ID() [16]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kid
}

// Newest returns the ring's head sequence after the latest publish of records and the timestamp of that
// publish's newest record (Unix milliseconds; 0 before the first publish). A stream whose cursor has reached
// seq has been sent that record, so the time since ts is how late records reach clients (sampled: see
// stream.Topic).
func (t *Topic) Newest() (seq uint64, ts int64) {
	seq = t.newestSeq.Load()
	return seq, t.newestTS.Load()
}

func (t *Topic) setID(id [16]byte) {
	t.mu.Lock()
	t.kid = id
	if t.cps != nil && t.exists && t.cpAcked.Load() == nil && t.cpInFlight.Load() == 0 {
		// A first checkpoint as soon as the topic's id is known, so that the first records already have one
		// to refer to (once: every metadata refresh comes here while it waits for Kafka).
		t.checkpoint()
	}
	t.mu.Unlock()
}

func (t *Topic) setAbsent(absent bool) {
	t.mu.Lock()
	t.absent = absent
	t.mu.Unlock()
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Ring returns the topic's ring.
func (t *Topic) Ring() *ring.Ring { return t.ring }

// Exists reports whether the topic has been found in Kafka and its partitions are being read.
func (t *Topic) Exists() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exists
}

// Absent reports whether the last metadata refresh found that the topic does not exist in Kafka (false while
// the feed has not reached Kafka yet: then nobody knows).
func (t *Topic) Absent() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.absent && !t.exists
}

// LatestAtStart returns the position a from=latest stream had when the topic's partitions were first assigned
// (their last stable offsets then, before any prefill): where a stream that waited for the topic while
// nobody knew whether it existed starts, so it gets neither history nor a gap.
func (t *Topic) LatestAtStart() position.Vector {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.latest.Clone()
}

// Appeared returns a channel that is closed once the topic exists (see Exists).
func (t *Topic) Appeared() <-chan struct{} { return t.appeared }

// Epoch returns a number that grows whenever the topic is deleted and created again: every stream re-joins.
func (t *Topic) Epoch() uint64 { return t.epoch.Load() }

// Generation returns a number that grows whenever partitions are added to the topic after it was first
// served: streams whose partitions depend on the topic's partition count (key filters) recompute them.
func (t *Topic) Generation() uint64 { return t.gen.Load() }

// Partitions returns the topic's partitions known to the feed, ascending.
func (t *Topic) Partitions() []int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := make([]int32, 0, len(t.parts))
	for p := range t.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}
