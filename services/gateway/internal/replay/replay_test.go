package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// kafkaLog returns a Log of the test cluster, closed when the test ends.
func kafkaLog(t testing.TB) *KafkaLog {
	t.Helper()
	l, err := NewKafkaLog(kgo.SeedBrokers(kafkatest.Brokers(t)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// TestReadInterleavesByTimestamp reads exact ranges of three partitions and gets them in timestamp order.
func TestReadInterleavesByTimestamp(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := range 60 {
		// Timestamps interleave the partitions: record i has time base+i ms, on partition i%3.
		recs = append(recs, &kgo.Record{Partition: int32(i % 3), Timestamp: base.Add(time.Duration(i) * time.Millisecond), Value: fmt.Appendf(nil, "%d", i)})
	}
	kafkatest.Produce(t, cl, recs...)
	pool := NewPool(Config{Readers: 1}, kafkaLog(t))
	ctx := kafkatest.Context(t)
	// Partition 0 holds records 0,3,6,..,57 at offsets 0..19; read offsets 5..9 of it, 0..19 of partition 1,
	// and nothing of partition 2.
	var got []string
	err := pool.Read(ctx, topic, 0, []Range{{Partition: 0, After: 4, Upto: 9}, {Partition: 1, After: -1, Upto: 19}, {Partition: 2, After: 3, Upto: 3}},
		0, nil, func(r *kgo.Record) error {
			got = append(got, string(r.Value))
			return nil
		})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	var want []string
	for i := range 60 {
		p, off := i%3, i/3
		if (p == 0 && off >= 5 && off <= 9) || p == 1 {
			want = append(want, fmt.Sprint(i))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Read delivered\n%v\nwant\n%v", got, want)
	}
	if pool.Stats.Records.Load() != int64(len(want)) || pool.Stats.Reads.Load() != 2 {
		t.Errorf("stats: %d records %d reads, want %d records from 2 reads (a block of each partition)", pool.Stats.Records.Load(), pool.Stats.Reads.Load(), len(want))
	}
}

// TestReadOutOfRange: a range starting below the low watermark is an *OutOfRangeError.
func TestReadOutOfRange(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	for i := range 10 {
		kafkatest.Produce(t, cl, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)})
	}
	ctx := kafkatest.Context(t)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5})
	if _, err := kafkatest.Admin(t).DeleteRecords(ctx, os); err != nil {
		t.Fatal(err)
	}
	pool := NewPool(Config{}, kafkaLog(t))
	err := pool.Read(ctx, topic, 0, []Range{{Partition: 0, After: 1, Upto: 9}}, 0, nil, func(*kgo.Record) error { return nil })
	var oor *OutOfRangeError
	if !errors.As(err, &oor) || oor.Partition != 0 {
		t.Fatalf("Read below the low watermark: %v, want an OutOfRangeError", err)
	}
	// Past the end is not below the low watermark.
	kl := kafkaLog(t)
	if _, _, err := kl.Fetch(ctx, topic, 0, 50); err == nil || errors.As(err, &oor) {
		t.Fatalf("fetch past the end: %v, want an error that is not an OutOfRangeError", err)
	}
}

