package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// readTopic reads topic (one partition) read_committed until it holds n data records.
func readTopic(t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := kafkatest.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx := kafkatest.Context(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s", len(out), n, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestAppEndToEnd runs the service with two sources, a checkpoint topic it creates itself, restarts it,
// and checks records, headers, formats and the HTTP endpoints.
func TestAppEndToEnd(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	up := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: 5, Type: "tick", Every: 5 * time.Millisecond, Hold: true}))
	other := ssetest.New(t, ssetest.Status(http.StatusNoContent))
	topic := kafkatest.NewTopic(t, 1, nil)
	cpTopic := kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), cpTopic) })
	cfgFile := writeConfig(t, `
commit-interval: 20ms
sources:
  - name: ticks
    url: `+up.URL+`/stream
    topic: `+topic+`
    key: id
  - name: gone
    url: `+other.URL+`
    topic: `+topic+`
`)
	cfg, err := Load([]string{"--config", cfgFile, "--listen", "127.0.0.1:0", "--checkpoint-topic", cpTopic},
		env(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ",")}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	run := func() (*App, func()) {
		a, err := New(cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		return a, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}

	a, stop := run()
	base := "http://" + a.Addr().String()
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz %d", code)
	}
	kafkatest.WaitFor(t, 30*time.Second, "readyz", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })
	recs := readTopic(t, topic, 5)
	kafkatest.WaitFor(t, 30*time.Second, "the 204 source to stop", func() bool {
		return a.Sources()[1].Status().State == source.StateStopped && a.Sources()[1].Status().LastReason == "no-content"
	})
	for i, r := range recs {
		var env map[string]string
		if err := json.Unmarshal(r.Value, &env); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		id := string(rune('1' + i))
		if env["event"] != "tick" || env["id"] != id || env["data"] != "event-"+id || string(r.Key) != id {
			t.Errorf("record %d: key %q value %s", i, r.Key, r.Value)
		}
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		if hs["event"] != "tick" || hs["sse_id"] != id || hs["source"] != "ticks" {
			t.Errorf("record %d headers %v", i, hs)
		}
	}
	_, body := get(t, base+"/sources")
	var st struct {
		Sources []struct {
			Name, State, Owner, Topic string
			LastID                    string `json:"last_id"`
			LastReason                string `json:"last_reason"`
		}
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Sources) != 2 {
		t.Fatalf("/sources %s: %v", body, err)
	}
	if s := st.Sources[0]; s.Name != "ticks" || s.State != source.StateStreaming || s.LastID != "5" || s.Owner == "" || s.Topic != topic {
		t.Errorf("/sources ticks entry %+v", s)
	}
	if s := st.Sources[1]; s.State != source.StateStopped || s.LastReason != "no-content" {
		t.Errorf("/sources gone entry %+v", s)
	}
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{
		`ssegate_ingest_records_total{source="ticks"} 5`,
		`ssegate_ingest_events_total{source="ticks"} 5`,
		`ssegate_ingest_reconnects_total{reason="no-content",source="gone"} 1`,
		`ssegate_ingest_transactions_committed_total{source="ticks"}`,
		`ssegate_ingest_bytes_total{source="ticks"}`,
		`ssegate_ingest_source_state{source="ticks",state="streaming"} 1`,
		`ssegate_ingest_source_state{source="ticks",state="backoff"} 0`,
		`ssegate_ingest_source_state{source="gone",state="stopped"} 1`,
		`ssegate_ingest_checkpoint_timestamp_seconds{source="gone"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`(?m)^ssegate_ingest_checkpoint_timestamp_seconds\{source="ticks"\} (\S+)$`).FindStringSubmatch(metrics); m == nil {
		t.Errorf("/metrics lacks the checkpoint time of ticks")
	} else if ts, err := strconv.ParseFloat(m[1], 64); err != nil || time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("checkpoint time of ticks %s, want about now (%v)", m[1], err)
	}
	stop()

	// A restart resumes from the checkpoint: the upstream is asked for events after 5 and none repeat.
	n := up.Connections()
	_, stop = run()
	defer stop()
	kafkatest.WaitFor(t, 30*time.Second, "reconnection", func() bool { return up.Connections() > n })
	if got := up.Requests()[n].Header.Get("Last-Event-ID"); got != "5" {
		t.Fatalf("Last-Event-ID after restart %q, want 5", got)
	}
}
