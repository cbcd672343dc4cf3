package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// gateway is a gateway App running for a test.
type gateway struct {
	url   string // the clients' port
	admin string // the admin port
	stop  context.CancelFunc
	done  chan error
}

func startGateway(t testing.TB, topics []string, mutate func(*Config)) *gateway {
	t.Helper()
	return startGatewayOn(t, kafkatest.Brokers(t), topics, mutate)
}

// startGatewayOn starts a gateway reading the brokers (an address nothing listens on, for tests that need
// no Kafka).
func startGatewayOn(t testing.TB, brokers, topics []string, mutate func(*Config)) *gateway {
	t.Helper()
	cfg := defaults()
	cfg.Kafka.Brokers = brokers
	cfg.Topics = topics
	cfg.DemoTopic = topics[0]
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminListen = "127.0.0.1:0"
	cfg.MetadataInterval = 200 * time.Millisecond
	cfg.Drain = 500 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := New(cfg, log)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	scheme := "http://"
	if cfg.TLS.enabled() {
		scheme = "https://"
	}
	g := &gateway{url: scheme + a.Addr().String(), admin: "http://" + a.AdminAddr().String(), stop: cancel, done: make(chan error, 1)}
	go func() { g.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-g.done:
			if err != nil {
				t.Errorf("gateway Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("gateway did not stop within 30s")
		}
	})
	return g
}

func (g *gateway) waitReady(t testing.TB) {
	t.Helper()
	kafkatest.WaitFor(t, 30*time.Second, "gateway "+g.url+" to be ready", func() bool {
		code, _ := get(t, g.admin+"/readyz")
		return code == http.StatusOK
	})
}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	return getVia(t, http.DefaultClient, url)
}

// getVia is get through the client hc.
func getVia(t testing.TB, hc *http.Client, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sseClient is one streaming connection, read with the project's WHATWG parser.
type sseClient struct {
	resp      *http.Response
	p         *sse.Parser
	initialID string
}

func connect(t *testing.T, ctx context.Context, url string) *sseClient {
	t.Helper()
	return connectVia(t, ctx, http.DefaultClient, url)
}

// connectVia is connect through the client hc.
func connectVia(t *testing.T, ctx context.Context, hc *http.Client, url string) *sseClient {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	for h, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Fatalf("header %s = %q, want %q", h, got, want)
		}
	}
	br := bufio.NewReader(resp.Body)
	// The stream opens with exactly "retry: N\nid: <position>\n\n".
	retry, _ := br.ReadString('\n')
	idLine, _ := br.ReadString('\n')
	blank, _ := br.ReadString('\n')
	if !strings.HasPrefix(retry, "retry: ") || !strings.HasPrefix(idLine, "id: v1:") || blank != "\n" {
		t.Fatalf("stream opening = %q %q %q", retry, idLine, blank)
	}
	return &sseClient{resp: resp, p: sse.NewParser(br), initialID: strings.TrimSuffix(strings.TrimPrefix(idLine, "id: "), "\n")}
}

func (c *sseClient) next(t *testing.T) sse.Event {
	t.Helper()
	ev, err := c.p.Next()
	if err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return ev
}

// checkStream reads n events from c and checks them with checkEvents.
func checkStream(t *testing.T, c *sseClient, n int, records map[int32]map[int64]*kgo.Record) {
	t.Helper()
	evs := make([]sse.Event, n)
	for i := range evs {
		evs[i] = c.next(t)
	}
	checkEvents(t, c.initialID, evs, records)
}

