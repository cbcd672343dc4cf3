package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafka is the tool's Kafka side: one producer client and an admin client on it.
type kafka struct {
	cl     *kgo.Client
	adm    *kadm.Client
	topic  string
	topics []string // the run's topics (--topics): topic first; one for a stream of one topic
	avroID int      // values in Avro with this schema id (recordValue); 0: JSON
}

func newKafka(brokers []string, topic string) (*kafka, error) {
	cl, err := kgo.NewClient(kafkaClientOpts(brokers, topic)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &kafka{cl: cl, adm: kadm.NewClient(cl), topic: topic, topics: []string{topic}}, nil
}

// kafkaClientOpts are the options of the run's producing clients: the run's own and those of --producers
// beyond the first (producers.go).
func kafkaClientOpts(brokers []string, topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(topic),
		kgo.ClientID("ssegate-loadtest"),
		// Latency is measured from the moment a record is handed to the client, so do not hold records
		// back to build bigger batches.
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(maxProducerInFlight),
	}
}

func (k *kafka) close() { k.cl.Close() }

// ensureTopic creates the topic with partitions partitions (replication factor 1) unless it exists, and
// waits until every partition has a leader.
func (k *kafka) ensureTopic(ctx context.Context, partitions int32) (created bool, err error) {
	resp, err := k.adm.CreateTopic(ctx, partitions, 1, nil, k.topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
	case err != nil:
		return false, fmt.Errorf("create topic %s: %w", k.topic, err)
	default:
		created = true
	}
	for {
		md, err := k.adm.Metadata(ctx, k.topic)
		if err == nil {
			if td, ok := md.Topics[k.topic]; ok && td.Err == nil && len(td.Partitions) > 0 {
				ready := true
				for _, p := range td.Partitions {
					ready = ready && p.Err == nil && p.Leader >= 0
				}
				if ready {
					return created, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return created, fmt.Errorf("topic %s has no leaders yet: %w", k.topic, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// endOffsets returns the topic's high watermarks, indexed by partition (with several topics, every topic's, see
// topicStride).
func (k *kafka) endOffsets(ctx context.Context) ([]int64, error) {
	if len(k.topics) > 1 {
		return k.allEndOffsets(ctx)
	}
	lo, err := k.adm.ListEndOffsets(ctx, k.topic)
	return k.offsets(lo, err, "end")
}

// startOffsets returns the first offset of each of the topic's partitions, indexed by partition.
func (k *kafka) startOffsets(ctx context.Context) ([]int64, error) {
	lo, err := k.adm.ListStartOffsets(ctx, k.topic)
	return k.offsets(lo, err, "start")
}

// offsets indexes a listing of the topic's offsets by partition.
func (k *kafka) offsets(lo kadm.ListedOffsets, err error, which string) ([]int64, error) {
	if err != nil {
		return nil, fmt.Errorf("list %s offsets of %s: %w", which, k.topic, err)
	}
	if err := lo.Error(); err != nil {
		return nil, fmt.Errorf("list %s offsets of %s: %w", which, k.topic, err)
	}
	var offs []int64
	lo.Each(func(o kadm.ListedOffset) {
		for int(o.Partition) >= len(offs) {
			offs = append(offs, 0)
		}
		offs[o.Partition] = o.Offset
	})
	if len(offs) == 0 {
		return nil, fmt.Errorf("topic %s does not exist", k.topic)
	}
	return offs, nil
}

// warm produces one record synchronously, so that the producer has its connections, metadata and
// producer id before anything is measured (the first record otherwise waits hundreds of milliseconds).
func (k *kafka) warm(ctx context.Context) error {
	for _, topic := range k.topics {
		if err := warm(ctx, k.cl, topic, k.avroID); err != nil {
			return err
		}
	}
	return nil
}

// warm produces one warm-up record to topic through cl and waits for it.
func warm(ctx context.Context, cl *kgo.Client, topic string, avroID int) error {
	r := &kgo.Record{Topic: topic, Key: []byte("warm-up"), Value: recordValue(avroID, time.Now().UnixNano(), -1, 0)}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	return nil
}

// produceStats counts what the producers did, all of them together.
type produceStats struct {
	seq     atomic.Int64 // the next record's seq, shared by the producers so that no two records have the same
	sent    atomic.Int64 // handed to a client
	acked   atomic.Int64 // acknowledged by Kafka
	failed  atomic.Int64 // failed for good
	lastErr atomic.Pointer[error]
}

// done counts a record's answer from Kafka: acknowledged, or failed for good with err.
func (st *produceStats) done(err error) {
	if err != nil {
		st.failed.Add(1)
		st.lastErr.Store(&err)
		return
	}
	st.acked.Add(1)
}

// produceN produces n records synchronously (keys k-0, k-1, ...) and counts them in st.
func (k *kafka) produceN(ctx context.Context, n, size, keys int, st *produceStats) error {
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{
			Key:   []byte("k-" + strconv.Itoa(i%keys)),
			Value: recordValue(k.avroID, time.Now().UnixNano(), int64(i), size),
		}
	}
	st.sent.Add(int64(n))
	for _, pr := range k.cl.ProduceSync(ctx, rs...) {
		st.done(pr.Err)
	}
	if st.failed.Load() > 0 {
		return fmt.Errorf("produce to %s: %d of %d records failed: %w", k.topic, st.failed.Load(), n, *st.lastErr.Load())
	}
	return nil
}

// recordValue is the value of one record: makeValue's JSON, or, with an avroID, the same fields ts, seq and
// pad in Avro (the record schema of testdata/avro/1.avsc) after the wire format's header: what a gateway
// serving the topic with value-format avro renders as exactly makeValue's JSON, so the tool's clients read
// both alike.
func recordValue(avroID int, tsNanos, seq int64, size int) []byte {
	v := makeValue(tsNanos, seq, size)
	if avroID == 0 {
		return v
	}
	pad := len(v) - bytes.LastIndexByte(v[:len(v)-2], '"') - 3 // the x's between "pad":" and "}
	b := binary.BigEndian.AppendUint32(append(make([]byte, 0, len(v)), 0), uint32(avroID))
	b = binary.AppendVarint(b, tsNanos) // Avro's long: a zig-zag varint, as binary.AppendVarint writes it
	b = binary.AppendVarint(b, seq)
	b = binary.AppendVarint(b, int64(pad))
	return append(b, bytes.Repeat([]byte{'x'}, pad)...)
}

// makeValue returns the JSON value for one record, padded with "x" to size bytes when it is shorter.
func makeValue(tsNanos, seq int64, size int) []byte {
	b := make([]byte, 0, max(size, 64))
	b = append(b, valuePrefix...)
	b = strconv.AppendInt(b, tsNanos, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"pad":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}
