package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// Config configures a Feed.
type Config struct {
	// Topics are the topics to read. Required.
	Topics []string
	// RingBytes is the capacity of each topic's ring (bytes of memory it holds: frames, keys, entries), when
	// RingBudget is zero; TopicRingBytes overrides it per topic. Required without a budget.
	RingBytes int
	// RingBudget, when positive, is one capacity shared by all the topics' rings: the topics in
	// TopicRingBytes get their own size out of it, and the others share the rest by their traffic (frame bytes
	// per second, smoothed over RingHalfLife), none below RingFloor, rebalanced every RingRebalance. The
	// rings' capacities never add up to more than the budget. Zero means no budget.
	RingBudget int64
	// RingFloor is the smallest ring of a topic sharing RingBudget. Required with a budget.
	RingFloor int64
	// TopicRingBytes are fixed ring capacities of single topics: instead of RingBytes without a budget, out
	// of RingBudget with one. Default none.
	TopicRingBytes map[string]int64
	// RingRebalance is how often a RingBudget is divided again. Zero means 10 seconds.
	RingRebalance time.Duration
	// RingHalfLife is how fast the traffic a topic's share follows forgets the past: a topic whose frame bytes
	// per second change moves half way to its new share within it. Zero means RateHalfLife (a minute).
	RingHalfLife time.Duration
	// MetadataInterval is how often the feed looks for new topics and partitions and refreshes end offsets
	// for the lag metric. Zero means 10 seconds.
	MetadataInterval time.Duration
	// Prefill is how many of each partition's most recent records are read into the ring at start, so
	// that clients reconnecting right after a deploy are served from memory; the ring's byte bound still
	// applies. Zero means none.
	Prefill int64
	// ValueFormats are the topics' value formats, how values are written into frames (see ValueFormat). A
	// topic not in it, and every topic when it is nil, gets ValueAuto.
	ValueFormats map[string]ValueFormat
	// Checkpoints, when set, makes the ring's frame ids compact (v2): each names the newest checkpoint of
	// the topic's position that Kafka has acknowledged, plus the partitions that moved since (see
	// position.Compact). A frame whose position does not fit CompactMax bytes that way gets a v1 id. Nil
	// means v1 ids only.
	Checkpoints Checkpointer
	// CompactMax is the longest compact id a frame gets; a longer one is written as v1. Zero means
	// position.MaxCompactLen (1024): a compact id lists only the partitions that moved, each in fewer bytes
	// than v1 spends on it, so up to that length it is shorter than the v1 id of the same position; and a
	// fallback to a v1 id of hundreds of partitions when Kafka acknowledges checkpoints late would make the
	// frames that much bigger just when the machine is busy.
	CompactMax int
	// CheckpointAfter is the compact id length, in bytes, past which the feed starts a new checkpoint (when
	// none is being written). Zero means 32.
	CheckpointAfter int
	// Logger receives the feed's logs. Nil means slog.Default().
	Logger *slog.Logger
}

// Checkpointer stores checkpoints of a topic's position vector (checkpoint.Writer).
type Checkpointer interface {
	// Write starts writing a checkpoint of topic (Kafka id topicID) at v, which the caller does not change
	// afterwards; done is called once, without blocking, when Kafka acknowledged it (with where it is) or
	// the write failed.
	Write(topic string, topicID [16]byte, v position.Vector, done func(position.Ref, error))
}

// acked is a checkpoint Kafka has acknowledged: where it is, its vector, and the topic epoch it belongs to.
type acked struct {
	ref   position.Ref
	vec   position.Vector
	epoch uint64
}

// Feed reads the configured topics into their rings. Make it with New, then call Run.
type Feed struct {
	cfg    Config
	log    *slog.Logger
	kc     Cluster
	topics map[string]*Topic
	names  []string

	refreshed atomic.Bool // a metadata refresh has succeeded
	first     bool        // no refresh has succeeded yet; owned by the refresher goroutine
	balance   *balancer   // nil without a ring budget
	closeOnce sync.Once   // Close

	wmMu    sync.Mutex
	wmCache map[string]cachedWatermarks
	wmFly   map[string]*wmFlight // the watermark look-ups under way, per topic
}

// Watermarks are a partition's low and high watermarks: the oldest offset still stored and the offset the
// next record will get.
type Watermarks struct {
	Low, High int64
}

