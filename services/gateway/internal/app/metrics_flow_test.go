package app

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestObserverAllocations: recording a delivery lag (once per publish per topic, from a stream's write) or a
// resume latency (once per resume) makes no attribute set: those are made once, at start. What is left is the
// SDK's own, at most one allocation a call (measured 0 or 1), once per publish, never per frame.
func TestObserverAllocations(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	m := mp.Meter("test")
	lag, _ := m.Float64Histogram("lag", metric.WithExplicitBucketBoundaries(lagBuckets...))
	resume, _ := m.Float64Histogram("resume", metric.WithExplicitBucketBoundaries(resumeBuckets...))
	o := &observer{
		lag: lag, resume: resume,
		lagAttrs: map[string]metric.RecordOption{"t": metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", "t")))},
		resumeAttrs: map[string]map[string]metric.RecordOption{"t": {
			"ring": metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", "t"), attribute.String("source", "ring"))),
		}},
	}
	if n := testing.AllocsPerRun(1000, func() { o.Delivered("t", 3*time.Millisecond) }); n > 1 {
		t.Errorf("Delivered allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { o.Resumed("t", "ring", 3*time.Millisecond) }); n > 1 {
		t.Errorf("Resumed allocates %v times", n)
	}
}
