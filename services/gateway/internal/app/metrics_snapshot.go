package app

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// registerSnapshots adds the metrics of from=snapshot streams: snapshots by where they came from (the key
// index, or a read of the topic), and what each topic's key index holds (topic-snapshot-index). They read
// counters at scrape time.
func (t *telemetry) registerSnapshots(f *feed.Feed, stats map[string]*stream.Stats) error {
	m := t.provider.Meter("github.com/ssegate/ssegate/services/gateway")
	snaps, err1 := m.Int64ObservableCounter("ssegate.snapshots", metric.WithDescription("from=snapshot snapshots built, by source: index (the topic's key index) or read (the ring, the replay cache and Kafka; resumed snapshots too)"))
	keys, err2 := m.Int64ObservableGauge("ssegate.snapshot.index.keys", metric.WithDescription("Keys the topic's key index holds (topic-snapshot-index); 0 once it gave up"))
	size, err3 := m.Int64ObservableGauge("ssegate.snapshot.index.bytes", metric.WithDescription("Memory the topic's key index holds, estimated: frames, keys and bookkeeping"))
	given, err4 := m.Int64ObservableGauge("ssegate.snapshot.index.dropped", metric.WithDescription("1 when the topic's key index gave up for good (it outgrew its size, or met a record without a key): snapshots then read the topic"))
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, name := range f.Topics() {
			topic := attribute.String("topic", name)
			o.ObserveInt64(snaps, stats[name].SnapshotsIndexed.Load(), metric.WithAttributes(topic, attribute.String("source", "index")))
			o.ObserveInt64(snaps, stats[name].SnapshotsRead.Load(), metric.WithAttributes(topic, attribute.String("source", "read")))
			st, ok := f.Topic(name).Ring().KeyIndexStats()
			if !ok {
				continue
			}
			gaveUp := int64(0)
			if st.Dropped != "" {
				gaveUp = 1
			}
			o.ObserveInt64(keys, int64(st.Keys), metric.WithAttributes(topic))
			o.ObserveInt64(size, int64(st.Bytes), metric.WithAttributes(topic))
			o.ObserveInt64(given, gaveUp, metric.WithAttributes(topic))
		}
		return nil
	}, snaps, keys, size, given)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
