package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// fetchCounter is a franz-go hook counting the records fetched from one topic.
type fetchCounter struct {
	topic string
	n     atomic.Int64
}

// OnFetchRecordBuffered implements kgo.HookFetchRecordBuffered.
func (c *fetchCounter) OnFetchRecordBuffered(r *kgo.Record) {
	if r.Topic == c.topic {
		c.n.Add(1)
	}
}

// TestCheckpointTopicReadOncePerProcess starts a process with several sources against a checkpoint topic
// that holds many checkpoints of other sources (as a shared, not yet compacted topic does). The sources
// must all resume from their own checkpoints, while the process reads the topic about once, not once per
// source.
func TestCheckpointTopicReadOncePerProcess(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	const (
		nSources = 8
		noise    = 3000 // checkpoints of other sources
	)
	compact := "compact"
	cpTopic := kafkatest.NewTopic(t, 1, map[string]*string{"cleanup.policy": &compact})
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(cpTopic))
	recs := make([]*kgo.Record, 0, noise+nSources)
	for i := range noise {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "other-%d", i%500), Value: fmt.Appendf(nil, `{"id":"%d"}`, i)})
	}
	run := strconv36(time.Now().UnixNano())
	for i := range nSources {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "once-%s-%d", run, i), Value: []byte(`{"id":"5"}`)})
	}
	kafkatest.Produce(t, cl, recs...)

	var ups []*ssetest.Server
	var file strings.Builder
	file.WriteString("commit-interval: 20ms\nsources:\n")
	topic := kafkatest.NewTopic(t, 1, nil)
	for i := range nSources {
		ups = append(ups, ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: 10, Hold: true})))
		fmt.Fprintf(&file, "  - {name: once-%s-%d, url: %s, topic: %s, format: raw}\n", run, i, ups[i].URL, topic)
	}
	cfg, err := Load([]string{"--config", writeConfig(t, file.String()), "--listen", "127.0.0.1:0", "--checkpoint-topic", cpTopic},
		env(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ",")}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	counter := &fetchCounter{topic: cpTopic}
	a, err := NewWithOptions(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Options{Kafka: []kgo.Opt{kgo.WithHooks(counter)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	for i, up := range ups {
		kafkatest.WaitFor(t, 60*time.Second, fmt.Sprintf("source %d to connect", i), func() bool { return up.Connections() >= 1 })
		if got := up.Requests()[0].Header.Get("Last-Event-ID"); got != "5" {
			t.Errorf("source %d: Last-Event-ID %q, want 5 from its checkpoint", i, got)
		}
	}
	readTopic(t, topic, nSources*5) // events 6..10 of each source
	if n := counter.n.Load(); n > 2*(noise+nSources) {
		t.Errorf("the process fetched %d checkpoint records for %d sources; the topic holds %d: want it read about once",
			n, nSources, noise+nSources)
	} else {
		t.Logf("fetched %d checkpoint records (the topic held %d before the start)", n, noise+nSources)
	}
}

func strconv36(n int64) string { return fmt.Sprintf("%x", n%(1<<40)) }
