package app

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// brokerBytes counts the bytes of record batches the feed's client read, by the broker that served them: with
// kafka-client-rack, which replica the live feed reads from (a follower in the pod's rack, or the leader).
// A franz-go hook, called once per batch, not per record.
type brokerBytes struct {
	nodes sync.Map // node id (int32) -> *atomic.Int64
}

var _ kgo.HookFetchBatchRead = (*brokerBytes)(nil)

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (b *brokerBytes) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	v, ok := b.nodes.Load(meta.NodeID)
	if !ok {
		v, _ = b.nodes.LoadOrStore(meta.NodeID, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(int64(m.CompressedBytes))
}

// registerKafka adds the feed's bytes by broker to the telemetry.
func (t *telemetry) registerKafka(b *brokerBytes) error {
	m := t.provider.Meter(instrumentation)
	fetched, err := m.Int64ObservableCounter("ssegate.feed.fetch.bytes",
		metric.WithDescription("Bytes of record batches the live feed read from Kafka, by the broker (node id) that served them"))
	if err != nil {
		return fmt.Errorf("metric instrument: %w", err)
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		b.nodes.Range(func(k, v any) bool {
			o.ObserveInt64(fetched, v.(*atomic.Int64).Load(),
				metric.WithAttributes(attribute.String("broker", strconv.Itoa(int(k.(int32))))))
			return true
		})
		return nil
	}, fetched)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
