package publish

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// IdemHeader is the record header that carries a record's idempotency key into Kafka: how a request that
// takes over a claim finds a record its first owner produced.
const IdemHeader = "idempotency-key"

// Producer gives a record to Kafka and calls done with where Kafka put it once Kafka acknowledged it (or
// with why not). Records given in an order keep it within their partition.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, done func(*kgo.Record, error))
}

// Config is a Publisher's configuration.
type Config struct {
	// Producer produces the records: an idempotent Kafka producer whose partitioner takes Record.Partition.
	Producer Producer
	// Log reads a partition when a claim is taken over (the replay log of the streams).
	Log replay.Log
	// Store keeps the idempotency keys; nil: keys are refused.
	Store Store
	// Partitions returns a topic's partitions, ascending; Start returns the offset from which a partition's
	// next record will be (the offset after the last one the pod read; a lower one only costs a longer look).
	Partitions func(topic string) []int32
	Start      func(topic string, partition int32) int64
	// MaxPendingBytes bounds the bytes of records given to Kafka and not acknowledged yet; QueueWait is how
	// long a record waits for room before it is refused (ErrBusy).
	MaxPendingBytes int64
	QueueWait       time.Duration
	// Lease is how long a claim on an idempotency key is held: longer than a produce may take.
	Lease time.Duration
	// Owner names this process in its claims (made unique by Publisher).
	Owner string
	// KeysAnyPartition: keys are not placed by Kafka's default partitioner; a keyed record goes where the
	// producer puts any record.
	KeysAnyPartition bool
	Logger           *slog.Logger
}

// Result is where a published record is.
type Result struct {
	Partition int32
	Offset    int64
	Time      time.Time
	Duplicate bool // the idempotency key had been published: this is the first record's place
}

// Errors of Publish.
var (
	// ErrBusy: too many bytes wait for Kafka's acknowledgement; try again later.
	ErrBusy = errors.New("publish: too many records wait for Kafka; try again shortly")
	// ErrInFlight: a request with the same idempotency key is being published now; try again shortly.
	ErrInFlight = errors.New("publish: a record with this idempotency key is being published now; try again shortly")
	// ErrNoPartitions: the topic's partitions are not known yet.
	ErrNoPartitions = errors.New("publish: the topic's partitions are not known yet")
	// ErrNoStore: an idempotency key came and no store keeps them.
	ErrNoStore = errors.New("publish: idempotency keys are not kept by this gateway")
)

// Publisher publishes clients' records into Kafka.
type Publisher struct {
	cfg   Config
	owner string
	log   *slog.Logger

	mu      sync.Mutex
	pending int64         // bytes given to Kafka and not acknowledged
	room    chan struct{} // closed when pending goes down
	rr      atomic.Uint32 // round robin over partitions for records without a key
	lost    atomic.Int64  // claims lost before their result was recorded
}

// New returns a Publisher.
func New(cfg Config) *Publisher {
	var b [6]byte
	_, _ = rand.Read(b[:])
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{cfg: cfg, owner: cfg.Owner + "-" + hex.EncodeToString(b[:]), log: log, room: make(chan struct{})}
}

// LostClaims is how many records were published after their claim had been taken over: possible duplicates.
func (p *Publisher) LostClaims() int64 { return p.lost.Load() }

// Pending is the bytes of records waiting for Kafka now.
func (p *Publisher) Pending() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}

// Publish publishes recs into topic and returns each record's result or error, in order. The records are
// given to Kafka in their order, so that the records of one partition keep it; the idempotency keys are
// claimed first, one record after the other.
func (p *Publisher) Publish(ctx context.Context, topic string, recs []Record) ([]Result, []error) {
	results := make([]Result, len(recs))
	errs := make([]error, len(recs))
	parts := p.cfg.Partitions(topic)
	if len(parts) == 0 {
		for i := range errs {
			errs[i] = ErrNoPartitions
		}
		return results, errs
	}
	jobs := make([]*job, len(recs))
	for i, r := range recs {
		jobs[i] = p.prepare(ctx, topic, r, parts)
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		if j.produce {
			p.produce(ctx, topic, j, &wg)
		}
	}
	wg.Wait()
	for i, j := range jobs {
		results[i], errs[i] = p.finish(ctx, j)
	}
	return results, errs
}

// job is one record on its way: its claim, then its produce.
type job struct {
	rec       Record
	key       string // the store's key; "" without an idempotency key
	partition int32
	claimed   bool // the caller holds the claim (and must complete or release it)
	produce   bool // it is to be produced
	res       Result
	err       error
}

