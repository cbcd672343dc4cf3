package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// Config configures a Feed.
type Config struct {
	// Topics are the topics to read. Required.
	Topics []string
	// RingBytes bounds each topic's ring, in bytes of frames. Required.
	RingBytes int
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
	// Logger receives the feed's logs. Nil means slog.Default().
	Logger *slog.Logger
}

// Feed reads the configured topics into their rings. Make it with New, then call Run.
type Feed struct {
	cfg    Config
	log    *slog.Logger
	cl     *kgo.Client
	adm    *kadm.Client
	topics map[string]*Topic
	names  []string

	refreshed atomic.Bool // a metadata refresh has succeeded
	first     bool        // no refresh has succeeded yet; owned by the refresher goroutine

	wmMu    sync.Mutex
	wmCache map[string]cachedWatermarks
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
	name string
	ring *ring.Ring
	vf   ValueFormat

	mu     sync.Mutex
	exists bool
	parts  map[int32]*partition
	pos    position.Vector
	batch  ring.Batch
	id     []byte
}

type partition struct {
	start int64        // offset reading began at; -1 when reading from the partition's start
	ready int64        // offset up to which the partition must be read before the feed is ready
	next  atomic.Int64 // offset after the last record published; -1 until the first one
	end   atomic.Int64 // latest last-stable offset seen
}

// New makes a feed that connects with kafkaOpts (brokers, TLS, SASL). It does not touch the network.
func New(cfg Config, kafkaOpts ...kgo.Opt) (*Feed, error) {
	if len(cfg.Topics) == 0 {
		return nil, errors.New("feed: no topics")
	}
	if cfg.RingBytes <= 0 {
		return nil, fmt.Errorf("feed: ring bytes must be positive, got %d", cfg.RingBytes)
	}
	if cfg.MetadataInterval == 0 {
		cfg.MetadataInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Feed{cfg: cfg, log: cfg.Logger, topics: make(map[string]*Topic), first: true, wmCache: map[string]cachedWatermarks{}}
	for _, name := range cfg.Topics {
		if _, dup := f.topics[name]; dup {
			continue
		}
		r, err := ring.New(cfg.RingBytes, 0)
		if err != nil {
			return nil, fmt.Errorf("feed: %w", err)
		}
		f.topics[name] = &Topic{name: name, ring: r, vf: cfg.ValueFormats[name], parts: make(map[int32]*partition)}
		f.names = append(f.names, name)
	}
	slices.Sort(f.names)
	opts := append(slices.Clone(kafkaOpts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("feed: kafka client: %w", err)
	}
	f.cl = cl
	f.adm = kadm.NewClient(cl)
	return f, nil
}

// Topic returns the named topic, or nil when the feed does not serve it.
func (f *Feed) Topic(name string) *Topic { return f.topics[name] }

// Topics returns the names of the topics the feed serves, sorted.
func (f *Feed) Topics() []string { return f.names }

// Run reads until ctx ends, then closes the Kafka client. It returns nil on a clean stop.
func (f *Feed) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { f.refreshLoop(ctx) })
	f.fetchLoop(ctx)
	wg.Wait()
	f.cl.Close()
	return nil
}

func (f *Feed) fetchLoop(ctx context.Context) {
	var lastErrLog time.Time
	for {
		fs := f.cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) || time.Since(lastErrLog) < 5*time.Second {
				return
			}
			lastErrLog = time.Now()
			f.log.Warn("kafka fetch error", "topic", topic, "partition", p, "err", err)
		})
		fs.EachTopic(func(ft kgo.FetchTopic) {
			if t := f.topics[ft.Topic]; t != nil {
				t.publish(ft)
			}
		})
	}
}

// publish frames a fetch's records and publishes them in one batch.
func (t *Topic) publish(ft kgo.FetchTopic) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.batch.Reset()
	for _, fp := range ft.Partitions {
		ps := t.parts[fp.Partition]
		if ps == nil || fp.Err != nil {
			continue
		}
		for _, rec := range fp.Records {
			t.pos.Set(rec.Partition, rec.Offset)
			t.id, _ = t.pos.AppendText(t.id[:0])
			t.batch.Add(AppendFrame(t.batch.Buf(), t.id, rec, t.vf), rec.Partition, rec.Offset, rec.Key)
		}
		if n := len(fp.Records); n > 0 {
			ps.next.Store(fp.Records[n-1].Offset + 1)
		}
		if fp.LastStableOffset >= 0 {
			ps.end.Store(fp.LastStableOffset)
		}
	}
	if t.batch.Len() > 0 {
		t.ring.Publish(&t.batch, t.id)
	}
}

func (f *Feed) refreshLoop(ctx context.Context) {
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := f.refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			f.log.Warn("kafka metadata refresh failed", "err", err)
			wait = min(max(2*wait, time.Second), f.cfg.MetadataInterval)
		default:
			wait = f.cfg.MetadataInterval
		}
	}
}