// TestReadPastTransactionMarkers: offsets that hold no record for a read_committed reader (commit and abort
// markers, aborted records) end a range at once, whether or not a record follows them; a range whose end
// never comes fails with an *IdleError instead of ending short.
func TestReadPastTransactionMarkers(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-txn"))
	ctx := kafkatest.Context(t)
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, "a", "b", "c") // offsets 0-2, commit marker 3
	txn(false, "x", "y")     // aborted 4-5, abort marker 6
	txn(true, "d", "e")      // offsets 7-8, commit marker 9
	txn(false, "z")          // aborted 10, abort marker 11: the log ends with an aborted tail
	pool := NewPool(Config{Idle: 2 * time.Second}, kafkaLog(t))
	for _, tc := range []struct {
		after, upto int64
		want        string
	}{
		{-1, 3, "[a b c]"}, // a commit marker
		{-1, 5, "[a b c]"}, // an aborted record
		{-1, 6, "[a b c]"}, // an abort marker
		{-1, 8, "[a b c d e]"},
		{8, 9, "[]"},     // the last commit marker, no record after it (prefill 0 starts here)
		{2, 11, "[d e]"}, // to the end of an aborted tail
		{3, 6, "[]"},     // nothing but an aborted transaction
	} {
		var got []string
		start := time.Now()
		err := pool.Read(ctx, topic, 0, []Range{{Partition: 0, After: tc.after, Upto: tc.upto}}, 0, nil, func(r *kgo.Record) error {
			got = append(got, string(r.Value))
			return nil
		})
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("Read (%d, %d]: %v, %v; want %s", tc.after, tc.upto, got, err, tc.want)
		}
		if took := time.Since(start); took >= time.Second {
			t.Errorf("Read (%d, %d] took %v: it waited for silence", tc.after, tc.upto, took)
		}
		pool.cache.purge()
	}
	// Offset 13 is past the log's end (12): the log never gets there.
	err := pool.Read(ctx, topic, 0, []Range{{Partition: 0, After: 8, Upto: 13}}, 0, nil, func(*kgo.Record) error { return nil })
	var idle *IdleError
	if !errors.As(err, &idle) || idle.Partition != 0 {
		t.Fatalf("Read of a range whose end never comes: %v, want an IdleError", err)
	}
}

// TestAcquireBoundsReaders: no more than Readers run at once, and a waiting caller's idle callback runs.
func TestAcquireBoundsReaders(t *testing.T) {
	pool := NewPool(Config{Readers: 2}, nil)
	var running, most atomic.Int64
	var idles atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			release, err := pool.Acquire(context.Background(), time.Millisecond, func() error { idles.Add(1); return nil })
			if err != nil {
				t.Error(err)
				return
			}
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			running.Add(-1)
			release()
		})
	}
	wg.Wait()
	if most.Load() != 2 {
		t.Errorf("at most %d readers ran at once, want 2", most.Load())
	}
	if idles.Load() == 0 {
		t.Error("waiting callers were never asked to keep their connection alive")
	}
	// A waiting caller whose idle callback fails gives up with that error.
	r1, _ := pool.Acquire(context.Background(), 0, nil)
	r2, _ := pool.Acquire(context.Background(), 0, nil)
	boom := errors.New("client gone")
	if _, err := pool.Acquire(context.Background(), time.Millisecond, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Acquire with a failing idle callback: %v", err)
	}
	r1()
	r2()
}

// TestReadShared: many connections replaying the same stretch at once read each block from Kafka once.
func TestReadShared(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 400 {
		recs = append(recs, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)})
	}
	kafkatest.Produce(t, cl, recs...)
	pool := NewPool(Config{Readers: 2, BlockSize: 64}, kafkaLog(t))
	ctx := kafkatest.Context(t)
	const readers = 20
	var wg sync.WaitGroup
	counts := make([]int, readers)
	for i := range readers {
		wg.Go(func() {
			// Each starts a little later in partition 0 (offsets 0..199 in each partition).
			err := pool.Read(ctx, topic, 0, []Range{{Partition: 0, After: int64(i) - 1, Upto: 199}, {Partition: 1, After: -1, Upto: 199}},
				time.Millisecond, func() error { return nil }, func(*kgo.Record) error { counts[i]++; return nil })
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, n := range counts {
		if want := 200 - i + 200; n != want {
			t.Errorf("reader %d got %d records, want %d", i, n, want)
		}
	}
	// 200 offsets per partition in blocks of 64: 4 blocks each, 8 in all.
	if reads := pool.Stats.Reads.Load(); reads != 8 {
		t.Errorf("%d readers made %d Kafka reads, want 8 (one per block)", readers, reads)
	}
	if pool.Stats.CacheHits.Load() == 0 {
		t.Error("no block was shared")
	}
}
