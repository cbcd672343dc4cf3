package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// benchEvents is how many events one run of BenchmarkIngestThroughput carries.
const benchEvents = 100_000

// BenchmarkIngestThroughput measures events per second from one upstream through one source into a real
// one-partition topic: each iteration serves benchEvents pre-built events of 200 bytes of data (format raw,
// so 200-byte record values) as fast as the loopback connection takes them, with the production commit
// settings (100ms, 1000 events), and stops the clock when a read_committed consumer has seen them all.
// The time includes the source's start (fencing, checkpoint read). Skipped without KAFKA_BROKERS.
//
//	pkg/kafkatest/with-services.sh go test -run '^$' -bench IngestThroughput -benchtime 3x ./services/ingest/internal/source/
func BenchmarkIngestThroughput(b *testing.B) {
	brokers := kafkatest.Brokers(b)
	body, offsets := benchBody(benchEvents, 200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from := 0 // byte offset after the event named by Last-Event-ID, so a reconnect does not duplicate
		if n, err := strconv.Atoi(r.Header.Get("Last-Event-ID")); err == nil && n >= 1 && n <= len(offsets) {
			from = offsets[n-1]
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for rest := body[from:]; len(rest) > 0; {
			n := min(len(rest), 64<<10)
			if _, err := w.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
		<-r.Context().Done() // hold the stream open, as a live upstream would
	}))
	b.Cleanup(srv.Close)
	compact := "compact"
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		cp := kafkatest.NewTopic(b, 1, map[string]*string{"cleanup.policy": &compact})
		topic := kafkatest.NewTopic(b, 1, nil)
		opt := Options{
			Kafka:           []kgo.Opt{kgo.SeedBrokers(brokers...)},
			CheckpointTopic: cp,
			Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
		spec := Spec{Name: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i), URL: srv.URL, Topic: topic, Format: FormatRaw}
		ctx, cancel := context.WithCancel(b.Context())
		consumer := kafkatest.Client(b,
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
		src := New(spec, opt)
		done := make(chan error, 1)
		b.StartTimer()
		began := time.Now()
		go func() { done <- src.Run(ctx) }()
		seen, err := benchConsume(ctx, consumer, benchEvents)
		elapsed := time.Since(began)
		b.StopTimer()
		cancel()
		if runErr := <-done; runErr != nil && !errors.Is(runErr, context.Canceled) {
			b.Fatalf("source: %v", runErr)
		}
		if err != nil {
			b.Fatalf("consumer saw %d of %d events: %v", seen, benchEvents, err)
		}
		if c := src.Stats().Connects.Load(); c != 1 {
			b.Fatalf("the source connected %d times, want 1 (a reconnect would skew the figure)", c)
		}
		total += elapsed
		b.StartTimer()
	}
	b.ReportMetric(float64(benchEvents)*float64(b.N)/total.Seconds(), "events/s")
}

// benchBody returns n events with ids 1..n and size bytes of data each, and the byte offset after each.
func benchBody(n, size int) ([]byte, []int) {
	var sb strings.Builder
	offsets := make([]int, n)
	for i := 1; i <= n; i++ {
		id := strconv.Itoa(i)
		data := id + strings.Repeat("x", size-len(id))
		sb.WriteString("id: " + id + "\ndata: " + data + "\n\n")
		offsets[i-1] = sb.Len()
	}
	return []byte(sb.String()), offsets
}

// benchConsume counts the records a read_committed consumer sees until there are n, giving up after 60s.
// It checks that record i holds event i, so that a lost or duplicated event fails the benchmark.
func benchConsume(ctx context.Context, cl *kgo.Client, n int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	seen := 0
	for seen < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return seen, err
		}
		var bad error
		fs.EachError(func(t string, p int32, err error) { bad = fmt.Errorf("fetch %s/%d: %w", t, p, err) })
		if bad != nil {
			return seen, bad
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if want := strconv.Itoa(seen); bad == nil && !strings.HasPrefix(string(r.Value), want+"x") {
				bad = fmt.Errorf("record %d holds %.12q..., want event %s", seen, r.Value, want)
			}
		})
		if bad != nil {
			return seen, bad
		}
	}
	return seen, nil
}