// prepare places the record and claims its idempotency key: a key published before answers its result, a
// claim taken over is answered by the record its first owner produced, if it is there.
func (p *Publisher) prepare(ctx context.Context, topic string, r Record, parts []int32) *job {
	j := &job{rec: r, partition: p.partition(topic, r, parts), produce: true}
	if r.IdemKey == "" {
		return j
	}
	if p.cfg.Store == nil {
		j.err, j.produce = ErrNoStore, false
		return j
	}
	j.key = storeKey(topic, r.IdemKey)
	for {
		e, err := p.cfg.Store.Claim(ctx, j.key, p.owner, p.cfg.Lease, j.partition, p.cfg.Start(topic, j.partition))
		if err != nil {
			j.err, j.produce = err, false
			return j
		}
		switch e.State {
		case Done:
			j.res, j.produce = Result{Partition: e.Partition, Offset: e.Offset, Time: e.Time, Duplicate: true}, false
			return j
		case Held:
			select {
			case <-ctx.Done():
				j.err, j.produce = ErrInFlight, false
				return j
			case <-time.After(50 * time.Millisecond):
			}
			continue
		case TakenOver:
			j.claimed, j.partition = true, e.Partition
			found, ok, err := p.find(ctx, topic, e.Partition, e.From, r.IdemKey)
			switch {
			case err != nil:
				j.err, j.produce = err, false
			case ok:
				found.Duplicate = true
				j.res, j.produce = found, false
			}
			return j
		}
		j.claimed = true
		return j
	}
}

// finish records a job's result in the store, or lets its claim go when it failed, and returns it.
func (p *Publisher) finish(ctx context.Context, j *job) (Result, error) {
	if !j.claimed {
		return j.res, j.err
	}
	if j.err != nil {
		// The record may or may not be in the log: the next request for the key looks before it produces.
		_ = p.cfg.Store.Release(context.WithoutCancel(ctx), j.key, p.owner)
		return j.res, j.err
	}
	return j.res, p.complete(ctx, j.key, j.res)
}

// complete records a claim's result; a claim taken over meanwhile is logged and counted: its key may now have
// two records.
func (p *Publisher) complete(ctx context.Context, key string, res Result) error {
	ok, err := p.cfg.Store.Complete(context.WithoutCancel(ctx), key, p.owner, res.Partition, res.Offset, res.Time)
	if err != nil {
		// The record is in Kafka: answer it. A retry finds the claim and looks for the record.
		p.log.Warn("publish: the idempotency store did not take a result; a retry will look for the record", "err", err)
		return nil
	}
	if !ok {
		p.lost.Add(1)
		p.log.Error("publish: a claim was taken over before its record was acknowledged; the key may have two records",
			"partition", res.Partition, "offset", res.Offset)
	}
	return nil
}

// partition is where r goes: its key's partition under Kafka's default partitioner, or the next partition.
func (p *Publisher) partition(topic string, r Record, parts []int32) int32 {
	if r.Key != nil && !p.cfg.KeysAnyPartition {
		kp := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
		return parts[kp.Partition(&kgo.Record{Key: r.Key}, len(parts))]
	}
	return parts[int(p.rr.Add(1))%len(parts)]
}

// produce waits for room and gives the job's record to Kafka; wg is done when Kafka answered.
func (p *Publisher) produce(ctx context.Context, topic string, j *job, wg *sync.WaitGroup) {
	size := int64(j.rec.Size())
	if err := p.acquire(ctx, size); err != nil {
		j.err = err
		return
	}
	rec := &kgo.Record{Topic: topic, Partition: j.partition, Key: j.rec.Key, Value: j.rec.Value}
	for _, h := range j.rec.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if j.rec.IdemKey != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: IdemHeader, Value: []byte(j.rec.IdemKey)})
	}
	wg.Add(1)
	p.cfg.Producer.Produce(ctx, rec, func(got *kgo.Record, err error) {
		defer wg.Done()
		defer p.release(size)
		if err != nil {
			j.err = fmt.Errorf("publish: kafka: %w", err)
			return
		}
		j.res = Result{Partition: got.Partition, Offset: got.Offset, Time: got.Timestamp}
	})
}

// acquire waits until size more bytes fit under MaxPendingBytes (a record larger than the bound goes alone),
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

// find reads partition from offset from to its end for a record carrying the idempotency key.
func (p *Publisher) find(ctx context.Context, topic string, partition int32, from int64, idemKey string) (Result, bool, error) {
	off := from
	for {
		recs, next, err := p.cfg.Log.Fetch(ctx, topic, partition, off)
		if err != nil {
			var oor *replay.OutOfRangeError
			if errors.As(err, &oor) {
				return Result{}, false, fmt.Errorf("publish: looking for the record of a claim taken over: %w", err)
			}
			return Result{}, false, fmt.Errorf("publish: looking for the record of a claim taken over: kafka: %w", err)
		}
		for _, rec := range recs {
			for _, h := range rec.Headers {
				if h.Key == IdemHeader && string(h.Value) == idemKey {
					return Result{Partition: partition, Offset: rec.Offset, Time: rec.Timestamp}, true, nil
				}
			}
		}
		if len(recs) == 0 && next == off {
			return Result{}, false, nil
		}
		off = next
	}
}

// storeKey is the store's key of an idempotency key of a topic: a hash, so that any key fits.
func storeKey(topic, idemKey string) string {
	h := sha256.Sum256([]byte(topic + "\x00" + idemKey))
	return hex.EncodeToString(h[:])
}
