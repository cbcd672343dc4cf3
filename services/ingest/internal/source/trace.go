package source

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	tel "github.com/ssegate/ssegate/pkg/telemetry"
)

// A source's spans: each connection attempt, each checkpoint read at a start, each transaction commit.
// Events themselves get none. A connection's span ends when the response headers are in (the stream lasts
// long after); the commits of a connection are spans of their own, linked to it, so that a trace stays
// short however long the connection lives. The request carries the connection span's traceparent, so the
// upstream's spans join the trace.
const (
	spanConnect    = "ssegate.ingest.connect"
	spanCheckpoint = "ssegate.ingest.checkpoint"
	spanCommit     = "ssegate.ingest.commit"
)

// The ingest's own attributes; topics, the upstream and HTTP use the pinned semantic conventions'
// (pkg/telemetry).
var (
	attrSource     = attribute.Key("ssegate.ingest.source")
	attrLastID     = attribute.Key("ssegate.ingest.last_event_id")
	attrReason     = attribute.Key("ssegate.ingest.reason")
	attrFound      = attribute.Key("ssegate.ingest.checkpoint.found")
	attrCheckpoint = attribute.Key("ssegate.ingest.checkpoint.id")
	attrRecords    = attribute.Key("ssegate.ingest.records")
	attrDead       = attribute.Key("ssegate.ingest.dead_letter")
)

// propagator is how the connection's trace context goes to the upstream.
var propagator propagation.TextMapPropagator = propagation.TraceContext{}

// startConnect starts a connection attempt's span and puts its traceparent on req.
func (s *Source) startConnect(ctx context.Context, lastID string) (context.Context, trace.Span) {
	ctx, span := s.opt.Tracer.Start(ctx, spanConnect, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attrSource.String(s.spec.Name), semconv.HTTPRequestMethodGet)
		if u, err := url.Parse(s.spec.URL); err == nil {
			// The host and path only: a query may hold a credential.
			span.SetAttributes(semconv.ServerAddress(u.Hostname()), semconv.URLPath(u.Path))
		}
		if lastID != "" {
			span.SetAttributes(attrLastID.String(tel.CutID(lastID)))
		}
	}
	return ctx, span
}

// injectTrace puts ctx's trace context on the request, when a span is recording.
func injectTrace(ctx context.Context, req *http.Request) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
}

// endConnect ends a connection attempt's span with its outcome (connect sets the status code).
func endConnect(span trace.Span, o outcome) {
	if span.IsRecording() {
		if o.err != nil {
			span.SetAttributes(attrReason.String(o.reason.String()))
			span.SetStatus(codes.Error, o.err.Error())
		}
	}
	span.End()
}

// traceCommit runs a commit of the transaction that ends at id under its span, linked to the connection's
// (the span context in ctx), and reports its duration to Options.OnCommit.
func (s *Source) traceCommit(ctx context.Context, id string, records, dead int, commit func(context.Context) error) error {
	conn := trace.SpanContextFromContext(ctx)
	var opts []trace.SpanStartOption
	if conn.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: conn}), trace.WithNewRoot())
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindProducer))
	ctx, span := s.opt.Tracer.Start(ctx, spanCommit, opts...)
	defer span.End()
	start := time.Now()
	err := commit(ctx)
	d := time.Since(start)
	if span.IsRecording() {
		span.SetAttributes(attrSource.String(s.spec.Name), semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeSend, semconv.MessagingDestinationName(s.spec.Topic),
			attrRecords.Int(records), attrDead.Int(dead), attrCheckpoint.String(tel.CutID(id)))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	if err == nil && s.opt.OnCommit != nil {
		s.opt.OnCommit(s.spec.Name, d)
	}
	return err
}

// traceCheckpoint runs open, which fences earlier producers and reads the source's checkpoint, under its span.
func (s *Source) traceCheckpoint(ctx context.Context, open func(context.Context) (found bool, id string, err error)) error {
	ctx, span := s.opt.Tracer.Start(ctx, spanCheckpoint)
	defer span.End()
	found, id, err := open(ctx)
	if span.IsRecording() {
		span.SetAttributes(attrSource.String(s.spec.Name), attrFound.Bool(found))
		if found {
			span.SetAttributes(attrCheckpoint.String(tel.CutID(id)))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	return err
}
