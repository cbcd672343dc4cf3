package replay

import (
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The span of a block a read needs: one per block, not per record.
const spanBlock = "ssegate.replay.block"

// Where a block came from (the span attribute ssegate.replay.served, and cache_hit for the first two).
const (
	servedCache  = "cache"  // the shared cache
	servedShared = "shared" // another connection's fetch of the same block
	servedKafka  = "kafka"  // this connection's fetch from Kafka
)

// The gateway's own attributes; the topic and partition are the pinned semantic conventions' (pkg/telemetry).
var (
	attrFrom     = attribute.Key("ssegate.replay.from_offset")
	attrTo       = attribute.Key("ssegate.replay.to_offset")
	attrRecords  = attribute.Key("ssegate.replay.records")
	attrServed   = attribute.Key("ssegate.replay.served")
	attrCacheHit = attribute.Key("ssegate.replay.cache_hit")
)

// endBlockSpan ends a block's span with what it asked for and what it got.
func endBlockSpan(span trace.Span, key blockKey, from, to int64, served string, b *block, err error) {
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingSystemKafka, semconv.MessagingDestinationName(key.topic),
			semconv.MessagingDestinationPartitionID(strconv.Itoa(int(key.partition))),
			attrFrom.Int64(from), attrTo.Int64(to))
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		default:
			span.SetAttributes(attrRecords.Int(len(b.recs)), attrServed.String(served),
				attrCacheHit.Bool(served != servedKafka))
		}
	}
	span.End()
}
