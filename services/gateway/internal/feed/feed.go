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
}

// Topic is one topic's state: its ring and what the feed knows of its partitions.
type Topic struct {
	name string
	ring *ring.Ring

	mu     sync.Mutex
	exists bool
	parts  map[int32]*partition
	pos    position.Vector
	batch  ring.Batch
	id     []byte
}

type partition struct {
	start int64        // offset reading began at; -1 when reading from the partition's start
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
	f := &Feed{cfg: cfg, log: cfg.Logger, topics: make(map[string]*Topic), first: true}
	for _, name := range cfg.Topics {
		if _, dup := f.topics[name]; dup {
			continue
		}
		r, err := ring.New(cfg.RingBytes, 0)
		if err != nil {
			return nil, fmt.Errorf("feed: %w", err)
		}
		f.topics[name] = &Topic{name: name, ring: r, parts: make(map[int32]*partition)}
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
			t.batch.Add(AppendFrame(t.batch.Buf(), t.id, rec), rec.Partition, rec.Offset)
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
	var ends kadm.ListedOffsets
	if len(present) > 0 {
		if ends, err = f.adm.ListCommittedOffsets(rctx, present...); err != nil {
			return fmt.Errorf("list end offsets: %w", err)
		}
	}
	add := map[string]map[int32]kgo.Offset{}
	for _, name := range present {
		t := f.topics[name]
		td := md.Topics[name]
		if ps := t.assign(td, ends, f.first); len(ps) > 0 {
			add[name] = ps
			f.log.Info("reading partitions", "topic", name, "partitions", len(ps), "from_start", !f.first)
		}
	}
	f.cl.AddConsumePartitions(add)
	f.first = false
	f.refreshed.Store(true)
	return nil
}

// assign records the topic's partitions that are new to the feed and returns where to read them from: at the
// last stable offset on the feed's first refresh, at their start afterwards.
func (t *Topic) assign(td kadm.TopicDetail, ends kadm.ListedOffsets, atEnd bool) map[int32]kgo.Offset {
	t.mu.Lock()
	defer t.mu.Unlock()
	wasNew := !t.exists
	t.exists = true
	add := map[int32]kgo.Offset{}
	for _, pd := range td.Partitions {
		lo, ok := ends.Lookup(td.Topic, pd.Partition)
		if ps := t.parts[pd.Partition]; ps != nil {
			if ok && lo.Err == nil {
				ps.end.Store(lo.Offset)
			}
			continue
		}
		ps := &partition{start: -1}
		ps.next.Store(-1)
		switch {
		case atEnd && wasNew:
			if !ok || lo.Err != nil || lo.Offset < 0 {
				continue // try again on the next refresh
			}
			ps.start = lo.Offset
			ps.next.Store(lo.Offset)
			ps.end.Store(lo.Offset)
			if lo.Offset > 0 {
				t.pos.Set(pd.Partition, lo.Offset-1)
			}
			t.ring.SetLow(pd.Partition, lo.Offset)
			add[pd.Partition] = kgo.NewOffset().At(lo.Offset)
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
			if ps.start >= 0 && ps.next.Load() < ps.start {
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
