package replay

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

type blockKey struct {
	topic     string
	epoch     uint64 // the topic's incarnation (see Read): a topic created again under its name is another log
	partition int32
	index     int64 // the block covers offsets [index*BlockSize, (index+1)*BlockSize)
}

// blockAt returns the key of the block of partition holding offset from, and the last offset a range up to
// upto needs of it.
func (p *Pool) blockAt(topic string, epoch uint64, partition int32, from, upto int64) (blockKey, int64) {
	idx := from / p.cfg.BlockSize
	return blockKey{topic, epoch, partition, idx}, min((idx+1)*p.cfg.BlockSize-1, upto)
}

// launch registers a new flight for key under p.mu, unless one is under way, or one landed since the caller
// looked at the cache and holds [from, to]; and starts it under ctx. span is the starting connection's block
// span, ended when the flight lands; nil starts one (from ctx) only when a flight is started. A flight
// started with a batch has its first fetch sent with the batch's. It returns the flight under way and whether
// this call started it; nil and false when the block is in the cache.
func (p *Pool) launch(ctx context.Context, key blockKey, from, to int64, first int32, span trace.Span, batch *firstBatch) (*flight, bool) {
	p.mu.Lock()
	if f := p.flights[key]; f != nil {
		p.mu.Unlock()
		return f, false
	}
	// A flight caches its block before it leaves flights (under mu): found in neither when the caller looked
	// at the cache, the block may have landed since.
	if b, ok := p.cache.get(key); ok && b.covers(from, to) {
		p.mu.Unlock()
		return nil, false
	}
	f := newFlight(from, to, first)
	f.answer = batch.add(key.partition, from, first)
	p.flights[key] = f
	p.mu.Unlock()
	if span == nil {
		ctx, span = p.cfg.Tracer.Start(ctx, spanBlock) // ended when the flight lands (join)
	}
	f.join(key, flightSpan{span, from, to, servedKafka})
	p.flying.Add(1)
	go p.fly(ctx, key, f)
	return f, true
}

// otherFailed says a read of the block that another connection started, and that failed with err, is no
// answer for offset x: its starter's client left (its context ended), or it started below the low watermark
// while x is not (a prefetch from an offset retention has passed). The connection reads the block again.
func otherFailed(err error, x int64) bool {
	var oor *OutOfRangeError
	return errors.Is(err, context.Canceled) || errors.As(err, &oor) && x > oor.Offset
}

// flight is a block being read from Kafka. It publishes its records from offset start on as each fetch
// decodes them, so that the connections reading the block hand them on at once rather than after the whole
// block: a resume's first frame waits for one fetch, not for a block of them. The part of the block before
// start is read at the same time, so that the block the flight lands in the cache covers the whole block
// (connections resuming a little earlier find it there too).
//
// The records a flight publishes are copies (own) that its block keeps, so a flight holds no fetch's answer
// either; their bytes count against the cache's bound from the moment they are read (bytes), and move into
// the cache, as the block's, when the flight lands.
//
// start, to and done never change; b and err are written before done is closed. bytes is the flight's own.
// The rest is guarded by mu.
type flight struct {
	start  int64         // the first offset published
	to     int64         // the published part ends once the log has passed to
	first  int32         // what its first fetch asks for (firstBytes)
	answer *firstAnswer  // the first fetch's answer when it went out in a batch (the flight goroutine's)
	done   chan struct{} // closed when the flight has landed
	b      *block        // the block as cached, set when the flight landed without error
	err    error         // why the published part failed
	bytes  atomic.Int64  // bytes of the copies read so far (both parts), counted in the cache's flying bytes

	mu     sync.Mutex
	recs   []*kgo.Record // published records, offsets start and up, in offset order
	hi     int64         // every offset in [start, hi) has been read past
	ended  bool          // the published part will not grow any more (err says whether it failed)
	grew   chan struct{} // closed, and replaced, whenever recs, hi or ended change
	landed bool
	spans  []flightSpan // spans of the connections reading from the flight, ended when it lands
}

// flightSpan is a connection's block span waiting for its flight to land.
type flightSpan struct {
	span     trace.Span
	from, to int64
	served   string
}

func newFlight(start, to int64, first int32) *flight {
	return &flight{start: start, to: to, first: first, hi: start, done: make(chan struct{}), grew: make(chan struct{})}
}

