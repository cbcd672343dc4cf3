package replay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Range asks for the records of one partition after offset After (-1: from the partition's start) up to and
// including offset Upto.
type Range struct {
	Partition int32
	After     int64
	Upto      int64
}

// Config configures a Pool.
type Config struct {
	// Readers bounds the replay readers that run at once. Zero means 4.
	Readers int
	// BlockSize is how many offsets of a partition one cached block covers. Zero means 1024.
	BlockSize int64
	// CacheBytes bounds the memory of the blocks of recently replayed records kept for other connections
	// resuming nearby, together with that of the blocks being read: their records, copied out of the fetches
	// that read them, sized as they are held. The least recently used blocks go first; a block larger than
	// CacheBytes is not kept. Blocks being read count as they grow but are never cut short, so the bound holds
	// as long as Readers blocks fit in it. Zero means DefaultCacheBytes.
	CacheBytes int64
	// CacheTTL is how long a block stays cached; it bounds how long a deleted and recreated topic can be
	// answered from blocks of its former self. Zero means one minute.
	CacheTTL time.Duration
	// Tracer starts a span for each block a read needs (partition, offsets, records, whether the cache or
	// another connection's fetch served it), a child of the reading stream's span. Nil means none.
	Tracer trace.Tracer
	// Idle is how long a read waits for a partition's log to move before it fails. A range always ends at or
	// before an offset the gateway has read past, so a log that does not move means the broker is not
	// delivering, and ending the range there would hand on a block with records missing. Zero means 5s.
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
	// CacheBytes is the memory the cached blocks and the blocks being read hold now: at most
	// Config.CacheBytes while the blocks being read fit in it.
	CacheBytes atomic.Int64
}

// DefaultCacheBytes is the block cache's bound when Config.CacheBytes is zero: 32 MiB, about 26 blocks of
// 1,024 records of 1 KiB.
const DefaultCacheBytes = 32 << 20

// Pool runs replay reads against one cluster, and shares what they read: records are fetched in blocks of
// Config.BlockSize offsets, kept in an LRU cache of at most Config.CacheBytes, and a block that one connection
// is fetching is waited for, not fetched again, by the others. A reconnect storm of clients at nearby
// positions therefore reads each block from Kafka once.
type Pool struct {
	cfg   Config
	log   Log
	slots chan struct{}
	// Stats are the pool's counters, read by metrics.
	Stats Stats

	// cache holds recently read blocks for CacheTTL, within CacheBytes. Its entries carry their time, rather
	// than expiring on a goroutine of their own that nothing could stop.
	cache   *blockCache
	mu      sync.Mutex
	flights map[blockKey]*flight
	// beforeLaunch, when set (by tests only), runs between a connection's look at the cache and its look at
	// the flights: where a flight may land.
	beforeLaunch func()
	flying       sync.WaitGroup // the flights' goroutines (fly), joined by Wait
}

// Wait waits until every block read under way has ended, or ctx ends. A read ends with the context of the
// stream that started it, so once the streams have ended (the server drained), Wait returns soon: call it
// then, after which no stream starts a read.
func (p *Pool) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { p.flying.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NewPool returns a pool that reads from log.
func NewPool(cfg Config, log Log) *Pool {
	if cfg.Readers <= 0 {
		cfg.Readers = 4
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 5 * time.Second
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 1024
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = time.Minute
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	p := &Pool{cfg: cfg, log: log, slots: make(chan struct{}, cfg.Readers), flights: map[blockKey]*flight{}}
	p.cache = newBlockCache(cfg.CacheBytes, cfg.CacheTTL, &p.Stats.CacheBytes)
	return p
}

// Acquire waits for a free reader, calling idle every interval while it waits (a connection writes its
// heartbeat there; an error from idle ends the wait). The returned release must be called once.
func (p *Pool) Acquire(ctx context.Context, interval time.Duration, idle func() error) (release func(), err error) {
	select {
	case p.slots <- struct{}{}:
	default:
		p.Stats.Waiting.Add(1)
		err := keepAlive(ctx, interval, idle, func(tick <-chan time.Time) (bool, error) {
			select {
			case p.slots <- struct{}{}:
				return true, nil
			case <-ctx.Done():
				return false, ctx.Err()
			case <-tick:
				return false, nil
			}
		})
		p.Stats.Waiting.Add(-1)
		if err != nil {
			return nil, err
		}
	}
	p.Stats.InUse.Add(1)
	return func() {
		p.Stats.InUse.Add(-1)
		<-p.slots
	}, nil
}

// keepAlive runs wait until it reports done, calling idle every interval in between: every wait of a
// connection for Kafka (a reader slot, another connection's fetch of the same block, a log that has not
// moved yet) keeps the connection alive the same way. wait gets the ticker's channel (nil without idle) and
// returns when it fires, when it is done, or with an error.
func keepAlive(ctx context.Context, interval time.Duration, idle func() error, wait func(tick <-chan time.Time) (bool, error)) error {
	var tick <-chan time.Time
	if interval > 0 && idle != nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		done, err := wait(tick)
		if done || err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if idle != nil {
			if err := idle(); err != nil {
				return err
			}
		}
	}
}

// IdleError is returned by a read when a partition's log did not move for Config.Idle before the read passed
// its range's end: the broker is not delivering (or the topic was deleted and created again, shorter). The
// stream fails and its client resumes, rather than getting a block with records missing.
type IdleError struct {
	Partition int32
	Upto      int64
	Wait      time.Duration
}

// Error names the partition and how long it was silent.
func (e *IdleError) Error() string {
	return fmt.Sprintf("replay: partition %d did not move for %v before offset %d", e.Partition, e.Wait, e.Upto)
}

func before(a, b *kgo.Record) bool {
	if !a.Timestamp.Equal(b.Timestamp) {
		return a.Timestamp.Before(b.Timestamp)
	}
	return a.Partition < b.Partition
}