type cachedWatermarks struct {
	at time.Time
	wm map[int32]Watermarks
}

// Topic is one topic's state: its ring and what the feed knows of its partitions.
type Topic struct {
	name      string
	ring      *ring.Ring
	refreshed *atomic.Bool  // the feed's: a metadata refresh has succeeded
	gen       atomic.Uint64 // bumped when partitions are added, or the topic is created again, after it was first served
	epoch     atomic.Uint64 // bumped when the topic is deleted and created again
	appeared  chan struct{} // closed once the topic exists
	vf        ValueFormat   // how values are written into frames

	mu     sync.Mutex
	kid    [16]byte       // the topic's id in Kafka when its partitions were assigned
	exists bool           // partitions are assigned: streams can be served
	absent bool           // the last metadata refresh found no such topic in Kafka
	atEnd  map[int32]bool // partitions that existed at the feed's first refresh: they start at the end
	parts  map[int32]*partition
	latest position.Vector // where a from=latest stream started when the partitions were first assigned
	pos    position.Vector
	batch  ring.Batch
	id     []byte
	head   []byte // the v1 id of pos, for the ring's head, when frame ids are compact

	// Compact ids (nil cps: none). The newest acknowledged checkpoint is swapped in by the writer's callback;
	// cpBusy says one is being written; cpErrLog rate-limits the log of failed writes (under mu).
	cps        Checkpointer
	compactMax int
	cpAfter    int
	log        *slog.Logger
	cpAcked    atomic.Pointer[acked]
	cpBusy     atomic.Bool
	cpErrAt    atomic.Int64
	idCompact  atomic.Int64 // frames given a compact id
	idFallback atomic.Int64 // frames given a v1 id while compact ids are on

	published uint64        // frames published to the ring so far: the ring's head sequence (under mu)
	newestSeq atomic.Uint64 // the ring's head after the latest publish (see Newest)
	newestTS  atomic.Int64  // the timestamp of the latest publish's newest record, Unix milliseconds
}

type partition struct {
	start int64 // offset reading began at; -1 when reading from the partition's start
	ready int64 // offset up to which the partition must be read before the feed is ready; -1 for none
	seen  bool  // a fetch covered an offset of this partition; owned by the fetch loop (under Topic.mu)
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

// New makes a feed that connects with kafkaOpts (brokers, TLS, SASL). It does not touch the network.
func New(cfg Config, kafkaOpts ...kgo.Opt) (*Feed, error) {
	kc, err := NewKafkaCluster(kafkaOpts...)
	if err != nil {
		return nil, err
	}
	f, err := NewWith(cfg, kc)
	if err != nil {
		kc.Close()
	}
	return f, err
}

// NewWith makes a feed that reads kc, which it closes when Run returns.
func NewWith(cfg Config, kc Cluster) (*Feed, error) {
	if len(cfg.Topics) == 0 {
		return nil, errors.New("feed: no topics")
	}
	if cfg.MetadataInterval == 0 {
		cfg.MetadataInterval = 10 * time.Second
	}
	if cfg.RingRebalance == 0 {
		cfg.RingRebalance = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Feed{cfg: cfg, log: cfg.Logger, kc: kc, topics: make(map[string]*Topic), first: true, wmCache: map[string]cachedWatermarks{}, wmFly: map[string]*wmFlight{}}
	for _, name := range cfg.Topics {
		if !slices.Contains(f.names, name) {
			f.names = append(f.names, name)
		}
	}
	slices.Sort(f.names)
	caps, bal, err := ringCapacities(cfg, f.names)
	if err != nil {
		return nil, err
	}
	for i, name := range f.names {
		r, err := ring.New(int(caps[i]), 0)
		if err != nil {
			return nil, fmt.Errorf("feed: %w", err)
		}
		f.topics[name] = &Topic{
			name: name, ring: r, vf: cfg.ValueFormats[name], refreshed: &f.refreshed, appeared: make(chan struct{}),
			parts: make(map[int32]*partition), atEnd: map[int32]bool{},
			cps: cfg.Checkpoints, compactMax: cmp.Or(cfg.CompactMax, position.MaxCompactLen), cpAfter: cmp.Or(cfg.CheckpointAfter, 32),
			log: cfg.Logger,
		}
		if bal != nil {
			bal.rings = append(bal.rings, r)
		}
	}
	f.balance = bal
	return f, nil
}

// SetCheckpoints sets Config.Checkpoints, before Run.
func (f *Feed) SetCheckpoints(c Checkpointer) {
	f.cfg.Checkpoints = c
	for _, t := range f.topics {
		t.cps = c
	}
}

// Topic returns the named topic, or nil when the feed does not serve it.
func (f *Feed) Topic(name string) *Topic { return f.topics[name] }

// Topics returns the names of the topics the feed serves, sorted.
func (f *Feed) Topics() []string { return f.names }

// Run reads until ctx ends, then closes the cluster. It returns nil on a clean stop.
func (f *Feed) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { f.refreshLoop(ctx) })
	if f.balance != nil {
		wg.Go(func() { f.balance.loop(ctx, f.cfg.RingRebalance) })
	}
	f.fetchLoop(ctx)
	wg.Wait()
	f.Close()
	return nil
}

