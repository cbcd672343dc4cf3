package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// Topic is what a stream reads: the topic's ring, and Kafka for what the ring does not hold.
type Topic struct {
	// Name is the Kafka topic.
	Name string
	// Ring is the topic's ring. Required.
	Ring *ring.Ring
	// Partitions returns the topic's partitions, to reject ids naming others. Nil means any partition.
	Partitions func() []int32
	// Watermarks returns the partitions' low and high watermarks, from a cache no older than maxAge. Nil
	// means positions the ring does not hold cannot be served.
	Watermarks func(ctx context.Context, maxAge time.Duration) (map[int32]feed.Watermarks, error)
	// OffsetsAfter returns, per partition, the first offset at or after a time, for from=<time>.
	OffsetsAfter func(ctx context.Context, t time.Time) (map[int32]int64, error)
	// Replay reads what the ring does not hold back from Kafka. Nil means it cannot be served.
	Replay *replay.Pool
	// KeysAnyPartition says records of one key may be in any partition (the topic is produced with a
	// partitioner other than Kafka's default), so key-filtered streams cover every partition. By default a
	// key-filtered stream reads, and lists in its ids, only the partitions Kafka's default partitioner
	// (murmur2) puts its keys in.
	KeysAnyPartition bool
	// ValueFormat is how the topic's values are written into frames read back from Kafka; it must be the
	// feed's, so that those frames are the bytes the ring's were. The zero value is feed.ValueAuto.
	ValueFormat feed.ValueFormat
	// Newest returns the ring's head sequence after the latest publish of records and the Unix-millisecond
	// timestamp of its newest record (feed.Topic.Newest), for the delivery lag. Nil means it is not measured.
	Newest func() (seq uint64, ts int64)
	// sampled is the last publish whose delivery lag was reported (see conn.sampleDelivery).
	sampled sampled
	// Feed is the feed's view of the topic: whether it exists yet, and its partitions' generation. Nil means
	// the topic exists and its partitions never change.
	Feed *feed.Topic

	// Resolve returns the position a compact (v2) id says, reading its checkpoint from Kafka when needed
	// (checkpoint.Resolver.Resolve); a checkpoint of a topic whose Kafka id is not topicID is invalid (zero:
	// not checked). Nil means compact ids are invalid here.
	Resolve func(ctx context.Context, id string, topicID [16]byte) (position.Vector, error)
	// Cached is Resolve without Kafka and without the topic id check, for the ring's own frames: false when
	// the checkpoint is not at hand (checkpoint.Resolver.Cached). Nil means never.
	Cached func(id string) (position.Vector, bool)
}

// kafkaID returns the topic's Kafka id as the feed knows it (zero without a feed).
func (t *Topic) kafkaID() [16]byte {
	if t.Feed == nil {
		return [16]byte{}
	}
	return t.Feed.ID()
}

// parseID returns the position of a client's id, v1 or compact. A compact id that cannot be resolved is an
// error wrapping checkpoint.ErrInvalid or checkpoint.ErrGone, or errReplay when Kafka could not be read.
func (t *Topic) parseID(ctx context.Context, id string, topicID [16]byte) (position.Vector, error) {
	if !position.IsCompact(id) {
		return position.Parse(id)
	}
	if t.Resolve == nil {
		return position.Vector{}, fmt.Errorf("%w: this gateway does not read compact ids", checkpoint.ErrInvalid)
	}
	v, err := t.Resolve(ctx, id, topicID)
	if err != nil && !errors.Is(err, checkpoint.ErrInvalid) && !errors.Is(err, checkpoint.ErrGone) {
		return position.Vector{}, fmt.Errorf("%w: %w", errReplay, err)
	}
	return v, err
}

// frameIDOf returns the position in the id line of a frame of this topic's ring: v1, or compact (this pod's
// own checkpoints are at hand; one evicted from the cache is read back from Kafka). The frame may be of the
// topic before it was deleted and created again: its position is still what the client has, and the resume
// that follows tells the client what that means (an ahead resync), as for a v1 id.
func (t *Topic) frameIDOf(ctx context.Context, frame []byte) (position.Vector, error) {
	line := frame[len("id: "):bytes.IndexByte(frame, '\n')]
	if !position.IsCompact(string(line)) {
		return frameID(frame), nil
	}
	if t.Cached != nil {
		if v, ok := t.Cached(string(line)); ok {
			return v, nil
		}
	}
	v, err := t.parseID(ctx, string(line), [16]byte{})
	if err != nil && !errors.Is(err, errReplay) {
		return position.Vector{}, fmt.Errorf("%w: the ring's id %s: %w", errReplay, line, err)
	}
	return v, err
}