// refresh looks for new topics and partitions and assigns them, and records end offsets for the lag metric.
func (f *Feed) refresh(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, max(f.cfg.MetadataInterval, 10*time.Second))
	defer cancel()
	md, err := f.adm.Metadata(rctx, f.names...)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var present []string
	for _, name := range f.names {
		td, ok := md.Topics[name]
		switch {
		case ok && td.Err == nil && len(td.Partitions) > 0:
			present = append(present, name)
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			if f.topics[name].Exists() {
				f.log.Warn("topic no longer exists in kafka", "topic", name)
			} else if f.first {
				f.log.Warn("topic does not exist in kafka yet; it is read from its start once it does", "topic", name)
			}
		default:
			return fmt.Errorf("metadata of topic %s: %w", name, td.Err)
		}
	}
	var ends, starts kadm.ListedOffsets
	if len(present) > 0 {
		if ends, err = f.adm.ListCommittedOffsets(rctx, present...); err != nil {
			return fmt.Errorf("list end offsets: %w", err)
		}
		if f.first && f.cfg.Prefill > 0 {
			if starts, err = f.adm.ListStartOffsets(rctx, present...); err != nil {
				return fmt.Errorf("list start offsets: %w", err)
			}
		}
	}
	add := map[string]map[int32]kgo.Offset{}
	for _, name := range present {
		t := f.topics[name]
		td := md.Topics[name]
		if ps := t.assign(td, ends, starts, f.first, f.cfg.Prefill); len(ps) > 0 {
			add[name] = ps
			f.log.Info("reading partitions", "topic", name, "partitions", len(ps), "from_start", !f.first)
		}
	}
	f.cl.AddConsumePartitions(add)
	f.first = false
	f.refreshed.Store(true)
	return nil
}

// assign records the topic's partitions that are new to the feed and returns where to read them from: on the
// feed's first refresh, prefill records before the last stable offset (not before the low watermark in
// starts); afterwards, at their start.
func (t *Topic) assign(td kadm.TopicDetail, ends, starts kadm.ListedOffsets, atEnd bool, prefill int64) map[int32]kgo.Offset {
	t.mu.Lock()
	defer t.mu.Unlock()
	wasNew := !t.exists
	add := map[int32]kgo.Offset{}
	for _, pd := range td.Partitions {
		lo, ok := ends.Lookup(td.Topic, pd.Partition)
		if ps := t.parts[pd.Partition]; ps != nil {
			if ok && lo.Err == nil {
				ps.end.Store(lo.Offset)
			}
			continue
		}
		ps := &partition{start: -1, ready: -1}
		ps.next.Store(-1)
		switch {
		case atEnd && wasNew:
			if !ok || lo.Err != nil || lo.Offset < 0 {
				continue // try again on the next refresh
			}
			start := lo.Offset
			if so, ok := starts.Lookup(td.Topic, pd.Partition); ok && so.Err == nil && prefill > 0 {
				start = max(so.Offset, lo.Offset-prefill)
			}
			ps.start, ps.ready = start, lo.Offset
			ps.next.Store(start)
			ps.end.Store(lo.Offset)
			if start > 0 {
				t.pos.Set(pd.Partition, start-1)
			}
			t.ring.SetLow(pd.Partition, start)
			add[pd.Partition] = kgo.NewOffset().At(start)
		default:
			if ok && lo.Err == nil {
				ps.end.Store(lo.Offset)
			}
			add[pd.Partition] = kgo.NewOffset().AtStart()
		}
		t.parts[pd.Partition] = ps
	}
	if len(add) > 0 {
		t.id, _ = t.pos.AppendText(t.id[:0])
		var empty ring.Batch
		t.ring.Publish(&empty, t.id)
	}
	// Streams are served once the ring carries the position of at least one assigned partition.
	t.exists = len(t.parts) > 0
	return add
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Ring returns the topic's ring.
func (t *Topic) Ring() *ring.Ring { return t.ring }

// Exists reports whether the topic has been found in Kafka.
func (t *Topic) Exists() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exists
}

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
		for p, ps := range t.parts {
			// Within one offset: the record before the start position may be a transaction marker, which
			// is never delivered.
			if ps.ready > 0 && ps.next.Load() < ps.ready-1 {
				behind = p
			}
		}
		t.mu.Unlock()
		switch {
		case !exists:
			return false, "topic " + name + " does not exist in kafka"
		case n == 0:
			return false, "topic " + name + " has no partitions assigned yet"
		case behind >= 0:
			return false, fmt.Sprintf("topic %s partition %d not caught up", name, behind)
		}
	}
	return true, ""
}

// Lag calls fn with each partition's consumer lag: records between the last one published and the last
// stable offset last seen by a fetch or a metadata refresh.
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
// maxAge, so that a reconnect storm asks Kafka once rather than once per connection.
func (f *Feed) Watermarks(ctx context.Context, topic string, maxAge time.Duration) (map[int32]Watermarks, error) {
	f.wmMu.Lock()
	c, ok := f.wmCache[topic]
	f.wmMu.Unlock()
	if ok && time.Since(c.at) < maxAge {
		return c.wm, nil
	}
	starts, err := f.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := f.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	wm := map[int32]Watermarks{}
	starts.Each(func(o kadm.ListedOffset) { wm[o.Partition] = Watermarks{Low: o.Offset, High: -1} })
	ends.Each(func(o kadm.ListedOffset) {
		w := wm[o.Partition]
		w.High = o.Offset
		wm[o.Partition] = w
	})
	f.wmMu.Lock()
	f.wmCache[topic] = cachedWatermarks{at: time.Now(), wm: wm}
	f.wmMu.Unlock()
	return wm, nil
}

// OffsetsAfter returns, per partition of topic, the offset of the first record with a timestamp at or after
// t, or -1 when there is none yet.
func (f *Feed) OffsetsAfter(ctx context.Context, topic string, t time.Time) (map[int32]int64, error) {
	los, err := f.adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
	if err == nil {
		err = los.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s after %v: %w", topic, t, err)
	}
	out := map[int32]int64{}
	los.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}