// checkEvents checks a client's events against the topic's records: starting from the position initialID,
// each id is the previous position with exactly one partition moved to the record's offset, every
// partition's offsets come in order with no gap, and each event's data and type are the record's.
func checkEvents(t *testing.T, initialID string, evs []sse.Event, records map[int32]map[int64]*kgo.Record) {
	t.Helper()
	pos := position.MustParse(initialID)
	for i, ev := range evs {
		id, err := position.Parse(ev.ID)
		if err != nil {
			t.Fatalf("event %d: id %q: %v", i, ev.ID, err)
		}
		var moved []position.Entry
		for j := range id.Len() {
			e := id.At(j)
			if old, ok := pos.Offset(e.Partition); !ok || old != e.Offset {
				moved = append(moved, e)
			}
		}
		if len(moved) != 1 || id.Len() < pos.Len() {
			t.Fatalf("event %d: id %s after %s moves %d partitions, want exactly 1", i, id, pos, len(moved))
		}
		m := moved[0]
		want := int64(0)
		if old, ok := pos.Offset(m.Partition); ok {
			want = old + 1
		}
		if m.Offset != want {
			t.Fatalf("event %d: partition %d jumped to offset %d, want %d (gap or duplicate)", i, m.Partition, m.Offset, want)
		}
		rec := records[m.Partition][m.Offset]
		if rec == nil {
			t.Fatalf("event %d: no record at partition %d offset %d", i, m.Partition, m.Offset)
		}
		wantType := "message"
		for _, h := range rec.Headers {
			if h.Key == "event" {
				wantType = string(h.Value)
			}
		}
		if got := valueOf(t, ev.Data); !bytes.Equal(got, rec.Value) || ev.Type != wantType {
			t.Fatalf("event %d (p%d o%d): got type %q data %q (value %q), want %q %q",
				i, m.Partition, m.Offset, ev.Type, ev.Data, got, wantType, rec.Value)
		}
		pos = id
	}
}

// valueOf returns the record value an event's data carries, decoded as docs/gateway.md tells a page of a
// topic in auto or base64 value format to: data starting with "base64:" is the rest in standard base64,
// other data is the value as it is.
func valueOf(t *testing.T, data string) []byte {
	t.Helper()
	rest, ok := strings.CutPrefix(data, "base64:")
	if !ok {
		return []byte(data)
	}
	v, err := base64.StdEncoding.Strict().DecodeString(rest)
	if err != nil {
		t.Fatalf("data %q: %v", data, err)
	}
	return v
}

func byOffset(all map[int32][]*kgo.Record) map[int32]map[int64]*kgo.Record {
	out := map[int32]map[int64]*kgo.Record{}
	for p, rs := range all {
		out[p] = map[int64]*kgo.Record{}
		for _, r := range rs {
			out[p][r.Offset] = r
		}
	}
	return out
}

// TestFanoutTwoGateways: 50 clients spread over two gateways all get every record of every partition,
// in partition order, with ids that advance exactly as the records do. The first gateway serves them from
// its writer pool, the second (writers 0) on a goroutine each.
func TestFanoutTwoGateways(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	// Records from before the gateways start are not streamed, but they make the start position non-trivial.
	kafkatest.Produce(t, cl, &kgo.Record{Key: []byte("a"), Value: []byte("before")},
		&kgo.Record{Key: []byte("b"), Value: []byte("before")})

	gws := []*gateway{startGateway(t, []string{topic}, nil), startGateway(t, []string{topic}, func(c *Config) { c.Writers = 0 })}
	for _, g := range gws {
		g.waitReady(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	const clients, n = 50, 300
	cs := make([]*sseClient, clients)
	for i := range cs {
		cs[i] = connect(t, ctx, gws[i%2].url+"/streams/"+topic)
	}
	var recs []*kgo.Record
	for i := range n {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%17), Value: fmt.Appendf(nil, `{"seq":%d}`, i)}
		switch i % 5 {
		case 1:
			r.Headers = []kgo.RecordHeader{{Key: "event", Value: []byte("order.created")}}
		case 2:
			r.Value = fmt.Appendf(nil, "line one %d\r\nline two\rline three\n", i)
		case 3:
			r.Value = []byte{}
		}
		recs = append(recs, r)
	}
	for i := 0; i < n; i += 50 {
		kafkatest.Produce(t, cl, recs[i:i+50]...)
	}
	records := byOffset(kafkatest.ReadAll(t, topic))

	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			t.Run(fmt.Sprintf("client%02d", i), func(t *testing.T) { checkStream(t, c, n, records) })
		})
		if i%10 == 9 {
			wg.Wait()
		}
	}
	wg.Wait()
}

// waitStopped waits, after stop, for Run to return (within 10 s), and fails on its error.
func (g *gateway) waitStopped(t *testing.T) {
	t.Helper()
	select {
	case err := <-g.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		g.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the drain")
	}
}