// NewTopic returns what streams of topic name read: f's ring and partitions, Kafka through f and rp.
func NewTopic(f *feed.Feed, name string, rp *replay.Pool, keysAnyPartition bool) *Topic {
	ft := f.Topic(name)
	return &Topic{
		Name:       name,
		Ring:       ft.Ring(),
		Partitions: ft.Partitions,
		Watermarks: func(ctx context.Context, maxAge time.Duration) (map[int32]feed.Watermarks, error) {
			return f.Watermarks(ctx, name, maxAge)
		},
		OffsetsAfter: func(ctx context.Context, at time.Time) (map[int32]int64, error) {
			return f.OffsetsAfter(ctx, name, at)
		},
		Replay:           rp,
		KeysAnyPartition: keysAnyPartition,
		Feed:             ft,
		Newest:           ft.Newest,
	}
}

// epoch returns the topic's recreation epoch (see feed.Topic.Epoch).
func (t *Topic) epoch() uint64 {
	if t.Feed == nil {
		return 0
	}
	return t.Feed.Epoch()
}

// generation returns the topic's partition generation (see feed.Topic.Generation).
func (t *Topic) generation() uint64 {
	if t.Feed == nil {
		return 0
	}
	return t.Feed.Generation()
}

// keyPartitions returns the partitions a key-filtered stream covers, ascending, or nil when p has no key
// filter.
func keyPartitions(t *Topic, p Params) []int32 {
	if len(p.Keys) == 0 {
		return nil
	}
	var parts []int32
	if t.Partitions != nil {
		parts = t.Partitions()
	}
	if t.KeysAnyPartition || len(parts) == 0 {
		return parts
	}
	kp := kgo.StickyKeyPartitioner(nil).ForTopic(t.Name)
	var out []int32
	for k := range p.Keys {
		out = append(out, int32(kp.Partition(&kgo.Record{Key: []byte(k)}, len(parts))))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keyPartitionsOf returns the partitions of ids (ascending) that a key of p can be in: with Kafka's default
// partitioner, the partitions a key goes to under some partition count up to the topic's (or past the highest
// partition in ids: a partition this pod has not discovered yet). Every partition of ids with
// KeysAnyPartition.
func keyPartitionsOf(t *Topic, p Params, ids []int32) []int32 {
	if t.KeysAnyPartition || len(ids) == 0 {
		return ids
	}
	n := int32(0)
	if t.Partitions != nil {
		n = int32(len(t.Partitions()))
	}
	n = max(n, ids[len(ids)-1]+1)
	kp := kgo.StickyKeyPartitioner(nil).ForTopic(t.Name)
	var out []int32
	for _, q := range ids {
	keys:
		for k := range p.Keys {
			rec := &kgo.Record{Key: []byte(k)}
			for count := q + 1; count <= n; count++ {
				if int32(kp.Partition(rec, int(count))) == q {
					out = append(out, q)
					break keys
				}
			}
		}
	}
	return out
}

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

// errReplay is a failure to read what the ring does not hold from Kafka.
var errReplay = errors.New("stream: replay failed")

// errWrite is a failure to write to the client.
var errWrite = errors.New("stream: write failed")

// unknownPartitionRetry is how long a stream waits before it asks Kafka about an id's unknown partition again.
const unknownPartitionRetry = 300 * time.Millisecond

// errDrained ends a stream that was still waiting to start when the server drained, or that started while it
// was leaving.
var errDrained = errors.New("stream: server draining")

// errTokenExpired ends a stream whose token expired while it was waiting for its topic.
var errTokenExpired = errors.New("stream: token expired")

// start decides where a new stream begins: it waits for the topic to exist, takes the client's position from
// its id (or from the from parameter), joins the ring at its head, tells the client about anything it cannot
// have, writes the id-only block, and catches up to the head from the ring and Kafka.
func (c *conn) start(ctx context.Context, t *Topic, p Params) error {
	if err := c.awaitTopic(ctx, t, &p); err != nil {
		return err
	}
	c.p = p
	c.gen, c.epoch = t.generation(), t.epoch()
	resuming := false
	var invalid, gone error
	if p.LastEventID != "" {
		if position.IsCompact(p.LastEventID) {
			// Resolving a compact id may read its checkpoint from Kafka: answer first.
			if err := c.open(); err != nil {
				return err
			}
		}
		v, err := t.parseID(ctx, p.LastEventID, t.kafkaID())
		if err == nil {
			err = c.checkPartitions(ctx, v, t)
		}
		switch {
		case err == nil:
			c.pos, resuming = v, true
		case errors.Is(err, errReplay) || errors.Is(err, errWrite):
			return err
		case errors.Is(err, checkpoint.ErrGone):
			gone = err
		default:
			invalid = err
		}
	}
	c.keyParts = keyPartitions(t, p)
	if c.keyParts != nil && resuming {
		// A key's partition depends on the partition count: the id may list partitions of an earlier count
		// (producers that have not seen the new count still write there), and those stay the stream's. Only
		// those, though: an id never makes a key-filtered stream cover a partition its keys cannot be in
		// (records there would be filtered out all the same, but the stream's ids would follow that
		// partition).
		c.keyParts = unionParts(c.keyParts, keyPartitionsOf(t, p, partitionsOf(c.pos)))
	}
	c0, head := c.join(t)
	if !resuming {
		switch p.From {
		case FromEarliest:
			c.pos = position.Vector{}
		case "time":
			if t.OffsetsAfter == nil {
				return fmt.Errorf("%w: no offsets by time", errReplay)
			}
			var offs map[int32]int64
			err := c.await(ctx, func(ctx context.Context) (err error) {
				offs, err = t.OffsetsAfter(ctx, p.FromTime)
				return err
			})
			if err != nil {
				return err
			}
			c.pos = position.Vector{}
			for q, o := range offs {
				if o > 0 {
					c.pos.Set(q, o-1)
				}
			}
		default:
			c.pos = latest(t, head)
		}
	}
	if c.keyParts != nil {
		c.pos = c.pos.Restrict(c.keyParts)
	}
	if invalid != nil {
		c.stats.Resyncs[resyncInvalid].Add(1)
		if err := c.writeResync(ResyncData{Reason: ResyncInvalidID, Error: invalid.Error(), Partitions: []ResyncPartition{}}); err != nil {
			return err
		}
	}
	if gone != nil {
		// The checkpoint a compact id names is past the position topic's retention: the records it led to
		// are, too, when that retention covers the data topic's (see docs/decisions.md). Which partitions,
		// nobody can say any more.
		c.stats.Resyncs[resyncRetention].Add(1)
		if err := c.writeResync(ResyncData{Reason: ResyncRetention, Error: gone.Error(), Partitions: []ResyncPartition{}}); err != nil {
			return err
		}
	}
	c.idBuf, _ = c.pos.AppendText(c.idBuf[:0])
	c.buf = sse.AppendID(c.buf, string(c.idBuf))
	if c.leaving {
		// The client reconnects from this position elsewhere: a fresh stream too, so that nothing between now
		// and its reconnect is lost.
		if err := c.flushBuf(); err != nil {
			return err
		}
		return errDrained
	}
	if !resuming && invalid == nil && gone == nil {
		return c.catchUp(ctx, t, p, c0, head, false)
	}
	var pre []string
	if invalid != nil {
		pre = []string{ResyncInvalidID}
	}
	if gone != nil {
		pre = []string{ResyncRetention}
	}
	return c.traceResume(ctx, false, c.began, pre, func(ctx context.Context) error {
		return c.catchUp(ctx, t, p, c0, head, resuming)
	})
}

// awaitTopic holds the stream of a configured topic that Kafka does not have (yet), or whose existence
// nobody knows yet (Kafka not reached since the gateway started), until it appears: the client gets its
// "retry:" line and keep-alives, not a 404 that would stop an EventSource for good. While Kafka says the
// topic does not exist, everything it will hold is new to this client: the stream then starts from the
// topic's start and says so with an empty id ("v1:"), so that a reconnect anywhere resumes from the start.
func (c *conn) awaitTopic(ctx context.Context, t *Topic, p *Params) error {
	if t.Feed == nil || t.Feed.Exists() {
		return nil
	}
	absent := false
	markAbsent := func() {
		if !absent && p.LastEventID == "" && t.Feed.Absent() {
			absent = true
			p.From = FromEarliest
			c.buf = sse.AppendID(c.buf, "v1:")
		}
	}
	markAbsent()
	if err := c.flushBuf(); err != nil {
		return err
	}
	if c.leaving {
		return errDrained
	}
	check := time.NewTicker(250 * time.Millisecond)
	defer check.Stop()
	var expired <-chan time.Time
	if c.tokEnd != 0 {
		// No position to end on yet (or only "v1:", already sent): the stream just ends, and the client keeps
		// the id it had.
		t := time.NewTimer(max(time.Duration(c.tokEnd-monoNow()), 0))
		defer t.Stop()
		expired = t.C
	}
	for {
		wait := time.Hour
		if c.p.Heartbeat > 0 {
			wait = time.Duration(c.hbDue - monoNow())
		}
		hb := time.NewTimer(max(wait, 0))
		select {
		case <-t.Feed.Appeared():
			hb.Stop()
			if !absent {
				// Kafka may have said "absent" a moment before the topic appeared.
				markAbsent()
			}
			return nil
		case <-check.C:
			markAbsent()
			if err := c.flushBuf(); err != nil {
				hb.Stop()
				return err
			}
		case <-hb.C:
			if err := c.keepAliveIfDue(); err != nil {
				return err
			}
		case <-ctx.Done():
			hb.Stop()
			return ctx.Err()
		case <-c.draining:
			hb.Stop()
			return errDrained
		case <-expired:
			hb.Stop()
			return errTokenExpired
		}
		hb.Stop()
	}
}

// latest is where a from=latest stream starts: the ring's head, but never before the partitions' last stable
// offsets when the pod first assigned them. A stream that comes while the pod still reads its prefill (or
// that waited for the topic while nobody knew whether it existed) gets no history, and no gap.
func latest(t *Topic, head position.Vector) position.Vector {
	pos := head.Clone()
	if t.Feed == nil {
		return pos
	}
	start := t.Feed.LatestAtStart()
	for i := range start.Len() {
		e := start.At(i)
		if have, ok := pos.Offset(e.Partition); !ok || have < e.Offset {
			pos.Set(e.Partition, e.Offset)
		}
	}
	return pos
}

// await runs fn (a call to Kafka) while the stream keeps its client alive: a keep-alive every heartbeat until
// fn returns. fn's error is returned wrapped in errReplay.
func (c *conn) await(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := c.open(); err != nil {
		return err
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(fctx) }()
	var tick <-chan time.Time
	if c.p.Heartbeat > 0 {
		tk := time.NewTicker(c.p.Heartbeat)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%w: %w", errReplay, err)
			}
			return nil
		case <-tick:
			if err := c.keepAliveIfDue(); err != nil {
				return err
			}
		}
	}
}

