package replay

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type blockKey struct {
	topic     string
	epoch     uint64 // the topic's incarnation (see Read): a topic created again under its name is another log
	partition int32
	index     int64 // the block covers offsets [index*BlockSize, (index+1)*BlockSize)
}

// block is what a read found of one block: every record with an offset in [from, to], in offset order
// (offsets in that span without a record hold transaction markers or were compacted away).
type block struct {
	from, to int64
	recs     []*kgo.Record
}

// flight is a block fetch under way; others wanting the block wait for done. b and err are written before
// done is closed.
type flight struct {
	done chan struct{}
	b    *block
	err  error
}

// Read reads ranges of topic and calls fn with each record, across partitions in record-timestamp order
// (ties by partition), within a partition in offset order. Blocks other connections read recently come
// from the cache; the others are read from Kafka, each by one reader of the pool at a time (idle is called
// every interval while the connection waits for one, to keep it alive). It returns *OutOfRangeError when a
// range starts below the partition's low watermark. An error from fn or idle stops the read and is
// returned. epoch names the topic's incarnation the caller follows (the feed's recreation epoch): cached
// blocks of one incarnation are never served for another, which holds other records at the same offsets.
func (p *Pool) Read(ctx context.Context, topic string, epoch uint64, ranges []Range, interval time.Duration, idle func() error,
	fn func(*kgo.Record) error,
) error {
	type cursor struct {
		partition int32
		next      int64 // next offset to deliver
		upto      int64
		blk       *block
		i         int // index of the next record in blk
	}
	// nextBlock returns the block holding the cursor's next offset, and the last offset the cursor needs
	// of it.
	nextBlock := func(c *cursor) (blockKey, int64) {
		idx := c.next / p.cfg.BlockSize
		return blockKey{topic, epoch, c.partition, idx}, min((idx+1)*p.cfg.BlockSize-1, c.upto)
	}
	// head returns the cursor's next record, fetching blocks as needed; nil when the range is done.
	head := func(c *cursor) (*kgo.Record, error) {
		for c.next <= c.upto {
			if c.blk == nil || c.next > c.blk.to {
				key, end := nextBlock(c)
				b, err := p.block(ctx, key, c.next, end, interval, idle)
				if err != nil {
					return nil, err
				}
				c.blk = b
				c.i = sort.Search(len(b.recs), func(i int) bool { return b.recs[i].Offset >= c.next })
			}
			if c.i < len(c.blk.recs) && c.blk.recs[c.i].Offset <= c.upto {
				return c.blk.recs[c.i], nil
			}
			c.next = c.blk.to + 1 // the rest of the block holds no record
		}
		return nil, nil
	}
	var cs []*cursor
	for _, r := range ranges {
		if r.After < r.Upto {
			cs = append(cs, &cursor{partition: r.Partition, next: r.After + 1, upto: r.Upto})
		}
	}
	// The first record needs the first block of every partition: fetch those at once, not one after the
	// other. The fetches only fill the cache (their errors come back to head, which fetches again); they
	// do not call idle, which belongs to this goroutine.
	if len(cs) > 1 {
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		for _, c := range cs[1:] {
			key, end := nextBlock(c)
			from := c.next
			wg.Go(func() { _, _ = p.block(pctx, key, from, end, 0, nil) })
		}
	}
	heads := make([]*kgo.Record, len(cs))
	for i, c := range cs {
		h, err := head(c)
		if err != nil {
			return err
		}
		heads[i] = h
	}
	for {
		best := -1
		for i, h := range heads {
			if h != nil && (best < 0 || before(h, heads[best])) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		rec, c := heads[best], cs[best]
		p.Stats.Records.Add(1)
		if err := fn(rec); err != nil {
			return err
		}
		c.next, c.i = rec.Offset+1, c.i+1
		h, err := head(c)
		if err != nil {
			return err
		}
		heads[best] = h
	}
}

// block returns a block of key holding at least offsets [from, to], from the cache, from another
// connection's fetch of it, or from Kafka. The fetch runs on a goroutine of its own, so that every
// connection waiting for it, the one that started it too, keeps its client alive (idle every interval)
// however long the broker takes.
func (p *Pool) block(ctx context.Context, key blockKey, from, to int64, interval time.Duration, idle func() error) (b *block, err error) {
	ctx, span := p.cfg.Tracer.Start(ctx, spanBlock)
	served := servedKafka
	defer func() { endBlockSpan(span, key, from, to, served, b, err) }()
	covers := func(b *block) bool { return b.from <= from && b.to >= to }
	for {
		if b, ok := p.cached(key); ok && covers(b) {
			p.Stats.CacheHits.Add(1)
			served = servedCache
			return b, nil
		}
		p.mu.Lock()
		f, mine := p.flights[key], false
		if f == nil {
			f, mine = &flight{done: make(chan struct{})}, true
			p.flights[key] = f
			go p.fly(ctx, key, from, to, f)
		}
		p.mu.Unlock()
		err := keepAlive(ctx, interval, idle, func(tick <-chan time.Time) (bool, error) {
			select {
			case <-f.done:
				return true, nil
			case <-ctx.Done():
				return false, ctx.Err()
			case <-tick:
				return false, nil
			}
		})
		if err != nil {
			return nil, err
		}
		if f.err != nil && (mine || !errors.Is(f.err, context.Canceled)) {
			// A stalled broker fails every waiter at once, not one after another; only a fetch ended by
			// its starter's client leaving is tried again by the others.
			return nil, f.err
		}
		if mine && covers(f.b) {
			return f.b, nil
		}
		served = servedShared
		// Another connection's fetch, or one that did not cover what this one needs: look again.
	}
}

// fly fetches a block for a flight, caches it, and lands the flight.
func (p *Pool) fly(ctx context.Context, key blockKey, from, to int64, f *flight) {
	f.b, f.err = p.fetch(ctx, key, from, to)
	if f.err == nil {
		p.cache.Add(key, cachedBlock{f.b, time.Now()})
	}
	p.mu.Lock()
	delete(p.flights, key)
	p.mu.Unlock()
	close(f.done)
}

// fetch reads a block from the log: from the block's first offset, so that connections resuming a little
// earlier find it in the cache too, or from the first offset needed when the block's start was deleted. It
// reads until the log's next offset passes to, so a block ends exactly where it should whether or not to
// holds a record, and keeps what the last fetch brought beyond to, up to the block's end.
func (p *Pool) fetch(ctx context.Context, key blockKey, from, to int64) (*block, error) {
	release, err := p.Acquire(ctx, 0, nil)
	if err != nil {
		return nil, err
	}
	defer release()
	start := time.Now()
	p.Stats.Reads.Add(1)
	defer func() { p.Stats.Nanos.Add(int64(time.Since(start))) }()
	lo, end := key.index*p.cfg.BlockSize, (key.index+1)*p.cfg.BlockSize-1
	b, err := p.readBlock(ctx, key, lo, to, end)
	var oor *OutOfRangeError
	if errors.As(err, &oor) && lo < from {
		b, err = p.readBlock(ctx, key, from, to, end)
	}
	return b, err
}

// readBlock reads key's partition from offset from until the log has passed to, keeping records up to end.
func (p *Pool) readBlock(ctx context.Context, key blockKey, from, to, end int64) (*block, error) {
	b := &block{from: from}
	off := from
	moved := time.Now() // when the log last moved
	for off <= to {
		recs, next, err := p.log.Fetch(ctx, key.topic, key.partition, off)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Offset >= off && r.Offset <= end {
				b.recs = append(b.recs, r)
			}
		}
		now := time.Now()
		if next > off {
			off, moved = next, now
			continue
		}
		if now.Sub(moved) >= p.cfg.Idle {
			return nil, &IdleError{Partition: key.partition, Upto: to, Wait: p.cfg.Idle}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	b.to = min(off-1, end)
	return b, nil
}
