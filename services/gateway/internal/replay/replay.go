package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Range asks for the records of one partition after offset After (-1: from the partition's start) up to and
// including offset Upto.
type Range struct {
	Partition int32
	After     int64
	Upto      int64
}

// OutOfRangeError is returned by Read when a range starts below the partition's low watermark: retention or
// DeleteRecords removed records the caller asked for.
type OutOfRangeError struct {
	Partition int32
	Offset    int64
}

// Error says which partition and offset are gone.
func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("replay: partition %d offset %d is below the low watermark", e.Partition, e.Offset)
}

// Config configures a Pool.
type Config struct {
	// Readers bounds the replay readers that run at once. Zero means 4.
	Readers int
	// BlockSize is how many offsets of a partition one cached block covers. Zero means 1024.
	BlockSize int64
	// CacheBlocks bounds the blocks of recently replayed records kept for other connections resuming
	// nearby. Zero means 256.
	CacheBlocks int
	// CacheTTL is how long a block stays cached; it bounds how long a deleted and recreated topic can be
	// answered from blocks of its former self. Zero means one minute.
	CacheTTL time.Duration
	// Idle is how long a read waits for a partition's next record before it fails. A range always ends on a
	// record the gateway has read (or the read reaches a record after it), so silence means the broker is
	// not delivering, and ending the range there would hand on a block with records missing. Zero means 5s.
	Idle time.Duration
}

// Stats are a pool's counters.
type Stats struct {
	InUse     atomic.Int64 // readers running now
	Waiting   atomic.Int64 // connections waiting for a reader
	Reads     atomic.Int64 // Kafka reads started (one per block fetched)
	Records   atomic.Int64 // records delivered from replays, from Kafka or the block cache
	Nanos     atomic.Int64 // total time spent reading from Kafka
	CacheHits atomic.Int64 // blocks served from the cache or from another connection's read
}

// Pool runs replay reads against one cluster, and shares what they read: records are fetched in blocks of
// Config.BlockSize offsets, kept in an LRU cache, and a block that one connection is fetching is waited
// for, not fetched again, by the others. A reconnect storm of clients at nearby positions therefore reads
// each block from Kafka once.
type Pool struct {
	cfg   Config
	opts  []kgo.Opt
	slots chan struct{}
	// Stats are the pool's counters, read by metrics.
	Stats Stats

	cache   *expirable.LRU[blockKey, *block]
	mu      sync.Mutex
	flights map[blockKey]*flight
}

// NewPool returns a pool whose readers connect with kafkaOpts.
func NewPool(cfg Config, kafkaOpts ...kgo.Opt) *Pool {
	if cfg.Readers <= 0 {
		cfg.Readers = 4
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 5 * time.Second
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 1024
	}
	if cfg.CacheBlocks <= 0 {
		cfg.CacheBlocks = 256
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = time.Minute
	}
	cache := expirable.NewLRU[blockKey, *block](cfg.CacheBlocks, nil, cfg.CacheTTL)
	return &Pool{
		cfg: cfg, opts: slices.Clone(kafkaOpts), slots: make(chan struct{}, cfg.Readers),
		cache: cache, flights: map[blockKey]*flight{},
	}
}

// Acquire waits for a free reader, calling idle every interval while it waits (a connection writes its
// heartbeat there; an error from idle ends the wait). The returned release must be called once.
func (p *Pool) Acquire(ctx context.Context, interval time.Duration, idle func() error) (release func(), err error) {
	select {
	case p.slots <- struct{}{}:
	default:
		p.Stats.Waiting.Add(1)
		defer p.Stats.Waiting.Add(-1)
		var tick <-chan time.Time
		if interval > 0 && idle != nil {
			t := time.NewTicker(interval)
			defer t.Stop()
			tick = t.C
		}
	wait:
		for {
			select {
			case p.slots <- struct{}{}:
				break wait
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-tick:
				if err := idle(); err != nil {
					return nil, err
				}
			}
		}
	}
	p.Stats.InUse.Add(1)
	return func() {
		p.Stats.InUse.Add(-1)
		<-p.slots
	}, nil
}

