package replay

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
)

// firstBatch gathers the first fetches of the blocks that one read (or prefetch) starts at once, and sends them
// together when the read has started them all (send), through the log's FetchFirsts. A resume's first record
// needs the first records of every partition it reads: one request per broker answers them at once, where a
// request per partition has the broker answer them in turn, a connection's requests one after the other.
//
// A nil *firstBatch (a log that cannot batch) adds nothing and sends nothing: each flight fetches on its own.
type firstBatch struct {
	ctx     context.Context //nolint:containedctx // the starting read's, for the one request it sends
	log     batchLog
	topic   string
	fetches []FirstFetch
	answers []*firstAnswer
}

// firstAnswer is a flight's share of a batch: done is closed once f holds what its fetch got.
type firstAnswer struct {
	done chan struct{}
	f    FirstFetch
}

// newBatch returns a batch for the first fetches of topic's blocks that a read under ctx starts; nil when the
// pool's log cannot send them together.
func (p *Pool) newBatch(ctx context.Context, topic string) *firstBatch {
	bl, ok := p.log.(batchLog)
	if !ok {
		return nil
	}
	return &firstBatch{ctx: ctx, log: bl, topic: topic}
}

// add notes a flight's first fetch and returns where its answer will be; nil on a nil batch.
func (b *firstBatch) add(partition int32, offset int64, maxBytes int32) *firstAnswer {
	if b == nil {
		return nil
	}
	a := &firstAnswer{done: make(chan struct{})}
	b.fetches = append(b.fetches, FirstFetch{Partition: partition, Offset: offset, MaxBytes: maxBytes})
	b.answers = append(b.answers, a)
	return a
}

// errAlone answers the one fetch of a batch of one: its flight fetches on its own, as without a batch.
var errAlone = errors.New("replay: a batch of one fetch")

// send sends the fetches added since the last send, without waiting for their answers. The flights waiting
// for them wait until it is called: a read calls it once it has started its blocks, and before it waits for
// anything.
func (b *firstBatch) send() {
	if b == nil || len(b.fetches) == 0 {
		return
	}
	fs, as := b.fetches, b.answers
	b.fetches, b.answers = nil, nil
	if len(fs) == 1 {
		as[0].f.Err = errAlone
		close(as[0].done)
		return
	}
	go func() {
		b.log.FetchFirsts(b.ctx, b.topic, fs)
		for i, a := range as {
			a.f = fs[i]
			close(a.done)
		}
	}()
}

// firstFetch is a flight's first fetch, of about maxBytes from offset: its share of the batch it was started
// in, or, when it was started alone or its share failed, a fetch of its own.
func (p *Pool) firstFetch(ctx context.Context, key blockKey, f *flight, offset int64, sized sizedLog) ([]*kgo.Record, int64, error) {
	if a := f.answer; a != nil {
		f.answer = nil // the flight's later reads are its own
		select {
		case <-a.done:
			if a.f.Err == nil {
				return a.f.Recs, a.f.Next, nil
			}
		case <-ctx.Done():
			return nil, offset, ctx.Err()
		}
	}
	return sized.FetchMax(ctx, key.topic, key.partition, offset, f.first)
}
