package replay

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestBlockSpans: every block a read needs is a span with its partition, the offsets needed and the records
// read, and says where the block came from: Kafka for the first read, the cache for the same range again.
func TestBlockSpans(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for range 10 {
		recs = append(recs, &kgo.Record{Value: []byte("v")})
	}
	kafkatest.Produce(t, cl, recs...)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	pool := NewPool(Config{Readers: 1, Tracer: tp.Tracer("test")}, kafkaLog(t))
	ctx := kafkatest.Context(t)
	for i := range 2 {
		if err := pool.Read(ctx, topic, 0, []Range{{Partition: 0, After: 2, Upto: 7}}, 0, nil, func(*kgo.Record) error { return nil }); err != nil {
			t.Fatal(err)
		}
		// A block's span ends when its fetch lands, which may be a moment after the read has its records; the
		// second read is from the cache only once the first fetch has landed there.
		kafkatest.WaitFor(t, 5*time.Second, "the read's span", func() bool { return len(rec.Ended()) > i })
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want one per read", len(spans))
	}
	for i, served := range []string{"kafka", "cache"} {
		s := spans[i]
		got := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			got[kv.Key] = kv.Value.String()
		}
		want := map[attribute.Key]string{
			"messaging.system": "kafka", "messaging.destination.name": topic, "messaging.destination.partition.id": "0",
			"ssegate.replay.from_offset": "3", "ssegate.replay.to_offset": "7", "ssegate.replay.records": "10",
			"ssegate.replay.served": served, "ssegate.replay.cache_hit": map[string]string{"kafka": "false", "cache": "true"}[served],
		}
		if s.Name() != spanBlock {
			t.Errorf("span %d is %q", i, s.Name())
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("span %d: %s = %q, want %q", i, k, got[k], v)
			}
		}
	}
}
