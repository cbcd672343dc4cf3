package app

import (
	"context"
	"fmt"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"

	"github.com/ssegate/ssegate/pkg/settings"
	tel "github.com/ssegate/ssegate/pkg/telemetry"
	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

// instrumentation is the scope name of ingest's tracer and meter.
const instrumentation = "github.com/ssegate/ssegate/services/ingest"

// otlpSetting is the otlp-endpoint setting (see settings.OTLPEndpoint).
func otlpSetting(p *string) settings.Setting { return settings.OTLPEndpoint(p, envPrefix) }

func validateOTLP(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	if _, err := tel.TracesURL(endpoint); err != nil {
		return fmt.Errorf("invalid setting otlp-endpoint (%s or OTEL_EXPORTER_OTLP_ENDPOINT): %w", envName("otlp-endpoint"), err)
	}
	return nil
}

// commitBuckets are the commit-duration histogram's buckets, in seconds.
var commitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// registerFlow adds the metrics of records on their way: records produced, by source and topic (the
// semantic conventions' messaging.client.sent.messages; committed ones, read from the sources' counters at
// scrape time), the commit latency by source, and HTTP answers by route and status. It returns what the
// sources call after each commit (source.Options.OnCommit) and the HTTP middleware.
func (t *telemetry) registerFlow(sources []*source.Source, specs []source.Spec, deadLetter string) (func(string, time.Duration), gin.HandlerFunc, error) {
	m := t.provider.Meter(instrumentation)
	sent, err1 := messagingconv.NewClientSentMessagesObservable(m,
		metric.WithDescription("Records committed to Kafka, by source and topic (the dead-letter topic's too)"))
	commit, err2 := m.Float64Histogram("ssegate.ingest.commit.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a committed transaction took to commit: flushing its records and the checkpoint, and ending it"),
		metric.WithExplicitBucketBoundaries(commitBuckets...))
	responses, err3 := m.Int64Counter("ssegate.http.responses",
		metric.WithDescription("HTTP answers, by route and status"))
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return nil, nil, fmt.Errorf("metric instrument: %w", err)
		}
	}
	op := sent.AttrOperationName("send")
	attrs := func(src, topic string) metric.MeasurementOption {
		return metric.WithAttributes(attribute.String("source", src), semconv.MessagingSystemKafka, op,
			semconv.MessagingDestinationName(topic))
	}
	target := make([]metric.MeasurementOption, len(sources))
	dead := make([]metric.MeasurementOption, len(sources))
	commitAttrs := map[string]metric.RecordOption{}
	for i, s := range sources {
		target[i] = attrs(s.Name(), specs[i].Topic)
		if deadLetter != "" && deadLetter != specs[i].Topic {
			dead[i] = attrs(s.Name(), deadLetter)
		}
		commitAttrs[s.Name()] = metric.WithAttributeSet(attribute.NewSet(attribute.String("source", s.Name())))
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, s := range sources {
			st := s.Stats()
			o.ObserveInt64(sent.Inst(), st.Records.Load(), target[i])
			if dead[i] != nil {
				o.ObserveInt64(sent.Inst(), st.DeadLettered.Load(), dead[i])
			}
		}
		return nil
	}, sent.Inst())
	if err != nil {
		return nil, nil, fmt.Errorf("metric callback: %w", err)
	}
	onCommit := func(src string, d time.Duration) {
		commit.Record(context.Background(), d.Seconds(), commitAttrs[src])
	}
	observe := func(c *gin.Context) {
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		responses.Add(c.Request.Context(), 1, metric.WithAttributes(semconv.HTTPRoute(route),
			semconv.HTTPResponseStatusCode(c.Writer.Status())))
	}
	return onCommit, observe, nil
}
