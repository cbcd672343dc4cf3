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
	// KeyIndex are the topics whose rings keep a key index (ring.EnableKeyIndex) for snapshots, with its
	// bound in bytes. Such a topic is read from its log start at the first refresh, whatever Prefill says, so
	// that the index holds every retained record. Default none.
	KeyIndex map[string]int64
	// Formats are the topics' formats, how values and keys are written into frames (see Format). A topic not
	// in it, and every topic when it is nil, gets Plain(ValueAuto).
	Formats map[string]*Format
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
	// CheckpointAfter is the compact id length, in bytes, past which the feed starts a new checkpoint. Zero
	// means 32.
	CheckpointAfter int
	// CheckpointsInFlight bounds the checkpoints of a topic being written at once. Zero means 4; 1 waits for
	// each acknowledgement before the next write.
	CheckpointsInFlight int
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

// Feed reads the configured topics into their rings. Make it with New, then call Run.
type Feed struct {
	cfg    Config
	log    *slog.Logger
	kc     Cluster
	topics map[string]*Topic
	names  []string
	// stalls is where each partition's reading was last seen moving (checkStalls); the refresh goroutine's.
	stalls map[*partition]stall

	refreshed atomic.Bool // a metadata refresh has succeeded
	ready     atomic.Bool // Ready has found every topic ready once: it stays so (see Ready)
	first     bool        // no refresh has succeeded yet; owned by the refresher goroutine
	// awaited is how long the fetch loop has waited for schema lookups before the feed was ready (see
	// awaitSchemas); the fetch loop's.
	awaited   time.Duration
	balance   *balancer // nil without a ring budget
	closeOnce sync.Once // Close

	wmMu    sync.Mutex
	wmCache map[string]cachedWatermarks
	wmFly   map[string]*wmFlight // the watermark look-ups under way, per topic
	wmDone  bool                 // Run ended: no look-up starts any more
	lookups sync.WaitGroup       // the look-ups' goroutines, joined by Run
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
			name: name, ring: r, format: cmp.Or(cfg.Formats[name], Plain(ValueAuto)), refreshed: &f.refreshed, appeared: make(chan struct{}),
			parts: make(map[int32]*partition), atEnd: map[int32]bool{},
			cps: cfg.Checkpoints, compactMax: cmp.Or(cfg.CompactMax, position.MaxCompactLen), cpAfter: cmp.Or(cfg.CheckpointAfter, 32),
			cpMaxInFlight: int32(cmp.Or(cfg.CheckpointsInFlight, defaultCheckpointsInFlight)), //nolint:gosec // a small count
			log:           cfg.Logger,
		}
		if n := cfg.KeyIndex[name]; n > 0 {
			r.EnableKeyIndex(int(n))
			f.topics[name].fromStart = true
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
	f.stopLookups()
	f.Close()
	return nil
}

// stopLookups ends the watermark look-ups under way and waits for their goroutines; none starts after it.
func (f *Feed) stopLookups() {
	f.wmMu.Lock()
	f.wmDone = true
	for _, fl := range f.wmFly {
		fl.cancel()
	}
	f.wmMu.Unlock()
	f.lookups.Wait()
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
		if ready, _ := f.Ready(); !ready {
			start := time.Now()
			f.awaitSchemas(byTopic)
			f.awaited += time.Since(start)
		}
		for t, xs := range byTopic {
			t.publish(xs)
			clear(xs)
			byTopic[t] = xs[:0]
		}
		if rl, ok := f.kc.(replicaLoser); ok && rl.Following() {
			f.follow(rl)
		}
	}
}

// awaitPolls bounds how long the feed waits for schema lookups before it is ready: that many lookup
// timeouts, in all.
const awaitPolls = 3

// awaitSchemas waits, up to the schema lookup timeout in all, for the lookups of the schemas of a poll's
// values, before any topic's lock is taken. Only until the feed is first ready: a pod reading its prefill
// serves no stream yet, and the records it puts into its ring are the ones clients resume from right after
// a deploy, which should decode. Once ready the feed never waits: a value whose schema is not known yet is
// framed undecodable (schema.Pending) and its lookup runs in the background. A feed that stays unready (a
// topic that does not exist) stops waiting once it has waited awaitPolls lookup timeouts in all.
func (f *Feed) awaitSchemas(byTopic map[*Topic][]Fetched) {
	var deadline time.Time
	for t, xs := range byTopic {
		k := t.format.Value.Schema()
		if k == 0 || t.format.Schemas == nil {
			continue
		}
		if deadline.IsZero() {
			if f.awaited >= awaitPolls*t.format.Schemas.Timeout() {
				return
			}
			deadline = time.Now().Add(t.format.Schemas.Timeout())
		}
		for _, x := range xs {
			for _, rec := range x.Records {
				if rec.Value != nil {
					t.format.Schemas.Await(k, rec.Value, deadline)
				}
			}
		}
	}
}

// Lag calls fn with each partition's consumer lag: offsets between the next one to read and the last stable
// offset last seen by a fetch or a metadata refresh. Like Ready it takes no lock (see partsView), so a scrape
// never waits for a poll being framed.
func (f *Feed) Lag(fn func(topic string, partition int32, lag int64)) {
	for _, name := range f.names {
		v := f.topics[name].view.Load()
		if v == nil {
			continue
		}
		for _, p := range v.parts {
			next, end := p.st.next.Load(), p.st.end.Load()
			lag := int64(0)
			if next < 0 {
				lag = end // read from the start: everything up to end is still to come
			} else if end > next {
				lag = end - next
			}
			fn(name, p.id, lag)
		}
	}
}

// Progress calls fn with each partition's count of records read into the ring since the gateway started, and
// the offset of the last of them (-1 before the first). It takes no lock either.
func (f *Feed) Progress(fn func(topic string, partition int32, records, fed int64)) {
	for _, name := range f.names {
		v := f.topics[name].view.Load()
		if v == nil {
			continue
		}
		for _, p := range v.parts {
			fn(name, p.id, p.st.records.Load(), p.st.fed.Load()-1)
		}
	}
}
