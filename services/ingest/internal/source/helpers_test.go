package source

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// checkFor polls cond every 10ms until it holds, failing the test with what after timeout.
func checkFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	kafkatest.WaitFor(t, timeout, what, cond)
}

// testOptions returns Options against the test cluster with a fresh compacted checkpoint topic and fast
// reconnects.
func testOptions(t *testing.T) Options {
	t.Helper()
	compact := "compact"
	cp := kafkatest.NewTopic(t, 1, map[string]*string{"cleanup.policy": &compact})
	return Options{
		Kafka:              []kgo.Opt{kgo.SeedBrokers(kafkatest.Brokers(t)...)},
		CheckpointTopic:    cp,
		CommitInterval:     20 * time.Millisecond,
		BackoffMin:         10 * time.Millisecond,
		BackoffMax:         50 * time.Millisecond,
		TransactionTimeout: 10 * time.Second,
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// running is a Source running on its own goroutine.
type running struct {
	src    *Source
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, spec Spec, opt Options) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{src: New(spec, opt), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- r.src.Run(ctx) }()
	t.Cleanup(func() { _ = r.stop(t) })
	return r
}

// stop cancels the source and waits for Run to return, returning its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("source did not stop within 30s")
		return nil
	}
}

// readCommitted returns the data records of topic visible to a read_committed consumer, in offset
// order (topic must have one partition). It reads to the log's end, whose last entry is usually a
// transaction marker, which is why control records are fetched and then dropped.
func readCommitted(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	ctx := kafkatest.Context(t)
	ends, err := kafkatest.Admin(t).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end = o.Offset })
	if end == 0 {
		return nil
	}
	cl := kafkatest.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	var out []*kgo.Record
	for last := int64(-1); last < end-1; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("fetch %s: %v", topic, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			last = r.Offset
			if !r.Attrs.IsControl() && r.Offset < end {
				out = append(out, r)
			}
		})
	}
	return out
}

// values returns the records' values as strings.
func values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
