package publish

import (
	"context"
	"crypto/rand"
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
	// Lease is how long a claim on an idempotency key is held without a word from its owner; the owner extends
	// it every third of it while its produce is in flight.
	Lease time.Duration
	// MaxScan bounds the records one request reads looking for the record of a claim it took over; the next
	// request goes on from where it stopped. Zero means 100000.
	MaxScan int
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
	// ErrConflict: the idempotency key was used before for another record (a *ConflictError names it).
	ErrConflict = errors.New("publish: the idempotency key was used for another record")
	// ErrLooking: the record of an earlier attempt with the key is still being looked for (MaxScan); try again
	// shortly, the look goes on from where it stopped.
	ErrLooking = errors.New("publish: still looking for the record of an earlier attempt with this idempotency key; try again shortly")
	// ErrEarlierFailed: an earlier record of the request for the same partition was not published, so this one
	// was not produced either: producing it would put it before the earlier one once that is retried.
	ErrEarlierFailed = errors.New("publish: not produced: an earlier record of this request for the same partition was not published; retry the request")
)

// ConflictError is an idempotency key used before, within the window and by the same publisher, for another
// record: nothing is published, and the entry of the first record stays as it is.
type ConflictError struct {
	IdemKey string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("publish: idempotency key %q was used for another record (its key, value or headers differ): nothing published; a new record needs a new key", e.IdemKey)
}

// Is makes a ConflictError ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// OrderError is a record not produced because a later record of the same request and partition is already in
// the partition (a retry of a request that was published in part): writing it now would put it after that one.
type OrderError struct {
	Partition int32
	Later     int   // the index of the later record in the request
	Offset    int64 // where the later record is
}

func (e *OrderError) Error() string {
	return fmt.Sprintf("publish: not produced: record %d of this request, which comes after it, is already in partition %d at offset %d, and writing this one now would put it after that one", e.Later, e.Partition, e.Offset)
}

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
	if cfg.MaxScan <= 0 {
		cfg.MaxScan = 100000
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

// Publish publishes recs into topic for publisher (who sent them: their idempotency keys are publisher's own)
// and returns each record's result or error, in order.
//
// A partition never gets a request's records out of their order, on a first attempt or on a retry of the
// request with the same idempotency keys (a batch that was published in part):
//   - the keys are claimed one record after the other; once a record of a partition fails (a claim in flight
//     elsewhere, the store), the later records of that partition are not produced (ErrEarlierFailed);
//   - a record whose later record of the same partition is already in the log (the duplicate of a retry) is
//     not produced (OrderError): it would land after that one;
//   - the records are given to Kafka in their order, with the room under MaxPendingBytes taken for all of them
//     at once so that nothing waits between two of them, and a record of a partition where an earlier one was
//     answered with a failure is not given (ErrEarlierFailed). Records given while an earlier one of their
//     partition is still buffered fail with it: the producer fails every record buffered behind a failed one
//     in its partition (franz-go keeps a partition gapless).
func (p *Publisher) Publish(ctx context.Context, topic, publisher string, recs []Record) ([]Result, []error) {
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
	failed := map[int32]bool{} // partitions with a record that will not be published
	for i, r := range recs {
		j := &job{rec: r, partition: p.partition(topic, r, parts), produce: true, from: -1}
		if failed[j.partition] {
			j.err, j.produce = ErrEarlierFailed, false
		} else {
			p.prepare(ctx, topic, publisher, j)
		}
		if j.err != nil {
			failed[j.partition] = true
		}
		jobs[i] = j
	}
	keepOrder(jobs)
	p.produceAll(ctx, topic, jobs)
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
	claimed   bool  // the caller holds the claim (and must complete or release it)
	produce   bool  // it is to be produced
	from      int64 // where a look for the record stopped: the next look starts there; -1 none
	res       Result
	err       error
}

// keepOrder refuses to produce a record when a later record of the same partition is in the log already (a
// duplicate answered from the store or found there): see Publish.
func keepOrder(jobs []*job) {
	later := map[int32]int{} // partition: the index of the last record of it already in the log
	for i := len(jobs) - 1; i >= 0; i-- {
		j := jobs[i]
		if !j.produce && j.err == nil {
			if _, ok := later[j.partition]; !ok {
				later[j.partition] = i
			}
			continue
		}
		if k, ok := later[j.partition]; ok && j.produce {
			j.err, j.produce = &OrderError{Partition: j.partition, Later: k, Offset: jobs[k].res.Offset}, false
		}
	}
}

// prepare claims the job's idempotency key: a key published before answers its result, a claim taken over is
// answered by the record its first owner produced, if it is there.
func (p *Publisher) prepare(ctx context.Context, topic, publisher string, j *job) {
	r := j.rec
	if r.IdemKey == "" {
		return
	}
	if p.cfg.Store == nil {
		j.err, j.produce = ErrNoStore, false
		return
	}
	j.key = storeKey(topic, publisher, r.IdemKey)
	digest := r.Digest(topic)
	for waited := false; ; waited = true {
		e, err := p.cfg.Store.Claim(ctx, j.key, p.owner, p.cfg.Lease, digest, j.partition, p.cfg.Start(topic, j.partition))
		if err != nil {
			j.err, j.produce = err, false
			if waited && ctx.Err() != nil {
				j.err = ErrInFlight // the request ended while it waited for the claim's owner
			}
			return
		}
		switch e.State {
		case Conflict:
			j.err, j.produce = &ConflictError{IdemKey: r.IdemKey}, false
			return
		case Done:
			j.partition = e.Partition
			j.res, j.produce = Result{Partition: e.Partition, Offset: e.Offset, Time: e.Time, Duplicate: true}, false
			return
		case Held:
			select {
			case <-ctx.Done():
				j.err, j.produce = ErrInFlight, false
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		case TakenOver:
			j.claimed, j.partition = true, e.Partition
			found, ok, reached, err := p.find(ctx, topic, e.Partition, e.From, r.IdemKey, digest)
			j.from = reached
			switch {
			case err != nil:
				j.err, j.produce = err, false
			case ok:
				found.Duplicate = true
				j.res, j.produce = found, false
			}
			return
		}
		j.claimed = true
		return
	}
}

// finish records a job's result in the store, or lets its claim go when it failed, and returns it.
func (p *Publisher) finish(ctx context.Context, j *job) (Result, error) {
	if !j.claimed {
		return j.res, j.err
	}
	if j.err != nil {
		// The record may or may not be in the log: the next request for the key looks before it produces,
		// from where this one's look stopped.
		_ = p.cfg.Store.Release(context.WithoutCancel(ctx), j.key, p.owner, j.from)
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
