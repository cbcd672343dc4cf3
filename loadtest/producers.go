package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxProducers bounds --producers: more Kafka clients than this on one machine only compete for its cores.
const maxProducers = 64

// maxProducerInFlight bounds --producer-in-flight: a producer's records in flight are held in its client's
// buffer, which takes that many (kafkaClientOpts).
const maxProducerInFlight = 100_000

// Records a producer keeps in flight when --producer-in-flight is 0: with a rate, as many as the client's
// buffer holds, so that a stall of Kafka does not hold back the records due meanwhile (their send time would
// then be taken after the stall, which would hide it); as fast as possible, a thousand, so that a record does
// not wait long in its producer's buffer behind the others, which its latency would include.
const (
	inFlightAtRate = maxProducerInFlight
	inFlightAtFull = 1000
)

// producerWindow returns the records each producer keeps in flight: --producer-in-flight, or its default for
// the rate when that is 0.
func (c config) producerWindow() int {
	switch {
	case c.ProducerInFlight > 0:
		return c.ProducerInFlight
	case c.Rate > 0:
		return inFlightAtRate
	default:
		return inFlightAtFull
	}
}

// producerClient is what a producer needs of its Kafka client: *kgo.Client, or a fake in tests.
type producerClient interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
}

// producer is one of the run's --producers: a Kafka client of its own (its own connections, producer id and
// produce requests in flight), its share of the rate and its own window of records in flight.
type producer struct {
	cl         producerClient
	i, n       int     // this producer's index among the n
	rate       float64 // the whole run's target in records per second (dueOf splits it); 0: as fast as it goes
	window     int     // records handed to the client and not yet acknowledged or failed, at most
	size, keys int
	avroID     int      // values in Avro (recordValue)
	topics     []string // record seq goes to topics[seq mod len]; nil: the client's default topic
}

// dueOf returns how many records producer i of n must have handed over elapsed into a run at rate records per
// second. The run's records are numbered in the order they are due (record k at (k+1)/rate), and producer i
// takes records i, i+n, i+2n, ...: the producers' shares add up to the whole rate exactly, a rate below n
// records per second included, and their records are due in turn rather than n at once.
func dueOf(i, n int, rate float64, elapsed time.Duration) int64 {
	total := int64(rate * elapsed.Seconds())
	return (total - int64(i) + int64(n) - 1) / int64(n)
}

// run produces until ctx ends, then flushes. A record is stamped with its send time once it has a place in
// the window, just before it is handed to the client, so that its latency does not include the producer
// waiting for the window. The value's seq comes from st.seq, which every producer of the run shares: each
// record's seq is the run's own, none repeated. Each value is JSON {"ts":<unix nanos>,"seq":<n>,"pad":"..."}
// padded to size bytes, and its key is k-<seq mod keys>.
func (p *producer) run(ctx context.Context, st *produceStats) {
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// Records are handed over with a context that stopping does not cancel: canceling it would fail the
	// records still buffered, which were sent as far as the tool's clients can tell.
	rctx := context.WithoutCancel(ctx)
	slots := make(chan struct{}, p.window)
	done := func(_ *kgo.Record, err error) {
		<-slots
		st.done(err)
	}
	var handed int64
	for ctx.Err() == nil {
		n := int64(p.window) // as fast as it goes: as many as the window takes, then wait for a place
		if p.rate > 0 {
			n = dueOf(p.i, p.n, p.rate, time.Since(start)) - handed
			if n <= 0 {
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
				continue
			}
		}
		for ; n > 0 && takeSlot(ctx, slots); n-- {
			seq := st.seq.Add(1) - 1
			r := &kgo.Record{
				Topic: topicOfSeq(p.topics, seq),
				Key:   []byte("k-" + strconv.Itoa(int(seq%int64(p.keys)))),
				Value: recordValue(p.avroID, time.Now().UnixNano(), seq, p.size),
			}
			p.cl.Produce(rctx, r, done)
			handed++
			st.sent.Add(1)
		}
	}
	fctx, cancel := context.WithTimeout(rctx, 30*time.Second)
	defer cancel()
	_ = p.cl.Flush(fctx)
}

// takeSlot waits for a place in the window slots, and reports false when ctx ended first.
func takeSlot(ctx context.Context, slots chan<- struct{}) bool {
	select {
	case <-ctx.Done():
		return false
	case slots <- struct{}{}:
		return true
	}
}

// openProducers makes the Kafka clients of --producers beyond the first (which is the run's own client) and
// has each produce a warm-up record, so that every producer has its connections, metadata and producer id
// before anything is measured. It runs before the readers connect: the warm-up records are then behind every
// reader's starting position, neither owed to them nor counted as produced.
func (r *runner) openProducers(ctx context.Context) error {
	for range r.cfg.Producers - 1 {
		cl, err := kgo.NewClient(kafkaClientOpts(r.cfg.Brokers, r.k.topic)...)
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		r.extraProducers = append(r.extraProducers, cl)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = warm(wctx, cl, r.k.topic, r.cfg.AvroID)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// closeProducers closes the clients openProducers made.
func (r *runner) closeProducers() {
	for _, cl := range r.extraProducers {
		cl.Close()
	}
	r.extraProducers = nil
}

// producers returns the run's producers: the first on the run's own client, the others on the clients of
// openProducers, each with the whole target rate to take its share of and the window of records in flight.
func (r *runner) producers() []*producer {
	cls := []producerClient{r.k.cl}
	for _, cl := range r.extraProducers {
		cls = append(cls, cl)
	}
	ps := make([]*producer, len(cls))
	for i, cl := range cls {
		ps[i] = &producer{cl: cl, i: i, n: len(cls), rate: r.cfg.Rate, window: r.cfg.producerWindow(), size: r.cfg.Size, keys: r.cfg.Keys, avroID: r.cfg.AvroID, topics: topicsOf(r.cfg)}
	}
	return ps
}

// startProducer starts the run's producers, each on a goroutine of its own, and returns a function that
// stops them and waits until each has flushed.
func (r *runner) startProducer(ctx context.Context) (stop func()) {
	return startProducers(ctx, r.producers(), &r.prod)
}

// startProducers runs ps until the returned stop function is called; stop waits for their flushes.
func startProducers(ctx context.Context, ps []*producer, st *produceStats) (stop func()) {
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.run(pctx, st) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}
