package app

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// snapshotTopic writes a topic of n keys, one record each with a 100-byte value, in 3 partitions.
func snapshotTopic(b *testing.B, n int) string {
	topic := kafkatest.NewTopic(b, 3, nil)
	cl := kafkatest.Client(b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	pad := strings.Repeat("x", 80)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		key := fmt.Sprintf("key-%06d", i)
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte(`{"k":"` + key + `","pad":"` + pad + `"}`)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
				wg.Done()
			})
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d records failed", failed.Load())
	}
	return topic
}

// openSnapshot reads a from=snapshot stream up to its live frame and returns how many frames came before.
func openSnapshot(b *testing.B, url string) int {
	resp, err := http.Get(url) //nolint:noctx // read to its live frame, then closed
	if err != nil {
		b.Error(err)
		return 0
	}
	defer func() { _ = resp.Body.Close() }()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	frames := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			b.Errorf("after %d frames: %v", frames, err)
			return frames
		}
		switch {
		case strings.HasPrefix(string(line), "event: live"):
			return frames
		case strings.HasPrefix(string(line), "data: "):
			frames++
		}
	}
}

// BenchmarkSnapshot: what from=snapshot costs on a topic of 100,000 keys: one open at a time (ms/op is the
// time to "live"), from a gateway whose ring holds the topic (prefill) and from one that reads it all from
// Kafka; and storms of 100 and 1,000 opens at once (run those with -benchtime 1x: 1,000 takes minutes). It
// reports the frames before live, the Kafka reads and records of the replays, and the test process's peak
// heap above where it started (the gateways run in it).
func BenchmarkSnapshot(b *testing.B) {
	const keys = 100_000
	topic := snapshotTopic(b, keys)
	ring := startGateway(b, []string{topic}, func(c *Config) { c.Prefill = keys; c.RingBytes = 64 << 20 })
	kafka := startGateway(b, []string{topic}, func(c *Config) { c.Prefill = 0 })
	index := startGateway(b, []string{topic}, func(c *Config) {
		c.Prefill = 0 // the key index reads the topic from its start all the same
		c.TopicSnapshotIndex = map[string]string{topic: "64MiB"}
	})
	ring.waitReady(b)
	kafka.waitReady(b)
	index.waitReady(b)
	time.Sleep(2 * time.Second) // the prefill is read
	for _, bc := range []struct {
		name  string
		g     *gateway
		storm int
	}{
		{"ring", ring, 1},
		{"kafka", kafka, 1},
		{"kafka-storm-100", kafka, 100},
		{"kafka-storm-1000", kafka, 1000},
		{"ring-storm-1000", ring, 1000},
		{"index", index, 1},
		{"index-storm-100", index, 100},
		{"index-storm-1000", index, 1000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			url := bc.g.url + "/streams/" + topic + "?from=snapshot&heartbeat=0"
			reads := metricValue(b, bc.g, "ssegate_replay_reads_total")
			records := metricValue(b, bc.g, "ssegate_replay_records_total")
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base, peak := ms.HeapInuse, uint64(0)
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			frames := 0
			for b.Loop() {
				var wg sync.WaitGroup
				var n atomic.Int64
				for range bc.storm {
					wg.Go(func() { n.Add(int64(openSnapshot(b, url))) })
				}
				wg.Wait()
				frames = int(n.Load()) / bc.storm
			}
			close(stop)
			<-sampled
			if frames != keys {
				b.Errorf("%d frames before live, want %d", frames, keys)
			}
			ops := float64(b.N * bc.storm)
			b.ReportMetric(float64(frames), "frames")
			b.ReportMetric((metricValue(b, bc.g, "ssegate_replay_reads_total")-reads)/ops, "kafka-reads/open")
			b.ReportMetric((metricValue(b, bc.g, "ssegate_replay_records_total")-records)/ops, "kafka-records/open")
			b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "peak-heap-MiB")
		})
	}
}
