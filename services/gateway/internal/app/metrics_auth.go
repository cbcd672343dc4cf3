package app

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// refusedCounter returns the counter of stream requests refused before the stream started, made on its first
// use: the gate (registerAuth) and the limiter (registerLimitMetrics) each report their refusals on it.
func (t *telemetry) refusedCounter() (metric.Int64ObservableCounter, error) {
	if t.refused == nil {
		c, err := t.provider.Meter("github.com/ssegate/ssegate/services/gateway").Int64ObservableCounter("ssegate.streams.refused",
			metric.WithDescription("Stream requests refused before the stream started, by reason: a token missing or refused, a scope that does not allow the request, an origin not allowed, a limit (with its kind)"))
		if err != nil {
			return nil, fmt.Errorf("metric instrument: %w", err)
		}
		t.refused = c
	}
	return t.refused, nil
}

// registerAuth adds the metrics of who may read what to the telemetry: streams refused before they start, by
// reason, and token-expiring frames sent; and of how streams are shaped on the way: streams that fell back to
// conflation. Like the others, they read counters at scrape time.
func (t *telemetry) registerAuth(topics []string, stats map[string]*stream.Stats, refused refusals) error {
	m := t.provider.Meter("github.com/ssegate/ssegate/services/gateway")
	refusedC, err1 := t.refusedCounter()
	expiring, err2 := m.Int64ObservableCounter("ssegate.tokens.expiring", metric.WithDescription("token-expiring events sent to streams whose token expires soon"))
	slow, err3 := m.Int64ObservableCounter("ssegate.streams.slow_conflated", metric.WithDescription("Streams that fell behind the ring and went on conflated (topic-slow-conflate)"))
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	reasons := refusalReasons()
	attrs := map[string][]metric.MeasurementOption{}
	topicAttrs := map[string]metric.MeasurementOption{}
	for _, name := range topics {
		topicAttrs[name] = metric.WithAttributes(attribute.String("topic", name))
		for _, r := range reasons {
			attrs[name] = append(attrs[name], metric.WithAttributes(attribute.String("topic", name), attribute.String("reason", r)))
		}
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, name := range topics {
			for i, r := range reasons {
				o.ObserveInt64(refusedC, refused[name][r].Load(), attrs[name][i])
			}
			o.ObserveInt64(expiring, stats[name].TokenNotices.Load(), topicAttrs[name])
			o.ObserveInt64(slow, stats[name].SlowConflated.Load(), topicAttrs[name])
		}
		return nil
	}, refusedC, expiring, slow)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
