package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
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

// registerKafka adds the feed's bytes by broker, and its partitions moved off followers it lost, to the
// telemetry.
func (t *telemetry) registerKafka(b *brokerBytes, f *feed.Feed) error {
	m := t.provider.Meter(instrumentation)
	fetched, err1 := m.Int64ObservableCounter("ssegate.feed.fetch.bytes",
		metric.WithDescription("Bytes of record batches the live feed read from Kafka, by the broker (node id) that served them"))
	moved, err2 := m.Int64ObservableCounter("ssegate.feed.follower.moves",
		metric.WithDescription("With kafka-client-rack: partitions the live feed moved to their leaders because it could not reach the follower (broker) serving them (to=leader), and gave back to it later (to=follower)"))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("metric instrument: %w", err)
	}
	toLeader, toFollower := attribute.String("to", "leader"), attribute.String("to", "follower")
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		b.nodes.Range(func(k, v any) bool {
			o.ObserveInt64(fetched, v.(*atomic.Int64).Load(),
				metric.WithAttributes(attribute.String("broker", strconv.Itoa(int(k.(int32))))))
			return true
		})
		f.FollowerMoves(func(broker int32, leaders, back int64) {
			node := attribute.String("broker", strconv.Itoa(int(broker)))
			o.ObserveInt64(moved, leaders, metric.WithAttributes(node, toLeader))
			o.ObserveInt64(moved, back, metric.WithAttributes(node, toFollower))
		})
		return nil
	}, fetched, moved)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
