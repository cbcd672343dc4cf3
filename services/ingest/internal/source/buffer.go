package source

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// buffer is what lies between a connection's reader and its batching loop, bounded twice: in events (its
// channel holds at most BufferEvents) and in bytes (at most BufferBytes of records, counted from the moment
// the reader hands an item over until the transaction holding it commits). Bytes are held that long
// because the records of the open transaction stay in memory too: in the producer until the broker
// acknowledges them, and in the batching loop's list for the too-large path. Bounding only the channel
// bounded nothing in bytes: 1000 events of up to max-event-bytes each, plus a transaction's worth.
//
// When either bound is reached the reader waits in put, so it stops reading the body and TCP
// backpressure reaches the upstream. A reader waiting for bytes that only a commit can free nudges the
// batching loop, which then commits early (see batch), so a full buffer never waits for commit-interval.
//
// An item larger than the whole byte bound still passes, alone: when nothing else is held.
//
// Concurrency: one reader calls put, the batching loop receives from items and calls release and
// blocked; mu guards the fields below it.
type buffer struct {
	items chan item
	limit int64
	nudge chan struct{} // capacity 1: the reader waits for bytes

	mu      sync.Mutex
	used    int64         // bytes handed over and not released
	waiting bool          // the reader waits in put for bytes
	freed   chan struct{} // closed (and replaced) by release
}

func newBuffer(events int, bytes int64) *buffer {
	return &buffer{
		items: make(chan item, events), limit: bytes,
		nudge: make(chan struct{}, 1), freed: make(chan struct{}),
	}
}

// put waits until it fits the byte bound and the channel, then sends it. It reports false when ctx ended
// first.
func (b *buffer) put(ctx context.Context, it item) bool {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+it.size <= b.limit {
			b.used += it.size
			b.waiting = false
			b.mu.Unlock()
			break
		}
		b.waiting = true
		freed := b.freed
		b.mu.Unlock()
		select {
		case b.nudge <- struct{}{}:
		default:
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case b.items <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// release gives back n bytes, those of a committed transaction.
func (b *buffer) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// blocked reports whether the reader waits for bytes.
func (b *buffer) blocked() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// recordSize is what a record counts against the byte bound: its key, value and headers, plus a fixed
// allowance for the structures around them.
func recordSize(r *kgo.Record) int64 {
	if r == nil {
		return 0
	}
	n := len(r.Key) + len(r.Value) + recordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// recordOverhead approximates the memory of a kgo.Record and its headers besides their bytes.
const recordOverhead = 256
