package app

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/otlptest"
	"github.com/ssegate/ssegate/pkg/sse"
	tel "github.com/ssegate/ssegate/pkg/telemetry"
)

// TestTracing: with otlp-endpoint set, a stream's start, its resume decision and the replay blocks it reads
// reach an OTLP/HTTP receiver as spans of the trace its request's traceparent names, with their attributes
// and the gateway's resource; the flow metrics and the resource show on /metrics too.
func TestTracing(t *testing.T) {
	rcv := otlptest.NewReceiver()
	defer rcv.Close()
	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}, &kgo.Record{Value: []byte("c")})
	// No prefill: the ring holds nothing of what was produced before, so a resume reads Kafka.
	g := startGateway(t, []string{topic}, func(c *Config) { c.Prefill = 0; c.OTLPEndpoint = rcv.URL })
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	const (
		trace1  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent1 = "00f067aa0ba902b7"
		trace2  = "5bf92f3577b34da6a3ce929d0e0e4737"
	)
	c1 := connectWith(t, ctx, g.url+"/streams/"+topic+"?event=message", map[string]string{
		"traceparent": "00-" + trace1 + "-" + parent1 + "-01", "Last-Event-ID": "v1:0-0",
	})
	for _, want := range []string{"b", "c"} {
		if ev := c1.next(t); ev.Data != want {
			t.Fatalf("resumed stream got %q, want %q", ev.Data, want)
		}
	}
	c2 := connectWith(t, ctx, g.url+"/streams/"+topic, map[string]string{
		"traceparent": "00-" + trace2 + "-" + parent1 + "-01", "Last-Event-ID": "nonsense",
	})
	if ev := c2.next(t); ev.Type != "resync" {
		t.Fatalf("stream with a malformed id got %q first, want a resync", ev.Type)
	}
	// A live record, for the delivery lag.
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("d")})
	if ev := c1.next(t); ev.Data != "d" {
		t.Fatalf("live record %q, want d", ev.Data)
	}

	find := func(name, traceID string) otlptest.Span {
		t.Helper()
		var got otlptest.Span
		kafkatest.WaitFor(t, 20*time.Second, "span "+name+" of trace "+traceID, func() bool {
			for _, s := range rcv.Named(name) {
				if s.TraceID == traceID {
					got = s
					return true
				}
			}
			return false
		})
		return got
	}
	start := find("ssegate.stream.start", trace1)
	if start.ParentID != parent1 {
		t.Errorf("stream start's parent = %q, want the traceparent's span %q", start.ParentID, parent1)
	}
	for k, want := range map[string]string{
		"messaging.system": "kafka", "messaging.destination.name": topic, "ssegate.stream.from": "latest",
		"ssegate.stream.events": "message", "ssegate.stream.last_event_id": "v1:0-0", "ssegate.stream.live_id": "v1:0-2",
	} {
		if got := start.Attrs[k]; got != want {
			t.Errorf("stream start attribute %s = %q, want %q", k, got, want)
		}
	}
	if start.Resource["service.name"] != tel.Gateway || start.Resource["service.version"] == "" {
		t.Errorf("resource = %v, want service.name %s and a version", start.Resource, tel.Gateway)
	}
	resume := find("ssegate.stream.resume", trace1)
	if resume.ParentID != start.SpanID || resume.Attrs["ssegate.resume.source"] != "kafka" || resume.Attrs["ssegate.replay.partitions"] != "1" {
		t.Errorf("resume span = %+v, want a child of the start with source kafka and one partition replayed", resume)
	}
	block := find("ssegate.replay.block", trace1)
	for k, want := range map[string]string{
		"messaging.destination.partition.id": "0", "ssegate.replay.from_offset": "1", "ssegate.replay.to_offset": "2",
		"ssegate.replay.records": "3", "ssegate.replay.served": "kafka", "ssegate.replay.cache_hit": "false",
	} {
		if got := block.Attrs[k]; got != want {
			t.Errorf("replay block attribute %s = %q, want %q", k, got, want)
		}
	}
	if block.ParentID != resume.SpanID {
		t.Errorf("replay block's parent = %q, want the resume span %q", block.ParentID, resume.SpanID)
	}
	resync := find("ssegate.stream.resume", trace2)
	if resync.Attrs["ssegate.resume.source"] != "resync" || resync.Attrs["ssegate.resync.reasons"] != "invalid-id" {
		t.Errorf("resume span of a malformed id = %v, want source resync, reason invalid-id", resync.Attrs)
	}

	tl := `topic="` + topic + `"`
	kafkatest.WaitFor(t, 10*time.Second, "the flow metrics", func() bool {
		return metricValue(t, g, "messaging_client_consumed_messages_total", `messaging_destination_name="`+topic+`"`,
			`messaging_destination_partition_id="0"`, `messaging_system="kafka"`) == 1 &&
			metricValue(t, g, "ssegate_feed_offset", tl, `partition="0"`) == 3 &&
			metricValue(t, g, "ssegate_delivery_lag_seconds_count", tl) >= 1
	})
	if v := metricValue(t, g, "ssegate_resume_duration_seconds_count", tl, `source="kafka"`); v != 1 {
		t.Errorf("kafka resumes timed = %v, want 1", v)
	}
	if v := metricValue(t, g, "ssegate_resume_duration_seconds_count", tl, `source="resync"`); v != 1 {
		t.Errorf("resync resumes timed = %v, want 1", v)
	}
	if v := metricValue(t, g, "target_info", `service_name="ssegate-gateway"`); v != 1 {
		t.Errorf("target_info has no service_name ssegate-gateway")
	}
	if v := metricValue(t, g, "ssegate_http_responses_total", `port="admin"`, `http_route="/readyz"`, `http_response_status_code="200"`); v < 1 {
		t.Errorf("admin /readyz answers counted = %v, want at least 1", v)
	}
	if code, _ := get(t, g.url+"/nowhere"); code != http.StatusNotFound {
		t.Fatalf("GET /nowhere = %d", code)
	}
	if v := metricValue(t, g, "ssegate_http_responses_total", `port="clients"`, `http_route="unmatched"`, `http_response_status_code="404"`); v != 1 {
		t.Errorf("unmatched answers counted = %v, want 1", v)
	}
}

