package app

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// registerCompactIDs adds the metrics of compact (v2) frame ids: which id frames got, and the checkpoint
// writes they rest on, whose acknowledgement time sets how long compact ids grow (docs/decisions.md). They
// read counters at scrape time.
func (t *telemetry) registerCompactIDs(f *feed.Feed) error {
	m := t.provider.Meter(instrumentation)
	ids, err1 := m.Int64ObservableCounter("ssegate.frame.ids",
		metric.WithDescription("Frames framed with id-format v2, by the id they got: v2 (compact), or v1 when no acknowledged checkpoint made a compact one"))
	writes, err2 := m.Int64ObservableCounter("ssegate.checkpoint.writes",
		metric.WithDescription("Checkpoints of the topic's position written to the position topic, by result: acked, or failed (frames then get v1 ids until one is acknowledged)"))
	wait, err3 := m.Float64ObservableCounter("ssegate.checkpoint.ack", metric.WithUnit("s"),
		metric.WithDescription("Time acknowledged checkpoints waited for Kafka, in all; over the rate of acked writes, the mean acknowledgement time, which compact ids grow during"))
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, name := range f.Topics() {
			topic := attribute.String("topic", name)
			compact, fallback := f.Topic(name).IDs()
			o.ObserveInt64(ids, compact, metric.WithAttributes(topic, attribute.String("format", "v2")))
			o.ObserveInt64(ids, fallback, metric.WithAttributes(topic, attribute.String("format", "v1")))
			acked, failed, secs := f.Topic(name).Checkpoints()
			if acked+failed == 0 {
				continue
			}
			o.ObserveInt64(writes, acked, metric.WithAttributes(topic, attribute.String("result", "acked")))
			o.ObserveInt64(writes, failed, metric.WithAttributes(topic, attribute.String("result", "failed")))
			o.ObserveFloat64(wait, secs, metric.WithAttributes(topic))
		}
		return nil
	}, ids, writes, wait)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
