package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
)

// Fetcher reads records by explicit offset (replay.KafkaLog's Fetch).
type Fetcher interface {
	Fetch(ctx context.Context, topic string, partition int32, offset int64) ([]*kgo.Record, int64, error)
}

// Resolver turns compact ids into position vectors, reading their checkpoints from the position topic.
type Resolver struct {
	topic string
	log   Fetcher
	gone  func(error) bool
	cache *lru.Cache[position.Ref, cached]
	// failed holds the refs whose read ended in ErrInvalid or ErrGone, until failTTL after it: a storm of one
	// bad id costs one read.
	failed  *lru.Cache[position.Ref, failure]
	failTTL time.Duration
	// slots bounds the reads at once: a reader holds one for the whole of its read.
	slots chan struct{}

	mu  sync.Mutex
	fly map[position.Ref]*flight // the refs being read, each by one caller (its reader) for all its callers
}

// failure is a read's ErrInvalid or ErrGone, remembered until until.
type failure struct {
	err   error
	until time.Time
}

// flight is one read of a ref. Its reader sets cp, err and left, then closes done.
type flight struct {
	done chan struct{}
	cp   *position.Checkpoint
	err  error
	// left says the reader's context ended before its read did: cp and err say nothing of the checkpoint,
	// and the callers still waiting try again (one of them reading).
	left bool
}

// Defaults of NewResolver and its options.
const (
	// DefaultCacheSize is how many checkpoints a Resolver keeps when NewResolver is given zero.
	DefaultCacheSize = 4096
	// DefaultReaders is how many checkpoints a Resolver reads at once without WithReaders.
	DefaultReaders = 4
	// DefaultFailures is how many failed refs a Resolver remembers without WithFailures.
	DefaultFailures = 4096
	// DefaultFailureTTL is how long a Resolver remembers a failed ref without WithFailures.
	DefaultFailureTTL = 10 * time.Second
)

// ResolverOption configures a Resolver.
type ResolverOption func(*resolverConfig)

type resolverConfig struct {
	readers, failures int
	failTTL           time.Duration
}

// WithReaders bounds the checkpoints read from Kafka at once to n. A caller that needs a read beyond it waits
// for a slot, as long as its context lets it. Zero or less means DefaultReaders.
func WithReaders(n int) ResolverOption {
	return func(c *resolverConfig) { c.readers = n }
}

// WithFailures sets how many refs whose read failed with ErrInvalid or ErrGone are remembered (size), and
// for how long (ttl), so that they are answered without Kafka meanwhile. A size or ttl of zero or less means
// DefaultFailures or DefaultFailureTTL.
func WithFailures(size int, ttl time.Duration) ResolverOption {
	return func(c *resolverConfig) { c.failures, c.failTTL = size, ttl }
}

// NewResolver returns a Resolver of ids whose checkpoints are in topic, read through log. gone says a fetch
// error means the offset is below the partition's low watermark (retention removed it); nil means no error
// does. size bounds the checkpoints kept (zero means DefaultCacheSize). An empty topic means there is no
// position topic: every compact id is ErrInvalid, and log is never read.
func NewResolver(topic string, log Fetcher, gone func(error) bool, size int, opts ...ResolverOption) (*Resolver, error) {
	cfg := resolverConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	if size <= 0 {
		size = DefaultCacheSize
	}
	if cfg.readers <= 0 {
		cfg.readers = DefaultReaders
	}
	if cfg.failures <= 0 {
		cfg.failures = DefaultFailures
	}
	if cfg.failTTL <= 0 {
		cfg.failTTL = DefaultFailureTTL
	}
	c, err := lru.New[position.Ref, cached](size)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	failed, err := lru.New[position.Ref, failure](cfg.failures)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if gone == nil {
		gone = func(error) bool { return false }
	}
	return &Resolver{
		topic: topic, log: log, gone: gone, cache: c, failed: failed, failTTL: cfg.failTTL,
		slots: make(chan struct{}, cfg.readers), fly: map[position.Ref]*flight{},
	}, nil
}

// Topic returns the position topic.
func (r *Resolver) Topic() string { return r.topic }

