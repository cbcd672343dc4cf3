package publish

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceAll gives the jobs to be produced to Kafka, in their order, and returns once Kafka answered every one
// given. Room under MaxPendingBytes is taken for all of them at once, so that nothing waits between two of them
// (a wait would let an earlier record of a partition fail and leave the buffer before a later one is given, and
// the later one would then land without it). While Kafka has not answered, the jobs' claims are extended.
func (p *Publisher) produceAll(ctx context.Context, topic string, jobs []*job) {
	var size int64
	some := false
	for _, j := range jobs {
		if j.produce {
			size += int64(j.rec.Size())
			some = true
		}
	}
	if !some {
		return
	}
	if err := p.acquire(ctx, size); err != nil {
		for _, j := range jobs {
			if j.produce {
				j.err, j.produce = err, false
			}
		}
		return
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed = map[int32]bool{} // partitions where Kafka failed a record of the request
	)
	for _, j := range jobs {
		if !j.produce {
			continue
		}
		mu.Lock()
		stop := failed[j.partition]
		mu.Unlock()
		if stop {
			j.err = ErrEarlierFailed
			p.release(int64(j.rec.Size()))
			continue
		}
		wg.Add(1)
		p.produce(ctx, topic, j, func(err error) {
			if err != nil {
				mu.Lock()
				failed[j.partition] = true
				mu.Unlock()
			}
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	p.keepClaims(ctx, jobs, done)
}

// produce gives the job's record to Kafka; answered is called when Kafka answered, with its error.
func (p *Publisher) produce(ctx context.Context, topic string, j *job, answered func(error)) {
	size := int64(j.rec.Size())
	rec := &kgo.Record{Topic: topic, Partition: j.partition, Key: j.rec.Key, Value: j.rec.Value}
	for _, h := range j.rec.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if j.rec.IdemKey != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: IdemHeader, Value: []byte(j.rec.IdemKey)})
	}
	p.cfg.Producer.Produce(ctx, rec, func(got *kgo.Record, err error) {
		p.release(size)
		if err != nil {
			j.err = fmt.Errorf("publish: kafka: %w", err)
		} else {
			j.res = Result{Partition: got.Partition, Offset: got.Offset, Time: got.Timestamp}
		}
		answered(err)
	})
}

// keepClaims extends the claims of the jobs given to Kafka every third of the lease until done is closed: a
// produce may take longer than the lease (a record already sent to a stalled broker waits for its answer, past
// the producer's delivery timeout), and a claim that ran out meanwhile would let a retry take it over, miss the
// record still in flight, and produce it a second time.
func (p *Publisher) keepClaims(ctx context.Context, jobs []*job, done <-chan struct{}) {
	var keys []string
	for _, j := range jobs {
		if j.claimed && j.produce {
			keys = append(keys, j.key)
		}
	}
	if len(keys) == 0 {
		<-done
		return
	}
	tick := time.NewTicker(max(p.cfg.Lease/3, time.Millisecond))
	defer tick.Stop()
	bg := context.WithoutCancel(ctx)
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		for _, key := range keys {
			ectx, cancel := context.WithTimeout(bg, max(p.cfg.Lease/3, time.Millisecond))
			ok, err := p.cfg.Store.Extend(ectx, key, p.owner, p.cfg.Lease)
			cancel()
			if err != nil || !ok {
				p.log.Warn("publish: an idempotency claim could not be extended while its record is in flight", "held", ok, "err", err)
			}
		}
	}
}

// acquire waits until size more bytes fit under MaxPendingBytes (a request larger than the bound goes alone),
// at most QueueWait.
func (p *Publisher) acquire(ctx context.Context, size int64) error {
	timer := time.NewTimer(p.cfg.QueueWait)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if p.pending == 0 || p.pending+size <= p.cfg.MaxPendingBytes {
			p.pending += size
			p.mu.Unlock()
			return nil
		}
		room := p.room
		p.mu.Unlock()
		select {
		case <-room:
		case <-timer.C:
			return ErrBusy
		case <-ctx.Done():
			return ErrBusy
		}
	}
}

func (p *Publisher) release(size int64) {
	p.mu.Lock()
	p.pending -= size
	close(p.room)
	p.room = make(chan struct{})
	p.mu.Unlock()
}