// join returns the ring's head and the position that goes with it (only the stream's partitions, for a
// key-filtered stream).
func (c *conn) join(t *Topic) (uint64, position.Vector) {
	c0, id := t.Ring.Start(c.idBuf[:0])
	c.idBuf = id
	if len(id) == 0 {
		return c0, position.Vector{}
	}
	head, err := position.Parse(string(id))
	if err != nil {
		panic("stream: the ring holds a malformed head id: " + err.Error())
	}
	if c.keyParts != nil {
		head = head.Restrict(c.keyParts)
	}
	return c0, head
}

// checkPartitions rejects ids naming partitions the topic does not have. A partition this pod has not
// discovered yet (the seconds after partitions are added) is asked of Kafka: its watermarks know it.
func (c *conn) checkPartitions(ctx context.Context, v position.Vector, t *Topic) error {
	if t.Partitions == nil {
		return nil
	}
	parts := t.Partitions()
	var unknown []int32
	for i := range v.Len() {
		if p := v.At(i).Partition; !slices.Contains(parts, p) {
			unknown = append(unknown, p)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	if t.Watermarks == nil {
		return fmt.Errorf("the id names partition %d, which topic %s does not have", unknown[0], t.Name)
	}
	var wm map[int32]feed.Watermarks
	for try := range 2 {
		if try > 0 {
			// The Kafka client's metadata is up to a quarter of a second old: ask once more after that,
			// so a partition added a moment ago is not called unknown.
			if err := sleepCtx(ctx, unknownPartitionRetry); err != nil {
				return err
			}
		}
		if err := c.await(ctx, func(ctx context.Context) (err error) {
			wm, err = t.Watermarks(ctx, 0)
			return err
		}); err != nil {
			return err
		}
		if !slices.ContainsFunc(unknown, func(p int32) bool { _, ok := wm[p]; return !ok }) {
			return nil
		}
	}
	for _, p := range unknown {
		if _, ok := wm[p]; !ok {
			return fmt.Errorf("the id names partition %d, which topic %s does not have", p, t.Name)
		}
	}
	return nil
}

// nextOffset is the offset after off, the largest offset for the largest: an id may name any offset up to
// math.MaxInt64, and a resync must not report the one after it as a negative number.
func nextOffset(off int64) int64 {
	if off == math.MaxInt64 {
		return off
	}
	return off + 1
}

// sleepCtx waits d, or returns ctx's error when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// catchUp brings the stream from c.pos to the ring position c0 (whose position is head): records the ring
// still holds are read from it, the others from Kafka, positions Kafka no longer has (or never had) become
// a resync. It leaves c.cursor where the stream continues in the ring. resuming says c.pos came from the
// client, so that a gap in it is a loss to report rather than a start position.
func (c *conn) catchUp(ctx context.Context, t *Topic, p Params, c0 uint64, head position.Vector, resuming bool) error {
	var from []byte
	if resuming && p.Explain {
		from, _ = c.pos.AppendText(nil)
	}
	if t.Replay != nil && t.Watermarks != nil {
		// What the ring cannot serve will most likely be read from Kafka: start its first fetches now, so that
		// they overlap the watermark look-up (a round trip to Kafka when the cache is stale).
		t.Replay.Prefetch(ctx, t.Name, c.epoch, likelyReads(c.pos, head, t.Ring))
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
		if err := c.writeEvent("resumed", d); err != nil {
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
// connection that resumed does not keep tens of kilobytes for the rest of its life.
func (c *conn) releaseBuf() {
	if c.synced && !c.filtered() && cap(c.buf) > 1<<10 {
		c.buf = nil
	}
}

// replay reads ranges from Kafka into the stream, in record-timestamp order across partitions.
func (c *conn) replay(ctx context.Context, t *Topic, p Params, ranges []replay.Range, head position.Vector, resuming bool) error {
	if t.Replay == nil {
		return fmt.Errorf("%w: no replay reader", errReplay)
	}
	if err := c.flushBuf(); err != nil {
		return err
	}
	idle := c.keepAliveIfDue
	first := true
	err := t.Replay.Read(ctx, t.Name, c.epoch, ranges, p.Heartbeat, idle, func(rec *kgo.Record) error {
		c.pos.Set(rec.Partition, rec.Offset)
		if !p.keeps(rec.Key, func() string { return recordType(rec) }) {
			return nil
		}
		c.idBuf, _ = c.pos.AppendText(c.idBuf[:0])
		c.buf = feed.AppendFrame(c.buf, c.idBuf, rec, t.ValueFormat)
		c.frames++
		c.stats.Frames.Add(1)
		if len(c.buf) >= slowFlushBytes || first {
			// The first frame goes out at once: the client waited for it; the rest are gathered.
			first = false
			return c.flushBuf()
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
func (c *conn) writeResync(d ResyncData) error { return c.writeEvent("resync", d) }

// writeEvent writes a frame of the gateway's own, of type typ with d as JSON data, carrying the stream's
// current position.
func (c *conn) writeEvent(typ string, d any) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
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
	return err
}

// partitionsOf returns v's partitions, ascending.
func partitionsOf(v position.Vector) []int32 {
	out := make([]int32, 0, v.Len())
	for i := range v.Len() {
		out = append(out, v.At(i).Partition)
	}
	return out
}

// unionParts returns the partitions in a or b, ascending; a and b are ascending.
func unionParts(a, b []int32) []int32 {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// union returns the partitions of a and b, ascending.
func union(a, b position.Vector) []int32 {
	var out []int32
	for _, v := range []position.Vector{a, b} {
		for i := range v.Len() {
			out = append(out, v.At(i).Partition)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// setOrDrop sets p's offset in v, or removes p when off is -1 (nothing there).
func setOrDrop(v position.Vector, p int32, off int64) position.Vector {
	if off >= 0 {
		v.Set(p, off)
		return v
	}
	var keep []int32
	for i := range v.Len() {
		if q := v.At(i).Partition; q != p {
			keep = append(keep, q)
		}
	}
	return v.Restrict(keep)
}
