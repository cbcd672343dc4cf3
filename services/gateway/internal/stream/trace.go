package stream

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	tel "github.com/ssegate/ssegate/pkg/telemetry"
)

// What a stream reports beyond its counters (Stats): spans of its start and of the resume decision, and the
// measurements that are not counts. None of it is on the per-frame path: spans cover a stream's start and its
// catch-ups, the delivery lag is sampled once per publish per topic (sampleDelivery).

// Resume sources, the source a resume or catch-up was served from (Observer.Resumed, the span attribute
// ssegate.resume.source).
const (
	SourceRing   = "ring"   // the ring alone
	SourceKafka  = "kafka"  // a replay read from Kafka (and the ring after it)
	SourceResync = "resync" // an event: resync told the client of offsets it will never get
)

// Observer receives a stream's measurements. Its methods are called from stream goroutines and writers, at
// most once per resume or per publish, never per frame; they must not block.
type Observer interface {
	// Resumed reports a resume or catch-up (a Last-Event-ID, or a re-join after the cursor fell behind)
	// that took d from the stream's start (or the re-join) until it was caught up with the ring, by source.
	Resumed(topic, source string, d time.Duration)
	// Delivered reports, for one publish of the topic's ring, the time from its newest record's timestamp
	// until the first client was written it.
	Delivered(topic string, lag time.Duration)
}

// Span and attribute names. Topic and partitions use the messaging semantic conventions (see pkg/telemetry
// for the pinned version); the rest are the gateway's own, under ssegate.
const (
	spanStart  = "ssegate.stream.start"
	spanResume = "ssegate.stream.resume"

	attrFrom    = attribute.Key("ssegate.stream.from")
	attrKeys    = attribute.Key("ssegate.stream.keys")
	attrEvents  = attribute.Key("ssegate.stream.events")
	attrLastID  = attribute.Key("ssegate.stream.last_event_id")
	attrLiveID  = attribute.Key("ssegate.stream.live_id")
	attrLeaving = attribute.Key("ssegate.stream.leaving")
	attrSource  = attribute.Key("ssegate.resume.source")
	attrReasons = attribute.Key("ssegate.resync.reasons")
	attrRanges  = attribute.Key("ssegate.replay.partitions")
	attrSkipped = attribute.Key("ssegate.resync.skipped")
	attrRejoin  = attribute.Key("ssegate.resume.rejoin")
)

// spanParent returns the request's trace context, the parent of its stream's spans, or nil when the request
// is not traced (most are not: a parked connection keeps a pointer instead of the context itself).
func spanParent(ctx context.Context) *trace.SpanContext {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return &sc
}

// startSpan starts the span of a stream's start, a child of the request's trace context (kept in c.parent, as
// a writer's goroutine serves a parked stream with a context of its own).
func (c *conn) startSpan(ctx context.Context, p *Params) (context.Context, trace.Span) {
	if c.parent != nil {
		ctx = trace.ContextWithSpanContext(ctx, *c.parent)
	}
	ctx, span := c.s.tracer.Start(ctx, spanStart, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		from := p.From
		if from == "" {
			from = FromLatest
		}
		if from == "time" {
			from = p.FromTime.UTC().Format(time.RFC3339Nano)
		}
		span.SetAttributes(semconv.MessagingSystemKafka, semconv.MessagingDestinationName(c.t.Name), attrFrom.String(from),
			attrKeys.Int(len(p.Keys)), attrEvents.StringSlice(sortedKeys(p.Events)))
		if p.LastEventID != "" {
			span.SetAttributes(attrLastID.String(tel.CutID(p.LastEventID)))
		}
	}
	return ctx, span
}

// endStartSpan ends the span of a stream's start, with the position at which it went live, caught up with the
// ring (or the error).
func (c *conn) endStartSpan(span trace.Span, err error) {
	if span.IsRecording() {
		switch {
		case errors.Is(err, errDrained):
			// Told where it is and to come back elsewhere (the server is leaving): no failure.
			span.SetAttributes(attrLeaving.Bool(true))
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		default:
			span.SetAttributes(attrLiveID.String(tel.CutID(string(c.idBuf))))
		}
	}
	span.End()
}

// traceResume runs catch, a resume's catch-up, under the resume's span, and reports its latency from start
// (monoNow). pre are resync reasons already sent (an invalid id). A re-join's span is a child of the request's
// trace context, as its stream's start was.
func (c *conn) traceResume(ctx context.Context, rejoin bool, start int64, pre []string, catch func(context.Context) error) error {
	if !trace.SpanContextFromContext(ctx).IsValid() && c.parent != nil {
		ctx = trace.ContextWithSpanContext(ctx, *c.parent)
	}
	rt := &resumeTrace{reasons: pre}
	c.rt = rt
	ctx, span := c.s.tracer.Start(ctx, spanResume)
	defer span.End()
	err := catch(ctx)
	c.rt = nil
	c.endResume(span, rt, rejoin, start, err)
	return err
}

// resumeTrace is what catchUp learns of a resume for its span and the resume latency.
type resumeTrace struct {
	reasons []string
	ranges  int
	skipped int64
}

// source is where the resume was served from: a resync when the client was told of a loss, else Kafka
// when a replay read ran, else the ring.
func (r *resumeTrace) source() string {
	switch {
	case len(r.reasons) > 0:
		return SourceResync
	case r.ranges > 0:
		return SourceKafka
	}
	return SourceRing
}

// endResume sets a resume's span attributes and reports its latency from start (monoNow).
func (c *conn) endResume(span trace.Span, rt *resumeTrace, rejoin bool, start int64, err error) {
	src := rt.source()
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingSystemKafka, semconv.MessagingDestinationName(c.t.Name), attrSource.String(src),
			attrRanges.Int(rt.ranges), attrRejoin.Bool(rejoin))
		if len(rt.reasons) > 0 {
			span.SetAttributes(attrReasons.StringSlice(rt.reasons), attrSkipped.Int64(rt.skipped))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	if err == nil && c.s.cfg.Observer != nil {
		c.s.cfg.Observer.Resumed(c.t.Name, src, time.Duration(monoNow()-start))
	}
}

// sampled is the topic's last ring sequence whose delivery lag was reported (see sampleDelivery).
type sampled struct{ seq atomic.Uint64 }

// sampleDelivery reports the delivery lag of the topic's latest publish if this write, which brought the
// stream's cursor to next, is the first to reach it: one measurement per publish per topic, whatever the
// number of clients, at the cost of two atomic loads per write.
func (c *conn) sampleDelivery(next uint64) {
	if c.s.cfg.Observer == nil || c.t.Newest == nil {
		return
	}
	seq, ts := c.t.Newest()
	if next < seq || ts == 0 {
		return
	}
	old := c.t.sampled.seq.Load()
	if old >= seq || !c.t.sampled.seq.CompareAndSwap(old, seq) {
		return
	}
	c.s.cfg.Observer.Delivered(c.t.Name, max(time.Since(time.UnixMilli(ts)), 0))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