// Close closes the feed's Kafka client. Run does when it returns; a feed that never runs must be closed.
// Only the first call does anything.
func (f *Feed) Close() { f.closeOnce.Do(f.kc.Close) }

func (f *Feed) fetchLoop(ctx context.Context) {
	var lastErrLog time.Time
	byTopic := map[*Topic][]Fetched{}
	for {
		fs, err := f.kc.Poll(ctx)
		if err != nil || ctx.Err() != nil {
			return
		}
		for _, x := range fs {
			if x.Err != nil && !errors.Is(x.Err, context.Canceled) && time.Since(lastErrLog) >= 5*time.Second {
				lastErrLog = time.Now()
				f.log.Warn("kafka fetch error", "topic", x.Topic, "partition", x.Partition, "err", x.Err)
			}
			if t := f.topics[x.Topic]; t != nil {
				byTopic[t] = append(byTopic[t], x)
			}
		}
		for t, xs := range byTopic {
			t.publish(xs)
			clear(xs)
			byTopic[t] = xs[:0]
		}
	}
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
			t.batch.Add(AppendFrame(t.batch.Buf(), t.id, rec, t.vf), rec.Partition, rec.Offset, rec.Key)
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
}

// appendFrameID appends the id of a frame whose position is t.pos: v1 without checkpoints; otherwise
// compact against the newest acknowledged checkpoint of this epoch when it fits, v1 when not. A compact id
// never names a checkpoint Kafka has not acknowledged, so a crash leaves no id that points at nothing. A
// new checkpoint is started when the compact id grows past cpAfter or could not be used. The caller holds
// mu.
func (t *Topic) appendFrameID(dst []byte) []byte {
	if t.cps == nil {
		dst, _ = t.pos.AppendText(dst)
		return dst
	}
	if a := t.cpAcked.Load(); a != nil && a.epoch == t.epoch.Load() {
		if id, ok := position.AppendCompact(dst, a.ref, a.vec, t.pos, t.compactMax); ok {
			if len(id)-len(dst) > t.cpAfter {
				t.checkpoint()
			}
			t.idCompact.Add(1)
			return id
		}
	}
	t.checkpoint()
	t.idFallback.Add(1)
	dst, _ = t.pos.AppendText(dst)
	return dst
}

// checkpoint starts writing a checkpoint of t.pos unless one is being written, or the topic's Kafka id is
// not known yet. The caller holds mu.
func (t *Topic) checkpoint() {
	if t.kid == ([16]byte{}) || !t.cpBusy.CompareAndSwap(false, true) {
		return
	}
	vec, epoch := t.pos.Clone(), t.epoch.Load()
	t.cps.Write(t.name, t.kid, vec, func(ref position.Ref, err error) {
		if err == nil {
			t.cpAcked.Store(&acked{ref: ref, vec: vec, epoch: epoch})
		} else if now := time.Now().UnixNano(); now-t.cpErrAt.Load() > int64(10*time.Second) {
			t.cpErrAt.Store(now)
			t.log.Warn("checkpoint write failed; frames get v1 ids until one succeeds", "topic", t.name, "err", err)
		}
		t.cpBusy.Store(false)
	})
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

func (f *Feed) refreshLoop(ctx context.Context) {
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		missing, err := f.refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			f.log.Warn("kafka metadata refresh failed", "err", err)
			wait = min(max(2*wait, time.Second), f.cfg.MetadataInterval)
		case missing:
			// Streams of a configured topic that does not exist yet are open and waiting for it.
			wait = min(time.Second, f.cfg.MetadataInterval)
		default:
			wait = f.cfg.MetadataInterval
		}
	}
}

