package replay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// Shape of the storm: stormPartitions partitions of stormBlocks blocks of 1,024 records of 1 KiB (as many
// blocks as the cache of 256 blocks this bound replaced kept, about 300 MiB of records), and stormClients
// clients, each behind by up to the whole partition, reading stormRead records from where it is.
const (
	stormPartitions = 4
	stormBlocks     = 64
	stormClients    = 400
	stormRead       = 4096
	stormValue      = 1 << 10
)

// BenchmarkReconnectStorm is a reconnect storm against the replay pool: stormClients clients of a topic of 1
// KiB records resume at once from random positions in its partitions, each reading stormRead records, through
// a pool with an empty cache each time, bounded by the default (32 MiB) and by 512 MiB (enough for every block
// the storm reads: what copying the records costs, without the reads a smaller cache takes again). The log
// answers as franz-go decodes fetches, in buffers a kept record would keep (batchLog). It reports the most the
// cache and the blocks being read held (cache-MiB-max) against the bound (bound-MiB), the most heap in use
// while the storms ran (heap-MiB-max: garbage not yet collected included) and the most live heap a collection
// found (live-MiB-max), both with the log's own records (log-MiB: the heap in use before the storms), the heap
// the last pool still holds once its storm is over (retained-MiB: heap in use after a collection, less
// log-MiB), and the blocks each storm read from the log (kafka-reads/op). ns/op is one storm.
func BenchmarkReconnectStorm(b *testing.B) {
	kc := memlog.New()
	kc.CreateTopic("t", stormPartitions)
	value := make([]byte, stormValue) // shared by the log's records: the log's own memory stays small
	for i := range stormPartitions * stormBlocks * 1024 {
		kc.Produce("t", &kgo.Record{Partition: int32(i % stormPartitions), Value: value})
	}
	log := &batchLog{Log: kc}
	for _, bound := range []int64{replay.DefaultCacheBytes, 512 << 20} {
		b.Run(fmt.Sprintf("bound=%dMiB", bound>>20), func(b *testing.B) { stormBench(b, log, bound) })
	}
}

// stormBench runs BenchmarkReconnectStorm's storms against log with a cache of bound bytes.
func stormBench(b *testing.B, log replay.Log, bound int64) {
	b.ReportAllocs()
	base := heapInUse(true)
	var peakHeap, peakLive, peakCache int64
	stop := sampleHeap(&peakHeap, &peakLive)
	var pool *replay.Pool
	var reads, n int64
	for b.Loop() {
		pool = replay.NewPool(replay.Config{CacheBytes: bound}, log)
		storm(b, pool)
		peakCache = max(peakCache, replay.CachePeak(pool))
		reads += pool.Stats.Reads.Load()
		n++
	}
	stop()
	retained := heapInUse(true) - base
	runtime.KeepAlive(pool)
	const mib = 1 << 20
	b.ReportMetric(float64(peakCache)/mib, "cache-MiB-max")
	b.ReportMetric(float64(bound)/mib, "bound-MiB")
	b.ReportMetric(float64(peakHeap)/mib, "heap-MiB-max")
	b.ReportMetric(float64(peakLive)/mib, "live-MiB-max")
	b.ReportMetric(float64(retained)/mib, "retained-MiB")
	b.ReportMetric(float64(base)/mib, "log-MiB")
	b.ReportMetric(float64(reads)/float64(n), "kafka-reads/op")
	if peakCache > bound {
		b.Fatalf("the cache held %d bytes, more than its bound of %d", peakCache, bound)
	}
}

// storm has stormClients clients read from pool at once, each stormRead records of a partition from a
// random position in it.
func storm(b *testing.B, pool *replay.Pool) {
	b.Helper()
	rnd := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // reproducible positions
	last := int64(stormBlocks*1024 - 1)
	var wg sync.WaitGroup
	errs := make(chan error, stormClients)
	for range stormClients {
		p, after := int32(rnd.IntN(stormPartitions)), rnd.Int64N(last)-1
		upto := min(after+stormRead, last)
		wg.Go(func() {
			errs <- pool.Read(context.Background(), "t", 0, []replay.Range{{Partition: p, After: after, Upto: upto}}, 0, nil,
				func(*kgo.Record) error { return nil })
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatalf("Read: %v", err)
		}
	}
}

// heapInUse returns the bytes of the heap's spans in use, after a collection if gc.
func heapInUse(gc bool) int64 {
	if gc {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse) //nolint:gosec // a heap size fits in int64
}

// sampleHeap keeps the most heap in use in *peak and the most live heap (as the last collection found it)
// in *live, sampled every 10ms, until the function it returns is called.
func sampleHeap(peak, live *int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			*peak = max(*peak, heapInUse(false))
			metrics.Read(sample)
			*live = max(*live, int64(sample[0].Value.Uint64())) //nolint:gosec // a heap size fits in int64
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
