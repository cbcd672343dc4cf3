package app

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/otlptest"
	"github.com/ssegate/ssegate/pkg/ssetest"
	tel "github.com/ssegate/ssegate/pkg/telemetry"
)

// TestTracing: with otlp-endpoint set, a source's checkpoint read, its connection (whose request carries the
// span's traceparent to the upstream) and its commits reach an OTLP/HTTP receiver as spans with their
// attributes and ingest's resource; records produced and commit latency show on /metrics, with the resource.
func TestTracing(t *testing.T) {
	rcv := otlptest.NewReceiver()
	defer rcv.Close()
	brokers := kafkatest.Brokers(t)
	up := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: 3, Type: "tick", Every: 5 * time.Millisecond, Hold: true}))
	topic := kafkatest.NewTopic(t, 1, nil)
	cpTopic := kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), cpTopic) })
	cfgFile := writeConfig(t, `
commit-interval: 20ms
sources:
  - name: ticks
    url: `+up.URL+`/stream?token=secret
    topic: `+topic+`
`)
	cfg, err := Load([]string{"--config", cfgFile, "--listen", "127.0.0.1:0", "--checkpoint-topic", cpTopic},
		env(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ","), "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OTLPEndpoint != rcv.URL {
		t.Fatalf("otlp endpoint = %q, want OTEL_EXPORTER_OTLP_ENDPOINT's %q", cfg.OTLPEndpoint, rcv.URL)
	}
	a, err := New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
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
	readTopic(t, topic, 3)

	one := func(name string) otlptest.Span {
		t.Helper()
		var got otlptest.Span
		kafkatest.WaitFor(t, 20*time.Second, "span "+name, func() bool {
			spans := rcv.Named(name)
			if len(spans) > 0 {
				got = spans[0]
			}
			return len(spans) > 0
		})
		return got
	}
	cp := one("ssegate.ingest.checkpoint")
	if cp.Attrs["ssegate.ingest.source"] != "ticks" || cp.Attrs["ssegate.ingest.checkpoint.found"] != "false" {
		t.Errorf("checkpoint span attributes = %v, want source ticks, no checkpoint found", cp.Attrs)
	}
	if cp.Resource["service.name"] != tel.Ingest || cp.Resource["service.version"] == "" {
		t.Errorf("resource = %v, want service.name %s and a version", cp.Resource, tel.Ingest)
	}
	conn := one("ssegate.ingest.connect")
	for k, want := range map[string]string{
		"ssegate.ingest.source": "ticks", "server.address": "127.0.0.1", "url.path": "/stream",
		"http.request.method": "GET", "http.response.status_code": "200",
	} {
		if got := conn.Attrs[k]; got != want {
			t.Errorf("connect span attribute %s = %q, want %q", k, got, want)
		}
	}
	// The upstream got the connection span's trace context.
	reqs := up.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream saw no request")
	}
	if tp := reqs[0].Header.Get("traceparent"); !strings.Contains(tp, conn.TraceID) || !strings.Contains(tp, conn.SpanID) {
		t.Errorf("upstream request traceparent = %q, want trace %s span %s", tp, conn.TraceID, conn.SpanID)
	}
	var records int
	kafkatest.WaitFor(t, 20*time.Second, "commit spans with the 3 records", func() bool {
		records = 0
		for _, s := range rcv.Named("ssegate.ingest.commit") {
			if s.Attrs["messaging.destination.name"] != topic || s.Attrs["messaging.system"] != "kafka" || s.Error {
				t.Fatalf("commit span = %+v", s)
			}
			switch s.Attrs["ssegate.ingest.records"] {
			case "1":
				records++
			case "2":
				records += 2
			case "3":
				records += 3
			}
		}
		return records == 3
	})

	base := "http://" + a.Addr().String()
	metric := func(name string, labels ...string) string {
		t.Helper()
		_, body := get(t, base+"/metrics")
		for _, line := range strings.Split(body, "\n") {
			ok := strings.HasPrefix(line, name+"{")
			for _, l := range labels {
				ok = ok && strings.Contains(line, l)
			}
			if ok {
				return line[strings.LastIndexByte(line, ' ')+1:]
			}
		}
		t.Errorf("no %s%v in /metrics:\n%s", name, labels, body)
		return ""
	}
	if v := metric("messaging_client_sent_messages_total", `source="ticks"`, `messaging_destination_name="`+topic+`"`, `messaging_operation_name="send"`); v != "3" {
		t.Errorf("sent messages = %s, want 3", v)
	}
	if v := metric("ssegate_ingest_commit_duration_seconds_count", `source="ticks"`); v == "0" {
		t.Errorf("no commit timed")
	}
	metric("target_info", `service_name="ssegate-ingest"`)
	if v := metric("ssegate_http_responses_total", `http_route="/metrics"`, `http_response_status_code="200"`); v == "0" {
		t.Errorf("no /metrics answer counted")
	}
}
