package app

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

// telemetry owns the OpenTelemetry meter provider whose Prometheus exporter serves /metrics.
//
// The sources only bump atomics (source.Stats); every instrument here is observable and reads them at
// scrape time.
type telemetry struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
}

// sourceStates are the values of the state label of ssegate_ingest_source_state: the states of GET /sources.
var sourceStates = []string{
	source.StateStarting, source.StateConnecting, source.StateStreaming, source.StateBackoff,
	source.StateTopicMissing, source.StateStopped, StateStandby,
}

// held[i] tells whether this replica holds the lease of sources[i] (ssegate_ingest_source_owned); shared says
// that the leases are in Redis, so that a source this replica does not hold is on standby here.
func newTelemetry(res *resource.Resource, sources []*source.Source, held []atomic.Bool, shared bool) (*telemetry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	m := mp.Meter("github.com/ssegate/ssegate/services/ingest")

	type counter struct {
		inst metric.Int64ObservableCounter
		get  func(*source.Stats) *atomic.Int64
	}
	defs := []struct {
		name, desc string
		get        func(*source.Stats) *atomic.Int64
	}{
		{"ssegate.ingest.connects", "Requests made to the source", func(s *source.Stats) *atomic.Int64 { return &s.Connects }},
		{"ssegate.ingest.bytes", "Body bytes read from the source", func(s *source.Stats) *atomic.Int64 { return &s.Bytes }},
		{"ssegate.ingest.events", "Events parsed from the source", func(s *source.Stats) *atomic.Int64 { return &s.Events }},
		{"ssegate.ingest.events.filtered", "Events skipped by the event-type filter", func(s *source.Stats) *atomic.Int64 { return &s.Filtered }},
		{"ssegate.ingest.events.oversized", "Events over the size limits (dead-lettered or dropped)", func(s *source.Stats) *atomic.Int64 { return &s.Oversized }},
		{"ssegate.ingest.records", "Records committed to the target topic", func(s *source.Stats) *atomic.Int64 { return &s.Records }},
		{"ssegate.ingest.records.dead_letter", "Dead-letter records committed", func(s *source.Stats) *atomic.Int64 { return &s.DeadLettered }},
		{"ssegate.ingest.transactions.committed", "Kafka transactions committed", func(s *source.Stats) *atomic.Int64 { return &s.Commits }},
		{"ssegate.ingest.transactions.failed", "Kafka transactions that failed to commit", func(s *source.Stats) *atomic.Int64 { return &s.Aborts }},
	}
	var counters []counter
	var insts []metric.Observable
	for _, d := range defs {
		c, err := m.Int64ObservableCounter(d.name, metric.WithDescription(d.desc))
		if err != nil {
			return nil, fmt.Errorf("metric instrument: %w", err)
		}
		counters = append(counters, counter{inst: c, get: d.get})
		insts = append(insts, c)
	}
	reconnects, err := m.Int64ObservableCounter("ssegate.ingest.reconnects",
		metric.WithDescription("Connections that ended, by reason"))
	if err != nil {
		return nil, fmt.Errorf("metric instrument: %w", err)
	}
	insts = append(insts, reconnects)
	owned, err := m.Int64ObservableGauge("ssegate.ingest.source.owned",
		metric.WithDescription("1 while this replica holds the source's lease and runs it, else 0"))
	if err != nil {
		return nil, fmt.Errorf("metric instrument: %w", err)
	}
	insts = append(insts, owned)
	state, err := m.Int64ObservableGauge("ssegate.ingest.source.state",
		metric.WithDescription("1 for the source's state on this replica (as GET /sources shows it), 0 for the others"))
	if err != nil {
		return nil, fmt.Errorf("metric instrument: %w", err)
	}
	insts = append(insts, state)
	committedAt, err := m.Float64ObservableGauge("ssegate.ingest.checkpoint.timestamp.seconds",
		metric.WithDescription("When this replica last committed the source's events and checkpoint, in seconds since the Unix epoch; 0 before its first commit"))
	if err != nil {
		return nil, fmt.Errorf("metric instrument: %w", err)
	}
	insts = append(insts, committedAt)

	reasons := source.Reasons()
	srcAttrs := make([]metric.MeasurementOption, len(sources))
	reasonAttrs := make([][]metric.MeasurementOption, len(sources))
	stateAttrs := make([][]metric.MeasurementOption, len(sources))
	for i, s := range sources {
		srcAttrs[i] = metric.WithAttributes(attribute.String("source", s.Name()))
		for _, st := range sourceStates {
			stateAttrs[i] = append(stateAttrs[i],
				metric.WithAttributes(attribute.String("source", s.Name()), attribute.String("state", st)))
		}
		for _, r := range reasons {
			reasonAttrs[i] = append(reasonAttrs[i],
				metric.WithAttributes(attribute.String("source", s.Name()), attribute.String("reason", r.String())))
		}
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, s := range sources {
			st := s.Stats()
			for _, c := range counters {
				o.ObserveInt64(c.inst, c.get(st).Load(), srcAttrs[i])
			}
			for j, r := range reasons {
				o.ObserveInt64(reconnects, st.Reconnects[r].Load(), reasonAttrs[i][j])
			}
			var v int64
			if held[i].Load() {
				v = 1
			}
			o.ObserveInt64(owned, v, srcAttrs[i])
			now := s.Status().State
			if v == 0 && shared {
				now = StateStandby
			}
			for j, name := range sourceStates {
				var on int64
				if name == now {
					on = 1
				}
				o.ObserveInt64(state, on, stateAttrs[i][j])
			}
			o.ObserveFloat64(committedAt, float64(st.CommittedAt.Load())/1e9, srcAttrs[i])
		}
		return nil
	}, insts...)
	if err != nil {
		return nil, fmt.Errorf("metric callback: %w", err)
	}
	return &telemetry{provider: mp, handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}

func (t *telemetry) shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }
