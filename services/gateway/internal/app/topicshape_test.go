package app

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// openRaw opens a stream and returns its body as lines, failing t unless the answer is a 200 event stream.
func openRaw(t *testing.T, ctx context.Context, url string) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s = %d %q %s, want a 200 event stream", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return bufio.NewReader(resp.Body)
}

// readLines reads n lines.
func readLines(t *testing.T, br *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for range n {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		out = append(out, strings.TrimSuffix(line, "\n"))
	}
	return out
}

// TestStreamWaitsForConfiguredTopic: a stream of a configured topic that Kafka does not have yet is accepted
// (200, retry:, an empty position, keep-alives) and delivers the topic's records from its start once it is
// created; a browser opened in that window keeps working.
func TestStreamWaitsForConfiguredTopic(t *testing.T) {
	topic := kafkatest.TopicName(t)
	g := startGateway(t, []string{topic}, func(c *Config) { c.MetadataInterval = 10 * time.Second })
	kafkatest.WaitFor(t, 30*time.Second, "readyz to name the missing topic", func() bool {
		code, body := get(t, g.url+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "does not exist")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	br := openRaw(t, ctx, g.url+"/streams/"+topic+"?heartbeat=200")
	if got := readLines(t, br, 5); got[0] != "retry: 3000" || got[1] != "id: v1:" || got[2] != "" || got[3] != ": keep-alive" {
		t.Fatalf("stream of a topic not created yet opens with %q, want retry, id: v1:, keep-alives", got)
	}
	kafkatest.CreateTopic(t, topic, 1, nil)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), topic) })
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	// Produced right after creation: the gateway looks for the topic every second, not every 10 s, and
	// reads it from its start.
	start := time.Now()
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("first")}, &kgo.Record{Value: []byte("second")})
	p := sse.NewParser(br)
	for i, want := range []string{"first", "second"} {
		ev, err := p.Next()
		if err != nil || ev.Data != want || ev.ID != "v1:0-"+string(rune('0'+i)) {
			t.Fatalf("event %d = %+v, %v; want %s", i, ev, err, want)
		}
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("the first record took %v to arrive: the topic was not looked for every second", took)
	}
}

// TestStreamWhileKafkaUnreachable: a configured topic is never answered 404 because of the broker's state;
// with no broker reachable the stream opens and keeps alive, and /readyz says why it is not ready.
func TestStreamWhileKafkaUnreachable(t *testing.T) {
	topic := kafkatest.TopicName(t)
	g := startGateway(t, []string{topic}, func(c *Config) { c.Kafka.Brokers = []string{"127.0.0.1:1"} })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	br := openRaw(t, ctx, g.url+"/streams/"+topic+"?heartbeat=200")
	// No position: nobody knows yet whether the topic exists.
	if got := readLines(t, br, 3); got[0] != "retry: 3000" || got[1] != ": keep-alive" || got[2] != "" {
		t.Fatalf("stream with Kafka unreachable opens with %q, want retry and keep-alives", got)
	}
	if code, body := get(t, g.url+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "metadata") {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	if code, _ := get(t, g.url+"/streams/nope"); code != http.StatusNotFound {
		t.Fatalf("a topic that is not configured = %d, want 404", code)
	}
}
