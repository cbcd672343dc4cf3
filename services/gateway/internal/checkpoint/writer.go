package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
)

// deliveryTimeout bounds how long a checkpoint may wait for Kafka: after it, the write fails and the feed
// starts another one later (meanwhile its frames get v1 ids).
const deliveryTimeout = 10 * time.Second

// Writer writes checkpoints to the position topic: acks from all in-sync replicas, idempotent, no linger.
type Writer struct {
	cl     *kgo.Client
	topic  string
	writer string
	cache  *Resolver // acknowledged checkpoints go here, so this pod resolves its own ids without Kafka
}

// NewWriter returns a Writer to topic, naming itself writer in its records (the pod's name), that adds every
// acknowledged checkpoint to cache (nil: none). kafkaOpts reach the cluster. Close closes it.
func NewWriter(topic, writer string, cache *Resolver, kafkaOpts ...kgo.Opt) (*Writer, error) {
	opts := append([]kgo.Opt{}, kafkaOpts...)
	opts = append(opts,
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: kafka client: %w", err)
	}
	return &Writer{cl: cl, topic: topic, writer: writer, cache: cache}, nil
}

// Close flushes nothing and closes the client: checkpoints not yet acknowledged are never referred to.
func (w *Writer) Close() { w.cl.Close() }

// EnsureTopic creates the position topic with one partition and the brokers' default replication when it
// does not exist. A topic that exists is left as it is.
func (w *Writer) EnsureTopic(ctx context.Context) error {
	_, err := kadm.NewClient(w.cl).CreateTopic(ctx, 1, -1, nil, w.topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("checkpoint: create %s: %w", w.topic, err)
	}
	return nil
}

// Write starts writing a checkpoint of data topic topic (whose Kafka id is topicID) at v, which the caller
// must not change afterwards. done is called once, on the client's goroutine, with where the record is once
// Kafka acknowledged it (and its check, for the ids that name it), or with the error that ended the write.
func (w *Writer) Write(topic string, topicID [16]byte, v position.Vector, done func(position.Ref, error)) {
	cp := position.Checkpoint{Topic: topic, TopicID: topicID, Writer: w.writer, Vector: v}
	rec := &kgo.Record{Key: []byte(w.writer + "/" + topic), Value: position.AppendCheckpoint(nil, cp)}
	cp.Sum = position.CheckpointSum(rec.Value)
	w.cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
		if err != nil {
			done(position.Ref{}, fmt.Errorf("checkpoint: write to %s: %w", w.topic, err))
			return
		}
		ref := position.Ref{Partition: r.Partition, Offset: r.Offset, Check: cp.Sum}
		if w.cache != nil {
			w.cache.add(ref, &cp)
		}
		done(ref, nil)
	})
}
