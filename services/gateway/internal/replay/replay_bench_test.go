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
	topic, log, ranges := coldTopic(b)
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

// BenchmarkColdReplay times reading the whole of a cold resume 10,000 records behind in each of three
// partitions (30,000 records of about 200 bytes) through a pool with an empty cache: what a client far behind
// waits for all of it, and what the fetch size trades against the time to the first record.
func BenchmarkColdReplay(b *testing.B) {
	topic, log, ranges := coldTopic(b)
	var total time.Duration
	n := 0
	for b.Loop() {
		pool := NewPool(Config{}, log)
		start := time.Now()
		got := 0
		err := pool.Read(context.Background(), topic, 0, ranges, 0, nil, func(*kgo.Record) error { got++; return nil })
		if err != nil || got != 3*coldPerPartition {
			b.Fatalf("Read: %d records, %v", got, err)
		}
		total += time.Since(start)
		n++
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "ms/all")
}

// coldPerPartition is how many records the cold benchmarks' topic holds per partition.
const coldPerPartition = 10000

// coldTopic makes the cold benchmarks' topic: three partitions of coldPerPartition records of about 200 bytes,
// and the ranges of all of them.
func coldTopic(b *testing.B) (string, *KafkaLog, []Range) {
	b.Helper()
	topic := kafkatest.NewTopic(b, 3, nil)
	cl := kafkatest.Client(b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := make([]*kgo.Record, 0, 3*coldPerPartition)
	for i := range 3 * coldPerPartition {
		recs = append(recs, &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, `{"seq":%d,"pad":"%0180d"}`, i, 0)})
	}
	kafkatest.Produce(b, cl, recs...)
	return topic, kafkaLog(b), []Range{{0, -1, coldPerPartition - 1}, {1, -1, coldPerPartition - 1}, {2, -1, coldPerPartition - 1}}
}

// BenchmarkColdResumeBatchPerRecord is BenchmarkColdResume on a topic whose records were written one per
// record batch (each produced and acknowledged before the next), the worst case for a replay: a resume 1,500
// records behind in each partition, from the middle of a block, with an empty block cache each time. It
// reports ms/first-record; ns/op is the time to read all of it.
func BenchmarkColdResumeBatchPerRecord(b *testing.B) {
	for _, parts := range []int{1, 3} {
		b.Run(fmt.Sprintf("p%d", parts), func(b *testing.B) {
			const perPartition = 2000
			topic := kafkatest.NewTopic(b, int32(parts), nil)
			cl := kafkatest.Client(b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ctx := kafkatest.Context(b)
			for i := range parts * perPartition {
				r := &kgo.Record{Partition: int32(i % parts), Value: fmt.Appendf(nil, `{"seq":%d,"pad":"%0180d"}`, i, 0)}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
			log := kafkaLog(b)
			var ranges []Range
			for p := range parts {
				ranges = append(ranges, Range{Partition: int32(p), After: perPartition - 1500 - 1, Upto: perPartition - 1})
			}
			var total time.Duration
			n := 0
			for b.Loop() {
				pool := NewPool(Config{}, log)
				start := time.Now()
				got := 0
				// The read goes on to the end, as a resuming client's does, so that no fetch of this
				// iteration is still under way in the next.
				err := pool.Read(context.Background(), topic, 0, ranges, 0, nil, func(*kgo.Record) error {
					if got == 0 {
						total += time.Since(start)
					}
					got++
					return nil
				})
				if err != nil || got != 1500*parts {
					b.Fatalf("Read: %d records, %v", got, err)
				}
				n++
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "ms/first-record")
		})
	}
}