// publish adds records read up to (not including) offset next.
func (f *flight) publish(recs []*kgo.Record, next int64) {
	f.mu.Lock()
	f.recs = append(f.recs, recs...)
	f.hi = max(f.hi, next)
	close(f.grew)
	f.grew = make(chan struct{})
	f.mu.Unlock()
}

// end says the published part is complete, or failed with err.
func (f *flight) end(err error) {
	f.mu.Lock()
	f.ended, f.err = true, err
	close(f.grew)
	f.grew = make(chan struct{})
	f.mu.Unlock()
}

// join has the flight end span when it lands; at once if it already has.
func (f *flight) join(key blockKey, s flightSpan) {
	f.mu.Lock()
	landed := f.landed
	if !landed {
		f.spans = append(f.spans, s)
	}
	f.mu.Unlock()
	if landed {
		endBlockSpan(s.span, key, s.from, s.to, s.served, f.published(), f.err)
	}
}

// serves says a connection needing offsets from on can read them from the flight as it goes: it started at or
// before from, and its published part is still growing or has passed from.
func (f *flight) serves(from int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.start <= from && (!f.ended || f.err == nil && f.hi > from)
}

// published is the flight's published part as a block.
func (f *flight) published() *block {
	if f.b != nil {
		return f.b
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &block{from: f.start, to: f.hi - 1, recs: f.recs}
}

// land ends the flight: b (nil after an error) is what it read. From then on the connections still reading
// from the flight search the block's records: the same copies, in a slice without the room the published one
// grew into.
func (f *flight) land(key blockKey, b *block) {
	f.b = b
	f.mu.Lock()
	f.landed = true
	if b != nil {
		f.recs = b.recs
	}
	spans := f.spans
	f.spans = nil
	f.mu.Unlock()
	close(f.done)
	for _, s := range spans {
		endBlockSpan(s.span, key, s.from, s.to, s.served, f.published(), f.err)
	}
}

// errAgain says a cursor must find its block again: the flight it read from will not cover what it needs
// (it ended before, or its starter's client left).
var errAgain = errors.New("replay: read the block again")

// await returns the flight's first record at or after offset x, or, when the flight has read past x and
// found none, nil and the offset it has read up to. It waits for the flight to get that far, calling idle
// every interval meanwhile. mine says the caller started the flight: a flight that its starter's leaving
// ended, or that started below the low watermark, fails the others with errAgain, as does one whose published
// part ended before x.
func (f *flight) await(ctx context.Context, x int64, mine bool, w Waits) (*kgo.Record, int64, error) {
	for {
		f.mu.Lock()
		recs, hi, ended, err, grew := f.recs, f.hi, f.ended, f.err, f.grew
		f.mu.Unlock()
		if i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= x }); i < len(recs) {
			return recs[i], hi, nil
		}
		if hi > x {
			return nil, hi, nil
		}
		if ended {
			if err == nil || !mine && otherFailed(err, x) {
				return nil, hi, errAgain
			}
			return nil, hi, err
		}
		if err := w.before(); err != nil {
			return nil, hi, err
		}
		if err := keepAlive(ctx, w.Interval, w.Idle, func(tick <-chan time.Time) (bool, error) {
			select {
			case <-grew:
				return true, nil
			case <-ctx.Done():
				return false, ctx.Err()
			case <-tick:
				return false, nil
			}
		}); err != nil {
			return nil, hi, err
		}
	}
}

// source is where a cursor reads a block: a block that is complete (from the cache or a landed flight), or a
// flight still reading one.
type source struct {
	b    *block
	f    *flight
	mine bool // the cursor's read started f
}

// Read reads ranges of topic and calls fn with each record, across partitions in record-timestamp order
// (ties by partition), within a partition in offset order. Blocks other connections read recently come
// from the cache, or, while another connection is reading them, from its read as it goes; the others are
// read from Kafka, each by one reader of the pool at a time (idle is called every interval while the
// connection waits for one or for records, to keep it alive), and their records handed on as each fetch
// decodes them. It returns *OutOfRangeError when a range starts below the partition's low watermark. An
// error from fn or idle stops the read and is returned. epoch names the topic's incarnation the caller
// follows (the feed's recreation epoch): cached blocks of one incarnation are never served for another,
// which holds other records at the same offsets.
func (p *Pool) Read(ctx context.Context, topic string, epoch uint64, ranges []Range, interval time.Duration, idle func() error,
	fn func(*kgo.Record) error,
) error {
	return p.ReadWith(ctx, topic, epoch, ranges, Waits{Interval: interval, Idle: idle}, fn)
}

