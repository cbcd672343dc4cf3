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
	// Idle is how long a read waits for more records before it takes a partition as read to its end (ten
	// times as long before the partition's first record). Only a range that ends on a transaction marker or
	// on deleted records waits for it; others end when their last record arrives. Zero means 500ms.
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
		cfg.Idle = 500 * time.Millisecond
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
// is done when its Upto offset was read, or when no more records come for Config.Idle (its end is a
// transaction marker, or the records were deleted). The caller must hold a reader from Acquire. An error
// from fn stops the read and is returned.
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
		kgo.FetchMaxWait(p.cfg.Idle/2),
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
		active, unseen := false, false
		for _, pt := range parts {
			active = active || !pt.done
			unseen = unseen || (!pt.done && !pt.seen)
		}
		if !active {
			return emit(true)
		}
		// Until a partition's first record arrives, its silence may only be a slow first fetch (connecting,
		// metadata), so the wait before taking it as empty is ten times longer.
		wait := p.cfg.Idle
		if unseen {
			wait *= 10
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
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
			// Nothing more arrived within Idle: every partition still open has been read to its end.
			for _, pt := range parts {
				if len(pt.queue) == 0 {
					pt.done = true
				}
			}
		}
	}
}

func before(a, b *kgo.Record) bool {
	if !a.Timestamp.Equal(b.Timestamp) {
		return a.Timestamp.Before(b.Timestamp)
	}
	return a.Partition < b.Partition
}
