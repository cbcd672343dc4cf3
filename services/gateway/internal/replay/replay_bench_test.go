package replay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

var errFirst = errors.New("first record")

// BenchmarkColdResume measures what a resume from Kafka waits for before its first record: a pool with an
// empty block cache reads 10,000 records behind in each of three partitions (a 30 s gap at 1000 records/s),
// and the clock stops at the first record handed on, with a new pool (an empty block cache) each time. It
// reports ms/first-record; ignore ns/op.
func BenchmarkColdResume(b *testing.B) {
	topic := kafkatest.NewTopic(b, 3, nil)
	cl := kafkatest.Client(b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const perPartition = 10000
	recs := make([]*kgo.Record, 0, 3*perPartition)
	for i := range 3 * perPartition {
		recs = append(recs, &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, `{"seq":%d,"pad":"%0180d"}`, i, 0)})
	}
	kafkatest.Produce(b, cl, recs...)
	log := kafkaLog(b)
	ranges := []Range{{0, -1, perPartition - 1}, {1, -1, perPartition - 1}, {2, -1, perPartition - 1}}
	var total time.Duration
	n := 0
	for b.Loop() {
		pool := NewPool(Config{}, log)
		start := time.Now()
		err := pool.Read(context.Background(), topic, 0, ranges, 0, nil, func(*kgo.Record) error { return errFirst })
		if !errors.Is(err, errFirst) {
			b.Fatalf("Read: %v", err)
		}
		total += time.Since(start)
		n++
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "ms/first-record")
}
