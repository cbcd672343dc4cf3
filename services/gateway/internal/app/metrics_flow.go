package app

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// The metrics of records on their way: read from Kafka (the semantic conventions' messaging metric), fed into
// the rings, written to clients (the delivery lag), resumes (their latency), and HTTP answers. Counts are
// read from the feed's atomics at scrape time; the histograms are recorded once per resume and once per
// publish per topic (stream.Observer), never per frame.

// Histogram buckets, in seconds.
var (
	lagBuckets    = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	resumeBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// observer records what streams report (stream.Observer) into histograms, with attribute sets made once.
type observer struct {
	lag, resume metric.Float64Histogram
	lagAttrs    map[string]metric.RecordOption
	resumeAttrs map[string]map[string]metric.RecordOption
}

var _ stream.Observer = (*observer)(nil)

// Resumed records a resume's latency by topic and source.
func (o *observer) Resumed(topic, source string, d time.Duration) {
	if o.resume == nil {
		return
	}
	o.resume.Record(context.Background(), d.Seconds(), o.resumeAttrs[topic][source])
}

// Delivered records a publish's delivery lag.
func (o *observer) Delivered(topic string, lag time.Duration) {
	if o.lag == nil {
		return
	}
	o.lag.Record(context.Background(), lag.Seconds(), o.lagAttrs[topic])
}

// registerFlow adds the flow metrics to the telemetry, and makes obs record into its histograms.
func (t *telemetry) registerFlow(f *feed.Feed, obs *observer) error {
	m := t.provider.Meter(instrumentation)
	consumed, err1 := messagingconv.NewClientConsumedMessagesObservable(m,
		metric.WithDescription("Records read from Kafka into the rings, by topic and partition"))
	fed, err2 := m.Int64ObservableGauge("ssegate.feed.offset",
		metric.WithDescription("Offset of the last record of the partition read into the topic's ring"))
	lag, err3 := m.Float64Histogram("ssegate.delivery.lag", metric.WithUnit("s"),
		metric.WithDescription("Time from a record's Kafka timestamp until it was written to a client: the newest record of each publish to a ring, at its first write"),
		metric.WithExplicitBucketBoundaries(lagBuckets...))
	resume, err4 := m.Float64Histogram("ssegate.resume.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a resuming stream's start (or a re-join) until it caught up with the ring, by source: ring, kafka or resync"),
		metric.WithExplicitBucketBoundaries(resumeBuckets...))
	gaps, err5 := m.Int64ObservableCounter("ssegate.feed.resyncs",
		metric.WithDescription("Resyncs the feed published into the ring because retention removed offsets before the pod read them; every live stream of the partition got one"))
	gapped, err6 := m.Int64ObservableCounter("ssegate.feed.skipped.offsets",
		metric.WithDescription("Offsets retention removed before the pod read them (see ssegate.feed.resyncs)"))
	for _, err := range []error{err1, err2, err3, err4, err5, err6} {
		if err != nil {
			return fmt.Errorf("metric instrument: %w", err)
		}
	}
	obs.lagAttrs = map[string]metric.RecordOption{}
	obs.resumeAttrs = map[string]map[string]metric.RecordOption{}
	for _, name := range f.Topics() {
		obs.lagAttrs[name] = metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", name)))
		obs.resumeAttrs[name] = map[string]metric.RecordOption{}
		for _, src := range []string{stream.SourceRing, stream.SourceKafka, stream.SourceResync} {
			obs.resumeAttrs[name][src] = metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", name), attribute.String("source", src)))
		}
	}
	obs.lag, obs.resume = lag, resume

	op := consumed.AttrOperationName("poll")
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		f.Progress(func(topic string, p int32, records, off int64) {
			o.ObserveInt64(consumed.Inst(), records, metric.WithAttributes(semconv.MessagingSystemKafka, op,
				semconv.MessagingDestinationName(topic), semconv.MessagingDestinationPartitionID(strconv.Itoa(int(p)))))
			if off >= 0 {
				o.ObserveInt64(fed, off, partitionAttrs(topic, p))
			}
		})
		f.Gaps(func(topic string, p int32, resyncs, skipped int64) {
			o.ObserveInt64(gaps, resyncs, partitionAttrs(topic, p))
			o.ObserveInt64(gapped, skipped, partitionAttrs(topic, p))
		})
		return nil
	}, consumed.Inst(), fed, gaps, gapped)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	return nil
}

// httpMetrics returns the counters of the clients' port's answers and the admin port's (see
// httpMetrics.observe).
func (t *telemetry) httpMetrics() (clients, admin *httpMetrics, err error) {
	m := t.provider.Meter(instrumentation)
	c, err := m.Int64Counter("ssegate.http.responses",
		metric.WithDescription("HTTP answers, by port (clients, admin), route and status; a stream counts when it ends or the writer pool takes it over"))
	if err != nil {
		return nil, nil, fmt.Errorf("metric instrument: %w", err)
	}
	return &httpMetrics{responses: c, port: attribute.String("port", portClients)},
		&httpMetrics{responses: c, port: attribute.String("port", portAdmin)}, nil
}
