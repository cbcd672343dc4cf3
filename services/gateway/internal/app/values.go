package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
)

// valueStats counts what the schema formats could not decode, by topic and reason, and the lookups of
// schemas by outcome.
type valueStats struct {
	undecodable map[string]*reasonCounts
	lookups     reasonCounts
}

// reasonCounts counts by schema.Reasons, the last count "ok" (a lookup that worked).
type reasonCounts [len(schema.Reasons) + 1]atomic.Int64

// count adds one to r's count (the last one for schema.LookupOK).
func (rc *reasonCounts) count(r string) {
	i := 0
	for i < len(schema.Reasons) && string(schema.Reasons[i]) != r {
		i++
	}
	rc[i].Add(1)
}

// name is the reason or result of count i.
func (rc *reasonCounts) name(i int) string {
	if i < len(schema.Reasons) {
		return string(schema.Reasons[i])
	}
	return schema.LookupOK
}

// formats returns the feed's formats of the served topics, with one set of schema decoders for all of them
// when any topic has a schema format. Values the feed cannot decode are counted in a.values.
func (a *App) formats() (map[string]*feed.Format, error) {
	v := a.cfg.Values
	a.values = &valueStats{undecodable: map[string]*reasonCounts{}}
	src, err := v.schemaSource()
	if err != nil {
		return nil, err
	}
	var decoders *schema.Decoders
	if src != nil {
		log := a.log.With("component", "schema")
		decoders = schema.NewDecoders(src, schema.Options{
			Timeout:      v.Registry.LookupTimeout(),
			ValidateJSON: v.ValidateJSON,
			OnLookup: func(result string, id int, err error) {
				a.values.lookups.count(result)
				if result != schema.LookupOK {
					log.Warn("schema lookup failed", slog.String("reason", result), slog.Int("schema_id", id), slog.Any("err", err))
				}
			},
		})
	}
	out := make(map[string]*feed.Format, len(a.cfg.Topics))
	for _, topic := range a.cfg.Topics {
		value, key, err := v.topicFormats(topic)
		if err != nil {
			return nil, err
		}
		counts := new(reasonCounts)
		a.values.undecodable[topic] = counts
		out[topic] = &feed.Format{
			Value: value, Key: key, Schemas: decoders,
			Undecodable: func(r schema.Reason) { counts.count(string(r)) },
		}
	}
	return out, nil
}

// registerValueMetrics adds the counts of valueStats.
func (t *telemetry) registerValueMetrics(s *valueStats) error {
	m := t.provider.Meter(instrumentation)
	undecodable, err1 := m.Int64ObservableCounter("ssegate.values.undecodable",
		metric.WithDescription("Record values (or keys) of a schema format that could not be decoded and went out as they are, by topic and reason"))
	lookups, err2 := m.Int64ObservableCounter("ssegate.schema.lookups",
		metric.WithDescription("Lookups of schemas by id in the registry or the schema files, by result: ok or the reason of the failure"))
	for _, err := range []error{err1, err2} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for topic, counts := range s.undecodable {
			for i := range schema.Reasons { // never "ok"
				o.ObserveInt64(undecodable, counts[i].Load(),
					metric.WithAttributes(attribute.String("topic", topic), attribute.String("reason", counts.name(i))))
			}
		}
		for i := range s.lookups {
			o.ObserveInt64(lookups, s.lookups[i].Load(), metric.WithAttributes(attribute.String("result", s.lookups.name(i))))
		}
		return nil
	}, undecodable, lookups)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}