// connectWith opens a stream with request headers; its events are read from the first.
func connectWith(t *testing.T, ctx context.Context, url string, headers map[string]string) *sseClient {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return &sseClient{resp: resp, p: sse.NewParser(bufio.NewReader(resp.Body))}
}

// TestOTLPSetting: otlp-endpoint comes from its flag, SSEGATE_OTLP_ENDPOINT or the standard
// OTEL_EXPORTER_OTLP_ENDPOINT, and a value that is not an http(s) URL is refused naming the setting.
func TestOTLPSetting(t *testing.T) {
	base := map[string]string{"KAFKA_BROKERS": "127.0.0.1:9092", "SSEGATE_TOPICS": "t"}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"off by default", nil, nil, "", false},
		{"the standard variable", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318", false},
		{"the gateway's own wins", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "SSEGATE_OTLP_ENDPOINT": "http://d:4318"}, "http://d:4318", false},
		{"the flag", []string{"--otlp-endpoint", "https://e/otlp"}, nil, "https://e/otlp", false},
		{"not a URL", []string{"--otlp-endpoint", "c:4317"}, nil, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			cfg, err := Load(tc.args, func(k string) string { return env[k] }, io.Discard)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "otlp-endpoint") {
					t.Fatalf("Load = %v, want an error naming otlp-endpoint", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.OTLPEndpoint != tc.want {
				t.Errorf("otlp endpoint = %q, want %q", cfg.OTLPEndpoint, tc.want)
			}
		})
	}
}

// TestShutdownExportsLastSpans: a drain that uses its whole window (a connection that never sends its request
// keeps http.Server.Shutdown waiting) still lets the spans of the streams' last moments out before Run returns:
// telemetry stops with a deadline of its own, after the drain's. Kafka is not needed: a stream waiting for its
// topic has a start span, which ends when the drain ends the stream.
func TestShutdownExportsLastSpans(t *testing.T) {
	rcv := otlptest.NewReceiver()
	defer rcv.Close()
	cfg := defaults()
	cfg.Kafka.Brokers = []string{"127.0.0.1:1"}
	cfg.Topics, cfg.DemoTopic = []string{"orders"}, "orders"
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Drain, cfg.WriteTimeout = 100*time.Millisecond, 100*time.Millisecond // the drain's deadline: 1.2 s
	cfg.OTLPEndpoint = rcv.URL
	var logs lockedBuffer
	a, err := New(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	br := openRaw(t, ctx, "http://"+a.Addr().String()+"/streams/orders?heartbeat=100")
	if line := readLines(t, br, 1)[0]; !strings.HasPrefix(line, "retry:") {
		t.Fatalf("stream opens with %q", line)
	}
	// Accepted, and new: Shutdown waits for such a connection for 5 s, beyond the drain's deadline.
	var d net.Dialer
	idle, err := d.DialContext(ctx, "tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = idle.Close() }()

	began := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	if took := time.Since(began); took < cfg.Drain+cfg.WriteTimeout+time.Second {
		t.Fatalf("Run returned after %v: the drain did not use its window, the test proves nothing", took)
	}
	if len(rcv.Named("ssegate.stream.start")) == 0 {
		t.Error("the stream's start span was not exported before Run returned")
	}
	if l := logs.String(); strings.Contains(l, "tracing shutdown") || strings.Contains(l, "telemetry shutdown") {
		t.Errorf("telemetry did not stop cleanly:\n%s", l)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes (a log handler's) and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
