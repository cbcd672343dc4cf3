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

// registerHookMetrics adds the authorization hook's metrics: its calls by result, the time they took, its
// cache's hits and misses, and the renewals of held answers by outcome. Without a hook they stay at zero, so
// that the alert's series exist on every gateway.
func (t *telemetry) registerHookMetrics(h *authHook) error {
	s := &hookStats{}
	if h != nil {
		s = h.stats
	}
	m := t.provider.Meter("github.com/ssegate/ssegate/services/gateway")
	calls, err1 := m.Int64ObservableCounter("ssegate.auth.hook.calls", metric.WithDescription("Calls of the authorization hook, by result: allowed, denied (its 401 or 403), error (another status, a malformed answer, no connection), timeout"))
	secs, err2 := m.Float64ObservableCounter("ssegate.auth.hook.call", metric.WithUnit("s"), metric.WithDescription("Time spent in calls of the authorization hook, in all (with the calls: the mean latency)"))
	cache, err3 := m.Int64ObservableCounter("ssegate.auth.hook.cache", metric.WithDescription("Requests the authorization hook's cache answered (hit) or not (miss)"))
	renewals, err4 := m.Int64ObservableCounter("ssegate.auth.hook.renewals", metric.WithDescription("Held answers asked again before they ran out, by outcome: extended (their streams go on), ended (refused or changed: their streams end at the old expiry)"))
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	result := func(k, v string) metric.MeasurementOption {
		return metric.WithAttributes(attribute.String(k, v))
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, name := range hookResultNames {
			o.ObserveInt64(calls, s.calls[i].Load(), result("result", name))
		}
		o.ObserveFloat64(secs, float64(s.nanos.Load())/1e9)
		o.ObserveInt64(cache, s.cacheHits.Load(), result("result", "hit"))
		o.ObserveInt64(cache, s.cacheMisses.Load(), result("result", "miss"))
		o.ObserveInt64(renewals, s.renewed.Load(), result("result", "extended"))
		o.ObserveInt64(renewals, s.ended.Load(), result("result", "ended"))
		return nil
	}, calls, secs, cache, renewals)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