// Waits says what a Read does while it waits for Kafka: for a reader, for another connection's read of a
// block, for the records of its own.
type Waits struct {
	// Idle, if not nil, is called every Interval while the read waits (a connection writes its keep-alive
	// there); an error from it ends the read.
	Interval time.Duration
	Idle     func() error
	// Before, if not nil, is called once before each wait: a caller that gathers records into larger writes
	// sends what it has rather than hold it, and what it holds to build it, for the length of the wait. An
	// error from it ends the read.
	Before func() error
}

func (w Waits) before() error {
	if w.Before == nil {
		return nil
	}
	return w.Before()
}

// ReadWith is Read with Waits.
func (p *Pool) ReadWith(ctx context.Context, topic string, epoch uint64, ranges []Range, w Waits, fn func(*kgo.Record) error) error {
	rd := &reading{p: p, ctx: ctx, topic: topic, epoch: epoch, waits: w, first: firstBytes(len(ranges))}
	var cs []*cursor
	for _, r := range ranges {
		if r.After < r.Upto {
			cs = append(cs, &cursor{partition: r.Partition, next: r.After + 1, upto: r.Upto})
		}
	}
	if err := rd.findAll(cs); err != nil {
		return err
	}
	heads := make([]*kgo.Record, len(cs))
	for i, c := range cs {
		h, err := rd.head(c)
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
			break
		}
		rec, c := heads[best], cs[best]
		p.Stats.Records.Add(1)
		if err := fn(rec); err != nil {
			return err
		}
		c.next = rec.Offset + 1
		h, err := rd.head(c)
		if err != nil {
			return err
		}
		heads[best] = h
	}
	for _, done := range rd.started {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// cursor is where a Read is in one range: the next offset to deliver, the block it reads it from.
type cursor struct {
	partition int32
	next      int64 // next offset to deliver
	upto      int64
	src       source
	end       int64 // the last offset the cursor needs of src's block
}

// reading is one Read's state, on its caller's goroutine.
type reading struct {
	p     *Pool
	ctx   context.Context //nolint:containedctx // the Read's own, for the length of the call
	topic string
	epoch uint64
	waits Waits
	first int32 // what the first fetch of a block this read starts asks for
	// batch gathers the first fetches of the blocks the read starts at once, before it waits for any.
	batch *firstBatch
	// started are the done channels of the flights this read started: a read ends once they have landed in
	// the cache. Not the flights: a read keeps only the block each cursor is reading, not every block it read.
	started []<-chan struct{}
}

// findAll points every cursor at its first block. The first record needs the head of every partition: the
// reads of all first blocks start, and their first fetches go out together, before the read waits for any.
func (rd *reading) findAll(cs []*cursor) error {
	rd.batch = rd.p.newBatch(rd.ctx, rd.topic)
	defer func() {
		rd.batch.send()
		rd.batch = nil
	}()
	for _, c := range cs {
		if err := rd.find(c); err != nil {
			return err
		}
	}
	return nil
}

// find points the cursor at the block holding its next offset.
func (rd *reading) find(c *cursor) error {
	key, end := rd.p.blockAt(rd.topic, rd.epoch, c.partition, c.next, c.upto)
	s, err := rd.p.source(rd.ctx, key, c.next, end, rd.waits, rd.first, rd.batch)
	if err != nil {
		return err
	}
	if s.mine {
		rd.started = append(rd.started, s.f.done)
	}
	c.src, c.end = s, end
	return nil
}

// head returns the cursor's next record, finding blocks as needed; nil when the range is done.
func (rd *reading) head(c *cursor) (*kgo.Record, error) {
	for c.next <= c.upto {
		if c.src == (source{}) || c.next > c.end {
			if err := rd.find(c); err != nil {
				return nil, err
			}
		}
		if b := c.src.b; b != nil {
			i := sort.Search(len(b.recs), func(i int) bool { return b.recs[i].Offset >= c.next })
			if i < len(b.recs) && b.recs[i].Offset <= c.upto {
				return b.recs[i], nil
			}
			c.next = b.to + 1 // the rest of the block holds no record
			continue
		}
		rec, hi, err := c.src.f.await(rd.ctx, c.next, c.src.mine, rd.waits)
		switch {
		case errors.Is(err, errAgain):
			c.src = source{}
		case err != nil:
			return nil, err
		case rec != nil && rec.Offset <= c.upto:
			return rec, nil
		case rec != nil:
			c.next = rec.Offset
		default:
			c.next = hi // offsets up to hi hold no record
		}
	}
	return nil, nil
}

// source returns where to read the block of key, holding at least offsets [from, to]: the cache, another
// connection's read of it that started at or before from, or a new read from Kafka. It waits only for a read
// of the block under way that started after from (it is cached when it lands, before from too).
func (p *Pool) source(ctx context.Context, key blockKey, from, to int64, w Waits, first int32, batch *firstBatch) (source, error) {
	ctx, span := p.cfg.Tracer.Start(ctx, spanBlock)
	for {
		if b, ok := p.cache.get(key); ok && b.covers(from, to) {
			p.Stats.CacheHits.Add(1)
			endBlockSpan(span, key, from, to, servedCache, b, nil)
			return source{b: b}, nil
		}
		if p.beforeLaunch != nil {
			p.beforeLaunch()
		}
		f, mine := p.launch(ctx, key, from, to, first, span, batch)
		switch {
		case mine:
			return source{f: f, mine: true}, nil
		case f == nil:
			continue // landed since the look at the cache: it has it now
		}
		if f.serves(from) {
			p.Stats.CacheHits.Add(1)
			f.join(key, flightSpan{span, from, to, servedShared})
			return source{f: f}, nil
		}
		batch.send() // the flights started before this one must not wait for this wait
		err := w.before()
		if err == nil {
			err = keepAlive(ctx, w.Interval, w.Idle, func(tick <-chan time.Time) (bool, error) {
				select {
				case <-f.done:
					return true, nil
				case <-ctx.Done():
					return false, ctx.Err()
				case <-tick:
					return false, nil
				}
			})
		}
		if err == nil && f.err != nil && !otherFailed(f.err, from) {
			// A stalled broker fails every waiter at once, not one after another; only a read that is no
			// answer for from (see otherFailed) is tried again by the others.
			err = f.err
		}
		if err != nil {
			endBlockSpan(span, key, from, to, servedShared, nil, err)
			return source{}, err
		}
		// Look again: the landed block is cached, unless it does not cover what this connection needs.
	}
}

// fly reads a flight's block from Kafka with a reader slot of the pool: the published part from the flight's
// start, and, once its first records are out, the part of the block before it at the same time. It caches the
// block and lands the flight.
func (p *Pool) fly(ctx context.Context, key blockKey, f *flight) {
	defer p.flying.Done()
	var b *block
	defer func() {
		// Cached before the flight leaves the map, so that a connection looking for the block always finds
		// one of the two.
		p.cache.land(key, b, f.bytes.Load())
		p.mu.Lock()
		delete(p.flights, key)
		p.mu.Unlock()
		f.land(key, b)
	}()
	// The block's first fetch is short (see readRange) and goes out at once; the rest of the block waits for
	// a reader slot. A resume's first record needs the first records of every partition it reads: were the
	// first fetches to wait for slots too, a resume of more partitions than there are readers would wait for
	// whole blocks of its first partitions before its last ones even began.
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	slot := func() (err error) {
		release, err = p.Acquire(ctx, 0, nil)
		return err
	}
	start := time.Now()
	p.Stats.Reads.Add(1)
	defer func() { p.Stats.Nanos.Add(int64(time.Since(start))) }()
	lo, end := key.index*p.cfg.BlockSize, (key.index+1)*p.cfg.BlockSize-1
	var pre []*kgo.Record
	var preSize int64
	var preErr error
	var wg sync.WaitGroup
	prefix := false
	publish := func(recs []*kgo.Record, next int64) {
		f.publish(recs, next)
		if !prefix && lo < f.start {
			// After the first records are out, not before: the fetches of a partition go through one
			// connection, answered in turn.
			prefix = true
			wg.Go(func() { pre, _, preSize, preErr = p.readRange(ctx, key, f, lo, f.start-1, f.start-1, nil, nil) })
		}
	}
	recs, next, size, err := p.readRange(ctx, key, f, f.start, f.to, end, publish, slot)
	f.end(err)
	wg.Wait()
	if err != nil {
		return
	}
	b = &block{from: f.start, to: min(next-1, end), size: size}
	if prefix && preErr == nil {
		// The records before start go first; an error there (retention took the block's start, say) only
		// leaves them out of the cached block.
		b.from, b.size = lo, b.size+preSize
	} else {
		pre = nil
	}
	// A slice of its own, without the room the published one grew into.
	b.recs = slices.Concat(pre, recs)
}

// readRange reads key's partition from offset from until the log has passed to, keeping records up to end,
// and returns copies of them (own) with the offset the log has been read up to and the bytes the copies hold,
// which it counts as f's as it reads them. publish, if not nil, gets each fetch's copies as they are made. The
// first fetch asks for little when the log can be asked (sizedLog), so that the first records come after one
// short round trip. slot, if not nil, is called once before the fetches after that short one (before every
// fetch when there is none): it waits for a reader slot.
func (p *Pool) readRange(ctx context.Context, key blockKey, f *flight, from, to, end int64,
	publish func([]*kgo.Record, int64), slot func() error,
) ([]*kgo.Record, int64, int64, error) {
	var out []*kgo.Record
	var size int64
	off := from
	moved := time.Now() // when the log last moved
	sized, _ := p.log.(sizedLog)
	first := publish != nil && sized != nil
	for off <= to {
		if !first && slot != nil {
			if err := slot(); err != nil {
				return nil, off, size, err
			}
			slot = nil
		}
		var recs []*kgo.Record
		var next int64
		var err error
		if first {
			recs, next, err = p.firstFetch(ctx, key, f, off, sized)
			first = false
		} else {
			recs, next, err = p.log.Fetch(ctx, key.topic, key.partition, off)
		}
		if err != nil {
			return nil, off, size, err
		}
		n := len(out)
		out = p.keep(out, f, recs, off, end, &size)
		now := time.Now()
		if next > off {
			if publish != nil {
				publish(out[n:len(out):len(out)], next)
			}
			off, moved = next, now
			continue
		}
		if now.Sub(moved) >= p.cfg.Idle {
			return nil, off, size, &IdleError{Partition: key.partition, Upto: to, Wait: p.cfg.Idle}
		}
		if err := ctx.Err(); err != nil {
			return nil, off, size, err
		}
	}
	return out, off, size, nil
}

// keep appends to out copies of the records of a fetch (in offset order) with an offset in [from, end], adds
// their bytes to *size and counts them as the flight's.
func (p *Pool) keep(out []*kgo.Record, f *flight, recs []*kgo.Record, from, end int64, size *int64) []*kgo.Record {
	i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= from })
	j := sort.Search(len(recs), func(i int) bool { return recs[i].Offset > end })
	if i >= j {
		return out
	}
	copies, n := own(recs[i:j])
	f.bytes.Add(n)
	p.cache.hold(n)
	*size += n
	for k := range copies {
		out = append(out, &copies[k])
	}
	return out
}

// Prefetch starts reading the first block of each range that neither the cache nor a read under way covers,
// without waiting for anything: a stream calls it as soon as it knows which ranges the ring cannot serve, so
// that the first fetches overlap the look-ups it makes before its Read of the same ranges, which then reads
// them as they arrive. The reads end with ctx (the stream's). Each counts as a Kafka read, and the Read that
// follows it as served by another connection's read (a cache hit).
func (p *Pool) Prefetch(ctx context.Context, topic string, epoch uint64, ranges []Range) {
	batch := p.newBatch(ctx, topic)
	defer batch.send()
	for _, r := range ranges {
		if r.After >= r.Upto {
			continue
		}
		from := r.After + 1
		key, to := p.blockAt(topic, epoch, r.Partition, from, r.Upto)
		if b, ok := p.cache.get(key); ok && b.covers(from, to) {
			continue
		}
		p.launch(ctx, key, from, to, firstBytes(len(ranges)), nil, batch)
	}
}