// refresh looks for new topics and partitions and assigns them, records end offsets for the lag metric, and
// trims the rings to the low watermarks. It reports whether a topic is still missing (or has partitions not
// assigned yet).
func (f *Feed) refresh(ctx context.Context) (missing bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, max(f.cfg.MetadataInterval, 10*time.Second))
	defer cancel()
	md, err := f.kc.Metadata(rctx, f.names)
	if err != nil {
		return false, err
	}
	var present []string
	for _, name := range f.names {
		t := f.topics[name]
		if _, ok := md[name]; ok {
			present = append(present, name)
			t.setAbsent(false)
			continue
		}
		missing = true
		switch {
		case t.Exists():
			f.log.Warn("topic no longer exists in kafka", "topic", name)
		case f.first:
			f.log.Warn("topic does not exist in kafka yet; it is read from its start once it does", "topic", name)
		}
		t.setAbsent(true)
	}
	var lso, starts map[string]map[int32]int64
	if len(present) > 0 {
		if lso, err = f.kc.ListOffsets(rctx, LastStable, present...); err != nil {
			return false, fmt.Errorf("list last stable offsets: %w", err)
		}
		if starts, err = f.kc.ListOffsets(rctx, LogStart, present...); err != nil {
			return false, fmt.Errorf("list start offsets: %w", err)
		}
	}
	add, again := map[string]map[int32]int64{}, map[string]map[int32]int64{}
	for _, name := range present {
		t := f.topics[name]
		if ps := t.recreated(md[name].ID, md[name].Partitions); ps != nil {
			f.log.Warn("topic was deleted and created again; reading it from its start", "topic", name)
			again[name] = ps
		}
		ps, pending := t.assign(md[name].Partitions, lso[name], starts[name], f.first, f.cfg.Prefill)
		missing = missing || pending
		if len(ps) > 0 {
			add[name] = ps
			f.log.Info("reading partitions", "topic", name, "partitions", len(ps), "from_start", !f.first)
		}
	}
	if len(again) > 0 {
		f.kc.Reassign(again)
	}
	if len(add) > 0 {
		f.kc.Assign(add)
	}
	for _, name := range present {
		f.topics[name].setID(md[name].ID)
	}
	f.first = false
	f.refreshed.Store(true)
	return missing, nil
}

// assign records the topic's partitions that are new to the feed and returns where to read them from: the
// partitions that existed at the feed's first refresh (first: this is it) start prefill records before the
// last stable offset (not before the low watermark in starts), even when their first try fails and they are
// assigned on a later refresh; the others (partitions added later, and every partition of a topic that
// appeared later) start at their log start, so no record in them is missed. It also trims the ring to the
// low watermarks. pending reports partitions that could not be assigned yet.
func (t *Topic) assign(parts []int32, lso, starts map[int32]int64, first bool, prefill int64) (add map[int32]int64, pending bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if first {
		for _, p := range parts {
			t.atEnd[p] = true
		}
	}
	served := len(t.parts) > 0
	added := false
	add = map[int32]int64{}
	for _, p := range parts {
		lo, ok := lso[p]
		if low, ok := starts[p]; ok && low > 0 {
			t.ring.Trim(p, low)
		}
		if ps := t.parts[p]; ps != nil {
			if ok && lo >= 0 {
				ps.end.Store(lo)
			}
			continue
		}
		ps := &partition{start: -1, ready: -1}
		ps.next.Store(-1)
		if t.atEnd[p] {
			if !ok || lo < 0 {
				pending = true
				continue // try again on the next refresh, still at the end
			}
			start := lo
			if so, ok := starts[p]; ok && prefill > 0 {
				start = max(so, lo-prefill)
			}
			ps.start, ps.ready = start, lo
			if lo > 0 {
				t.latest.Set(p, lo-1)
			}
			if start == lo {
				// Nothing to read back: the ring holds the partition from here on. (With records to read
				// back, the first fetch tells whether reading really began at start.)
				t.ring.SetLow(p, start)
				ps.seen = true
			}
			ps.next.Store(start)
			ps.end.Store(lo)
			if start > 0 {
				t.pos.Set(p, start-1)
			}
			add[p] = start
		} else {
			if ok && lo >= 0 {
				ps.end.Store(lo)
			}
			add[p] = AtLogStart
			added = added || served
		}
		t.parts[p] = ps
	}
	if len(add) > 0 {
		t.id, _ = t.pos.AppendText(t.id[:0])
		var empty ring.Batch
		t.ring.Publish(&empty, t.id)
	}
	if added {
		t.gen.Add(1)
	}
	// Streams are served once the ring carries the position of at least one assigned partition.
	if !t.exists && len(t.parts) > 0 {
		t.exists = true
		close(t.appeared)
	}
	return add, pending
}

