package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// ErrRetention is EnsureTopic's error when the retention of the position topic or of the data topics could
// not be read (DescribeConfigs refused, or not answered): the topic was created or found all the same.
var ErrRetention = errors.New("checkpoint: the topics' retention.ms could not be read")

// EnsureTopic creates the position topic when it does not exist: one partition, the brokers' default
// replication, and the longest finite retention.ms of the data topics, so that checkpoints last as long as
// the records their ids lead to (the brokers' default when none has one, or their configs cannot be read).
// A topic that exists is left as it is. It then returns the position topic's retention.ms (-1: forever) and
// the data topics that keep records longer than that (with their retention.ms): their clients' v2 ids older
// than it get a retention resync though the records are still there. Data topics that do not exist yet are
// left out. An error wrapping ErrRetention says only the comparison could not be made.
func (w *Writer) EnsureTopic(ctx context.Context, data []string) (retention int64, longer map[string]int64, err error) {
	adm := kadm.NewClient(w.cl)
	rets, rerr := retentions(ctx, adm, data...)
	var longest int64
	for _, r := range rets {
		longest = max(longest, r)
	}
	var configs map[string]*string
	if longest > 0 {
		configs = map[string]*string{"retention.ms": kadm.StringPtr(strconv.FormatInt(longest, 10))}
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, configs, w.topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, nil, fmt.Errorf("checkpoint: create %s: %w", w.topic, err)
	}
	if rerr != nil {
		return 0, nil, rerr
	}
	// A broker may not know a topic created a moment ago: ask again, briefly.
	for try := 1; ; try++ {
		own, err := retentions(ctx, adm, w.topic)
		if err != nil {
			return 0, nil, err
		}
		var ok bool
		if retention, ok = own[w.topic]; ok {
			break
		}
		if try == 10 {
			return 0, nil, fmt.Errorf("%w: %s has none", ErrRetention, w.topic)
		}
		select {
		case <-ctx.Done():
			return 0, nil, fmt.Errorf("%w: %w", ErrRetention, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	for t, r := range rets {
		if retention >= 0 && (r < 0 || r > retention) {
			if longer == nil {
				longer = map[string]int64{}
			}
			longer[t] = r
		}
	}
	return retention, longer, nil
}

// retentions returns the retention.ms of those of topics that exist.
func retentions(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]int64, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("%w: describe the configs of %v: %w", ErrRetention, topics, err)
	}
	out := map[string]int64{}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue // not there (yet)
		}
		for _, c := range rc.Configs {
			if c.Key != "retention.ms" || c.Value == nil {
				continue
			}
			if r, err := strconv.ParseInt(*c.Value, 10, 64); err == nil {
				out[rc.Name] = r
			}
		}
	}
	return out, nil
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
