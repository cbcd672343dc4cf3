package replay

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestFirstFetchesOneRequest: a read of twelve partitions of a broker sends their first fetches as one
// FetchRequest, not one each, and still gets every partition's records; so does a prefetch of them.
func TestFirstFetchesOneRequest(t *testing.T) {
	const parts = 12
	topic := kafkatest.NewTopic(t, parts, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var ranges []Range
	for p := range int32(parts) {
		kafkatest.Produce(t, cl, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d", p)})
		ranges = append(ranges, Range{Partition: p, After: -1, Upto: 0})
	}
	for _, prefetch := range []bool{false, true} {
		var c requestCounter
		l, err := NewKafkaLog(kgo.SeedBrokers(kafkatest.Brokers(t)...), kgo.WithHooks(&c))
		if err != nil {
			t.Fatal(err)
		}
		l.Warm(t.Context(), []string{topic}) // an empty fetch on each client
		c.fetches.Store(0)
		pool := NewPool(Config{}, l)
		if prefetch {
			pool.Prefetch(t.Context(), topic, 0, ranges)
		}
		got := map[string]bool{}
		err = pool.Read(t.Context(), topic, 0, ranges, 0, nil, func(r *kgo.Record) error {
			got[string(r.Value)] = true
			return nil
		})
		n := c.fetches.Load()
		l.Close()
		if err != nil || len(got) != parts {
			t.Fatalf("prefetch %v: Read got %d partitions' records, %v; want %d", prefetch, len(got), err, parts)
		}
		if n != 1 {
			t.Errorf("prefetch %v: the read of %d partitions sent %d fetch requests, want 1", prefetch, parts, n)
		}
	}
}