// recreated checks the topic's id against the one its partitions were read under. When it changed (the topic
// was deleted and created again), every partition starts again from its log start, the ring forgets them,
// the position vector drops them (the new topic's records enter it as they come), and the generation moves
// so that every stream re-joins: a stream whose position is past the new topic's end gets an ahead resync
// instead of skipping the new records as ones it already has. Partitions the new topic does not have (it may
// have fewer) are dropped: the feed stops reading them and ids naming them become invalid. It returns the
// partitions to read again.
func (t *Topic) recreated(id [16]byte, parts []int32) map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kid == ([16]byte{}) || id == ([16]byte{}) || id == t.kid || len(t.parts) == 0 {
		return nil
	}
	again := map[int32]int64{}
	for p, ps := range t.parts {
		t.ring.Forget(p)
		if !slices.Contains(parts, p) {
			delete(t.parts, p)
			delete(t.atEnd, p)
			continue
		}
		again[p] = AtLogStart
		ps.start, ps.ready, ps.seen, ps.lowSeen = -1, -1, false, 0
		ps.next.Store(-1)
		ps.caught.Store(false)
	}
	t.pos = t.pos.Restrict(nil)
	t.kid = id                   // checkpoints from now on are of the new topic (their epoch is the new one too)
	t.latest = position.Vector{} // the new topic's records are all new to every stream
	t.id, _ = t.pos.AppendText(t.id[:0])
	t.ring.Touch(t.id) // the new head first: a stream that sees the new epoch must not join the old head
	t.epoch.Add(1)
	return again
}