// readRange reads ranges of topic with a new seek-based reader and calls fn with each record, across
// partitions in record-timestamp order (ties by partition), within a partition in offset order. A partition
// is done when a record at or after its Upto offset was read: an Upto that holds no record (a transaction
// marker, an aborted or compacted record, the end of a block) is passed by the next record, which the
// reader fetches on. No record for Config.Idle is an *IdleError. The caller must hold a reader from
// Acquire. An error from fn stops the read and is returned.
func (p *Pool) readRange(ctx context.Context, topic string, ranges []Range, fn func(*kgo.Record) error) error {
	start := time.Now()
	p.Stats.Reads.Add(1)
	defer func() { p.Stats.Nanos.Add(int64(time.Since(start))) }()

	type part struct {
		upto  int64
		queue []*kgo.Record
		done  bool
		seen  bool // a record of this partition arrived
	}
	parts := map[int32]*part{}
	offsets := map[int32]kgo.Offset{}
	for _, r := range ranges {
		if r.After >= r.Upto {
			continue
		}
		parts[r.Partition] = &part{upto: r.Upto}
		offsets[r.Partition] = kgo.NewOffset().At(r.After + 1)
	}
	if len(parts) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(p.opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)...)
	if err != nil {
		return fmt.Errorf("replay: kafka client: %w", err)
	}
	defer cl.Close()

	// emit hands out queued records in timestamp order for as long as that order is known, i.e. while every
	// partition still being read has a record queued.
	emit := func(final bool) error {
		for {
			var best *part
			for _, pt := range parts {
				if len(pt.queue) == 0 {
					if !pt.done && !final {
						return nil
					}
					continue
				}
				if best == nil || before(pt.queue[0], best.queue[0]) {
					best = pt
				}
			}
			if best == nil {
				return nil
			}
			rec := best.queue[0]
			best.queue[0] = nil
			best.queue = best.queue[1:]
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
	for {
		if err := emit(false); err != nil {
			return err
		}
		active := false
		for _, pt := range parts {
			active = active || !pt.done
		}
		if !active {
			return emit(true)
		}
		pctx, cancel := context.WithTimeout(ctx, p.cfg.Idle)
		fs := cl.PollRecords(pctx, 2000)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, partition int32, err error) {
			switch {
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			case errors.Is(err, kerr.OffsetOutOfRange):
				ferr = &OutOfRangeError{Partition: partition, Offset: offsets[partition].EpochOffset().Offset}
			default:
				ferr = fmt.Errorf("replay: fetch partition %d: %w", partition, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		got := false
		fs.EachRecord(func(rec *kgo.Record) {
			pt := parts[rec.Partition]
			if pt == nil || pt.done {
				return
			}
			pt.seen = true
			if rec.Offset <= pt.upto {
				pt.queue = append(pt.queue, rec)
				got = true
			}
			if rec.Offset >= pt.upto {
				pt.done = true
			}
		})
		if !got && fs.NumRecords() == 0 {
			// Nothing arrived within Idle, though every partition still open has a record to come.
			for q, pt := range parts {
				if !pt.done && len(pt.queue) == 0 {
					return &IdleError{Partition: q, Upto: pt.upto, Wait: p.cfg.Idle}
				}
			}
		}
	}
}

// fetchMaxWait is how long the broker may hold a replay fetch that has nothing to return yet.
const fetchMaxWait = 250 * time.Millisecond

// IdleError is returned by a read when a partition delivered no record for Config.Idle before reaching its
// range's end: the broker is not delivering (or the topic was deleted and created again, shorter). The
// stream fails and its client resumes, rather than getting a block with records missing.
type IdleError struct {
	Partition int32
	Upto      int64
	Wait      time.Duration
}

// Error names the partition and how long it was silent.
func (e *IdleError) Error() string {
	return fmt.Sprintf("replay: partition %d delivered no record for %v before offset %d", e.Partition, e.Wait, e.Upto)
}

func before(a, b *kgo.Record) bool {
	if !a.Timestamp.Equal(b.Timestamp) {
		return a.Timestamp.Before(b.Timestamp)
	}
	return a.Partition < b.Partition
}
