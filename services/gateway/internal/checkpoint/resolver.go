package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
	cache *lru.Cache[position.Ref, *position.Checkpoint]

	mu  sync.Mutex
	fly map[position.Ref]*flight
}

type flight struct {
	done chan struct{}
	cp   *position.Checkpoint
	err  error
}

// DefaultCacheSize is how many checkpoints a Resolver keeps when NewResolver is given zero.
const DefaultCacheSize = 4096

// NewResolver returns a Resolver of ids whose checkpoints are in topic, read through log. gone says a fetch
// error means the offset is below the partition's low watermark (retention removed it); nil means no error
// does. size bounds the checkpoints kept (zero means DefaultCacheSize).
func NewResolver(topic string, log Fetcher, gone func(error) bool, size int) (*Resolver, error) {
	if size <= 0 {
		size = DefaultCacheSize
	}
	c, err := lru.New[position.Ref, *position.Checkpoint](size)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if gone == nil {
		gone = func(error) bool { return false }
	}
	return &Resolver{topic: topic, log: log, gone: gone, cache: c, fly: map[position.Ref]*flight{}}, nil
}

// Topic returns the position topic.
func (r *Resolver) Topic() string { return r.topic }

func (r *Resolver) add(ref position.Ref, cp *position.Checkpoint) { r.cache.Add(ref, cp) }

// Resolve returns the position id says, in data topic topic whose Kafka id is topicID (zero: not checked).
// It fails with an error wrapping ErrInvalid or ErrGone (see errors.go), or with a Kafka error.
func (r *Resolver) Resolve(ctx context.Context, id, topic string, topicID [16]byte) (position.Vector, error) {
	c, err := position.ParseCompact(id)
	if err != nil {
		return position.Vector{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	cp, err := r.Checkpoint(ctx, c.Ref())
	if err != nil {
		return position.Vector{}, err
	}
	return apply(c, cp, topic, topicID)
}

// Cached is Resolve without Kafka: it reports false when the checkpoint is not in the cache, or the id does
// not resolve.
func (r *Resolver) Cached(id, topic string, topicID [16]byte) (position.Vector, bool) {
	c, err := position.ParseCompact(id)
	if err != nil {
		return position.Vector{}, false
	}
	cp, ok := r.cache.Get(c.Ref())
	if !ok {
		return position.Vector{}, false
	}
	v, err := apply(c, cp, topic, topicID)
	return v, err == nil
}

func apply(c position.Compact, cp *position.Checkpoint, topic string, topicID [16]byte) (position.Vector, error) {
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

// Checkpoint returns the checkpoint at ref, from the cache or from Kafka (one read per ref at a time).
func (r *Resolver) Checkpoint(ctx context.Context, ref position.Ref) (*position.Checkpoint, error) {
	if cp, ok := r.cache.Get(ref); ok {
		return cp, nil
	}
	r.mu.Lock()
	fl := r.fly[ref]
	if fl == nil {
		fl = &flight{done: make(chan struct{})}
		r.fly[ref] = fl
		// The read is the flight's, not the first caller's: a caller that leaves does not fail the others.
		go r.load(context.WithoutCancel(ctx), ref, fl)
	}
	r.mu.Unlock()
	select {
	case <-fl.done:
		return fl.cp, fl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *Resolver) load(ctx context.Context, ref position.Ref, fl *flight) {
	fl.cp, fl.err = r.read(ctx, ref)
	if fl.err == nil {
		r.cache.Add(ref, fl.cp)
	}
	r.mu.Lock()
	delete(r.fly, ref)
	r.mu.Unlock()
	close(fl.done)
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