func (t *Topic) setID(id [16]byte) {
	t.mu.Lock()
	t.kid = id
	if t.cps != nil && t.exists && t.cpAcked.Load() == nil {
		// A first checkpoint as soon as the topic's id is known, so that the first records already have one
		// to refer to.
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

// Ready reports whether the feed serves every topic: each exists, every partition is assigned, and each
// partition has been read up to where reading started. When it is not ready, the reason says why.
func (f *Feed) Ready() (bool, string) {
	if !f.refreshed.Load() {
		return false, "kafka metadata not loaded yet"
	}
	for _, name := range f.names {
		t := f.topics[name]
		t.mu.Lock()
		exists, n := t.exists, len(t.parts)
		behind := int32(-1)
		pending := false
		for p := range t.atEnd {
			pending = pending || t.parts[p] == nil
		}
		for p, ps := range t.parts {
			// Caught up: read up to the last stable offset listed when reading began (next counts
			// transaction markers, so an aborted tail or a run of commit markers is passed too), or a fetch
			// said the log holds nothing stable beyond next.
			if ps.ready > 0 && ps.next.Load() < ps.ready && !ps.caught.Load() {
				behind = p
			}
		}
		t.mu.Unlock()
		switch {
		case !exists:
			return false, "topic " + name + " does not exist in kafka"
		case n == 0 || pending:
			return false, "topic " + name + " has partitions not assigned yet"
		case behind >= 0:
			return false, fmt.Sprintf("topic %s partition %d not caught up", name, behind)
		}
	}
	return true, ""
}

// Lag calls fn with each partition's consumer lag: offsets between the next one to read and the last stable
// offset last seen by a fetch or a metadata refresh.
func (f *Feed) Lag(fn func(topic string, partition int32, lag int64)) {
	for _, name := range f.names {
		t := f.topics[name]
		t.mu.Lock()
		type pl struct {
			p   int32
			lag int64
		}
		lags := make([]pl, 0, len(t.parts))
		for p, ps := range t.parts {
			next, end := ps.next.Load(), ps.end.Load()
			lag := int64(0)
			if next < 0 {
				lag = end // read from the start: everything up to end is still to come
			} else if end > next {
				lag = end - next
			}
			lags = append(lags, pl{p, lag})
		}
		t.mu.Unlock()
		for _, x := range lags {
			fn(name, x.p, x.lag)
		}
	}
}

// Progress calls fn with each partition's count of records read into the ring since the gateway started, and
// the offset of the last of them (-1 before the first).
func (f *Feed) Progress(fn func(topic string, partition int32, records, fed int64)) {
	type pp struct {
		p            int32
		records, fed int64
	}
	var ps []pp
	for _, name := range f.names {
		t := f.topics[name]
		ps = ps[:0]
		t.mu.Lock()
		for p, st := range t.parts {
			ps = append(ps, pp{p, st.records.Load(), st.fed.Load() - 1})
		}
		t.mu.Unlock()
		for _, x := range ps {
			fn(name, x.p, x.records, x.fed)
		}
	}
}

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

// Watermarks returns the low and high watermarks of every partition of topic. Answers are cached for
// maxAge, so that a reconnect storm asks Kafka once rather than once per connection. Every answer from Kafka
// also trims the topic's ring to the low watermarks: the ring never serves what Kafka no longer has.
func (f *Feed) Watermarks(ctx context.Context, topic string, maxAge time.Duration) (map[int32]Watermarks, error) {
	asked := time.Now()
	for {
		f.wmMu.Lock()
		if c, ok := f.wmCache[topic]; ok && asked.Sub(c.at) < maxAge {
			f.wmMu.Unlock()
			return c.wm, nil
		}
		// One look-up at a time per topic: a reconnect storm that finds the cache stale asks Kafka once. A
		// look-up that began before this call is joined only when its answer is young enough for maxAge (a
		// caller asking for a fresh answer, maxAge 0, never takes an older one).
		fl := f.wmFly[topic]
		if fl == nil {
			fl = &wmFlight{began: time.Now(), done: make(chan struct{})}
			f.wmFly[topic] = fl
			go f.lookUpWatermarks(context.WithoutCancel(ctx), topic, fl)
		}
		// A look-up too old for this caller is waited for, then the cache (or a new look-up) is tried again.
		tooOld := fl.began.Before(asked) && asked.Sub(fl.began) >= maxAge
		f.wmMu.Unlock()
		select {
		case <-fl.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if tooOld {
			continue
		}
		if fl.err != nil {
			return nil, fl.err
		}
		return fl.wm, nil
	}
}

// wmFlight is a watermark look-up under way; wm and err are written before done is closed.
type wmFlight struct {
	began time.Time
	done  chan struct{}
	wm    map[int32]Watermarks
	err   error
}

// lookUpWatermarks asks Kafka for topic's watermarks, caches them, trims the ring to the low ones, and lands
// fl. It runs on its own goroutine, bounded in time, so that no caller's leaving fails the others.
func (f *Feed) lookUpWatermarks(ctx context.Context, topic string, fl *wmFlight) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fl.wm, fl.err = f.listWatermarks(ctx, topic)
	f.wmMu.Lock()
	if fl.err == nil {
		f.wmCache[topic] = cachedWatermarks{at: fl.began, wm: fl.wm}
	}
	delete(f.wmFly, topic)
	f.wmMu.Unlock()
	close(fl.done)
}

// listWatermarks asks Kafka for topic's low and high watermarks, and trims the ring to the low ones.
func (f *Feed) listWatermarks(ctx context.Context, topic string) (map[int32]Watermarks, error) {
	starts, err := f.kc.ListOffsets(ctx, LogStart, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := f.kc.ListOffsets(ctx, LogEnd, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	wm := map[int32]Watermarks{}
	for p, o := range starts[topic] {
		wm[p] = Watermarks{Low: o, High: -1}
	}
	for p, o := range ends[topic] {
		w, ok := wm[p]
		if !ok {
			w.Low = -1
		}
		w.High = o
		wm[p] = w
	}
	if t := f.topics[topic]; t != nil {
		for p, w := range wm {
			if w.Low > 0 {
				t.ring.Trim(p, w.Low)
			}
		}
	}
	return wm, nil
}

// OffsetsAfter returns, per partition of topic, the offset of the first record with a timestamp at or after
// t, or -1 when there is none yet.
func (f *Feed) OffsetsAfter(ctx context.Context, topic string, t time.Time) (map[int32]int64, error) {
	return f.kc.OffsetsAfter(ctx, topic, t)
}