// cached is a checkpoint in the cache, and when it was read.
type cached struct {
	cp *position.Checkpoint
	at time.Time
}

func (r *Resolver) add(ref position.Ref, cp *position.Checkpoint) {
	r.cache.Add(ref.Record(), cached{cp: cp, at: time.Now()})
}

// Resolve returns the position id says, in data topic topic whose Kafka id is topicID (zero: not checked).
// It fails with an error wrapping ErrInvalid or ErrGone (see errors.go), with a Kafka error, or with ctx's
// error when ctx ends while it waits (see Checkpoint). A malformed id is ErrInvalid before any other work.
func (r *Resolver) Resolve(ctx context.Context, id, topic string, topicID [16]byte) (position.Vector, error) {
	c, err := position.ParseCompact(id)
	if err != nil {
		return position.Vector{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	cp, err := r.Checkpoint(ctx, c.Ref())
	if err != nil {
		return position.Vector{}, err
	}
	if !c.Ref().Fits(cp) && r.forgetStale(c.Ref(), cp) {
		// The record may not be the one cached: the position topic created again since. Read it again.
		if cp, err = r.Checkpoint(ctx, c.Ref()); err != nil {
			return position.Vector{}, err
		}
	}
	return apply(c, cp, topic, topicID)
}

// forgetStale drops cp, the cached checkpoint at ref, when it was read longer ago than failTTL, so that the
// next look reads the record again; it reports whether it did. An id whose check is not the cached record's
// is then answered by the record Kafka holds now, and any client can send such ids, so a record is read
// again at most once per failTTL.
func (r *Resolver) forgetStale(ref position.Ref, cp *position.Checkpoint) bool {
	e, ok := r.cache.Peek(ref.Record())
	if !ok || e.cp != cp || time.Since(e.at) <= r.failTTL {
		return false
	}
	r.cache.Remove(ref.Record())
	return true
}

// Cached is Resolve without Kafka: it reports false when the checkpoint is not in the cache, or the id does
// not resolve.
func (r *Resolver) Cached(id, topic string, topicID [16]byte) (position.Vector, bool) {
	c, err := position.ParseCompact(id)
	if err != nil {
		return position.Vector{}, false
	}
	e, ok := r.cache.Get(c.Ref().Record())
	if !ok {
		return position.Vector{}, false
	}
	v, err := apply(c, e.cp, topic, topicID)
	return v, err == nil
}

// Matches says, as an error wrapping ErrInvalid, when cp is not the checkpoint ref was made against: ref has
// a check, and cp's record another.
func Matches(ref position.Ref, cp *position.Checkpoint) error {
	if !ref.Fits(cp) {
		return fmt.Errorf("%w: the record at partition %d offset %d of the position topic is not the checkpoint it was made against (the position topic was deleted and created again, or lost records)", ErrInvalid, ref.Partition, ref.Offset)
	}
	return nil
}

func apply(c position.Compact, cp *position.Checkpoint, topic string, topicID [16]byte) (position.Vector, error) {
	if err := Matches(c.Ref(), cp); err != nil {
		return position.Vector{}, err
	}
	switch {
	case cp.Topic != topic:
		return position.Vector{}, fmt.Errorf("%w: it refers to a checkpoint of topic %q", ErrInvalid, cp.Topic)
	case topicID != ([16]byte{}) && cp.TopicID != topicID:
		return position.Vector{}, fmt.Errorf("%w: it refers to topic %q as it was before it was deleted and created again", ErrInvalid, topic)
	}
	v, err := c.Apply(cp.Vector)
	if err != nil {
		return position.Vector{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return v, nil
}

// Checkpoint returns the checkpoint at ref: from the cache, as a failure remembered from a recent read, or
// from Kafka. One caller reads a ref for all that want it meanwhile, on its own goroutine and under its own
// context, once one of the read slots is free; the others wait for its answer. A caller whose context ends
// first gets ctx.Err(). A reader that leaves that way takes its read with it: the callers still waiting try
// again, and one of them reads.
func (r *Resolver) Checkpoint(ctx context.Context, ref position.Ref) (*position.Checkpoint, error) {
	ref = ref.Record() // the record, whatever check an id has for it: apply compares them
	if r.topic == "" {
		return nil, fmt.Errorf("%w: this gateway has no position topic", ErrInvalid)
	}
	for {
		if cp, err := r.remembered(ref); cp != nil || err != nil {
			return cp, err
		}
		r.mu.Lock()
		fl := r.fly[ref]
		if fl == nil {
			// Asked again under mu: a flight that ended since the look above put its answer in a cache
			// before it left fly.
			if cp, err := r.remembered(ref); cp != nil || err != nil {
				r.mu.Unlock()
				return cp, err
			}
			fl = &flight{done: make(chan struct{})}
			r.fly[ref] = fl
			r.mu.Unlock()
			return r.lead(ctx, ref, fl)
		}
		r.mu.Unlock()
		select {
		case <-fl.done:
			if !fl.left {
				return fl.cp, fl.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// remembered returns the checkpoint at ref from the cache, or the error of a failed read of it that has not
// expired; nil and nil when it has neither.
func (r *Resolver) remembered(ref position.Ref) (*position.Checkpoint, error) {
	if e, ok := r.cache.Get(ref); ok {
		return e.cp, nil
	}
	if f, ok := r.failed.Get(ref); ok && time.Now().Before(f.until) {
		return nil, f.err
	}
	return nil, nil
}

// lead reads ref for fl's callers once a read slot is free, and lands fl: the answer goes to a cache (a
// checkpoint, or an ErrInvalid or ErrGone failure) before fl leaves fly, so a caller that finds neither a
// flight nor an answer may start a read.
func (r *Resolver) lead(ctx context.Context, ref position.Ref, fl *flight) (*position.Checkpoint, error) {
	cp, err := r.readSlot(ctx, ref)
	r.mu.Lock()
	switch {
	case err == nil:
		r.add(ref, cp)
	case errors.Is(err, ErrInvalid) || errors.Is(err, ErrGone):
		r.failed.Add(ref, failure{err: err, until: time.Now().Add(r.failTTL)})
	case ctx.Err() != nil:
		fl.left = true
	}
	fl.cp, fl.err = cp, err
	delete(r.fly, ref)
	r.mu.Unlock()
	close(fl.done)
	return cp, err
}

// readSlot reads ref in one of the read slots, waiting for one as long as ctx lets it.
func (r *Resolver) readSlot(ctx context.Context, ref position.Ref) (*position.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.slots }()
	return r.read(ctx, ref)
}

// read fetches the record at ref. A record that is not there (past the end: never written, since ids only
// name acknowledged checkpoints) or that is not a checkpoint is ErrInvalid.
func (r *Resolver) read(ctx context.Context, ref position.Ref) (*position.Checkpoint, error) {
	recs, _, err := r.log.Fetch(ctx, r.topic, ref.Partition, ref.Offset)
	switch {
	case err != nil && r.gone(err):
		return nil, fmt.Errorf("%w: %s partition %d offset %d", ErrGone, r.topic, ref.Partition, ref.Offset)
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		// Asked again after a fresh look at the metadata (the Fetcher retries): no such partition of the
		// position topic, so no checkpoint there either. A gateway whose position topic is not the writers'
		// (a misconfiguration) answers ids this way too, loudly: a resync.
		return nil, fmt.Errorf("%w: %s has no partition %d", ErrInvalid, r.topic, ref.Partition)
	case errors.Is(err, kerr.OffsetOutOfRange):
		return nil, fmt.Errorf("%w: %s partition %d has no offset %d", ErrInvalid, r.topic, ref.Partition, ref.Offset)
	case err != nil:
		return nil, fmt.Errorf("checkpoint: read %s partition %d offset %d: %w", r.topic, ref.Partition, ref.Offset, err)
	}
	for _, rec := range recs {
		if rec.Offset != ref.Offset {
			continue
		}
		cp, err := position.ParseCheckpoint(rec.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s partition %d offset %d: %w", ErrInvalid, r.topic, ref.Partition, ref.Offset, err)
		}
		return &cp, nil
	}
	return nil, fmt.Errorf("%w: %s partition %d has no record at offset %d", ErrInvalid, r.topic, ref.Partition, ref.Offset)
}
