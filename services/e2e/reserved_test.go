package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// gatewayTypes are the event types that only the gateway's own frames and messages may have.
var gatewayTypes = []string{
	"delete", "drain", "error", "live", "open", "position", "publish-error", "published", "resumed", "resync",
	"token-expired", "token-expiring",
}

// forgedRecords are records any Kafka producer may write that carry the gateway's event types: keyless ones
// typed token-expired and resync (an event header, and a CloudEvent's binary-mode ce_type), a keyed one typed
// live, then the end of the batch, typed end, with the value end.
func forgedRecords(topic, end string) []*kgo.Record {
	h := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	return []*kgo.Record{
		{Topic: topic, Value: []byte(`{"expired_at":"2020-01-01T00:00:00Z"}`), Headers: h("event", "token-expired")},
		{Topic: topic, Value: []byte(`{"reason":"retention","partitions":[]}`), Headers: h("event", "resync")},
		{Topic: topic, Value: []byte(`{"reason":"ahead","partitions":[]}`), Headers: h(
			"ce_specversion", "1.0", "ce_id", "forged-1", "ce_source", "/elsewhere", "ce_type", "resync")},
		{Topic: topic, Key: []byte("k"), Value: []byte(`{"id":"v1:0-0"}`), Headers: h("event", "live")},
		{Topic: topic, Key: []byte("k"), Value: []byte(end), Headers: h("event", "end")},
	}
}

// seenEvent is an event a reader got: its type, data, and whether it came as a record (a WebSocket message with
// a partition; every SSE frame but the gateway's own types).
type seenEvent struct {
	typ, data string
	record    bool
	raw       string // a WebSocket message as it came
}

// reader collects a stream's events in the background until its context ends.
type reader struct {
	name string
	mu   sync.Mutex
	evs  []seenEvent
	err  error // why it stopped before the test ended it
}

func (r *reader) add(ev seenEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *reader) stop(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

func (r *reader) snapshot() ([]seenEvent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs), r.err
}

// has says the reader got a record with data d.
func (r *reader) has(d string) bool {
	evs, _ := r.snapshot()
	return slices.ContainsFunc(evs, func(ev seenEvent) bool { return ev.data == d })
}

// readSSE reads the event stream at url.
func readSSE(ctx context.Context, t *testing.T, name, url string) *reader {
	t.Helper()
	r := &reader{name: name}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	go func() {
		defer func() { _ = resp.Body.Close() }()
		p := sse.NewParser(resp.Body)
		for {
			ev, err := p.Next()
			if err != nil {
				r.stop(fmt.Errorf("the stream ended: %w", err))
				return
			}
			r.add(seenEvent{typ: ev.Type, data: ev.Data, record: !slices.Contains(gatewayTypes, ev.Type)})
		}
	}()
	return r
}

// readWS reads the WebSocket stream at url.
func readWS(ctx context.Context, t *testing.T, name, url string) *reader {
	t.Helper()
	r := &reader{name: name}
	ws, _, err := websocket.Dial(ctx, url, nil) //nolint:bodyclose // the library closes an upgraded answer's body
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	ws.SetReadLimit(1 << 20)
	go func() {
		defer func() { _ = ws.CloseNow() }()
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				r.stop(fmt.Errorf("the socket ended (%v): %w", websocket.CloseStatus(err), err))
				return
			}
			var m struct {
				Event     string          `json:"event"`
				Data      json.RawMessage `json:"data"`
				Partition *int32          `json:"partition"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				r.stop(fmt.Errorf("message %s: %w", b, err))
				return
			}
			data := string(m.Data)
			var s string
			if json.Unmarshal(m.Data, &s) == nil {
				data = s
			}
			r.add(seenEvent{typ: m.Event, data: data, record: m.Partition != nil, raw: string(b)})
		}
	}()
	return r
}

// TestForgedGatewayEventsReachNoReader: records produced straight into Kafka with the gateway's event types (a
// keyless token-expired, a keyless resync by the event header and by a CloudEvent's ce_type, a keyed live)
// reach no reader, event stream or WebSocket, of one topic or of several, as the gateway's events: they come
// renamed (record.token-expired, ...) as records, no stream ends or reconnects on them, a key= stream never
// gets the keyless ones, and event=resync matches none of them. Publishing one through the gateway (POST,
// a WebSocket CloudEvent) is refused with 400 and produces nothing.
func TestForgedGatewayEventsReachNoReader(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	topic, other := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	clients, admin := blackBoxGateway(t, brokers, "--topics", topic+","+other, "--publish-topics", topic,
		"--publish-anonymous")
	waitReady(t, "gateway", "http://"+admin+"/readyz")
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl, forgedRecords(topic, "end1")...)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	base, wsBase := "http://"+clients, "ws://"+clients
	all := readSSE(ctx, t, "event stream", base+"/streams/"+topic+"?from=earliest")
	keyed := readSSE(ctx, t, "event stream key=k", base+"/streams/"+topic+"?from=earliest&key=k")
	typed := readSSE(ctx, t, "event stream event=resync", base+"/streams/"+topic+"?from=earliest&event=resync&event=token-expired&event=live&event=end")
	muxed := readSSE(ctx, t, "event stream of two topics", base+"/streams/"+topic+","+other+"?from=earliest")
	ws := readWS(ctx, t, "WebSocket", wsBase+"/ws/"+topic+"?from=earliest")
	wsKeyed := readWS(ctx, t, "WebSocket key=k", wsBase+"/ws/"+topic+"?from=earliest&key=k")
	readers := []*reader{all, keyed, typed, muxed, ws, wsKeyed}
	waitAll := func(data string) {
		t.Helper()
		kafkatest.WaitFor(t, time.Minute, "every reader to get "+data, func() bool {
			for _, r := range readers {
				if _, err := r.snapshot(); err == nil && !r.has(data) {
					return false // a reader that stopped is reported below
				}
			}
			return true
		})
	}
	// The same records again, live this time: the readers are on the ring's tail.
	waitAll("end1")
	kafkatest.Produce(t, cl, forgedRecords(topic, "end2")...)
	waitAll("end2")

	renamed := []string{"record.token-expired", "record.resync", "record.resync", "record.live", "end"}
	want := map[*reader][]string{
		all: renamed, muxed: renamed, ws: renamed,
		keyed: {"record.live", "end"}, wsKeyed: {"record.live", "end"},
		typed: {"end"},
	}
	for _, r := range readers {
		evs, err := r.snapshot()
		if err != nil {
			t.Errorf("%s: %v", r.name, err)
		}
		var got []string
		for i, ev := range evs {
			if i == 0 && (r == ws || r == wsKeyed) && ev.typ == "open" && !ev.record {
				continue // the WebSocket's first message, the gateway's
			}
			if !ev.record || slices.Contains(gatewayTypes, ev.typ) {
				t.Errorf("%s: %q (%s) came as the gateway's event %s", r.name, ev.typ, ev.data, ev.raw)
			}
			got = append(got, ev.typ)
		}
		if w := append(slices.Clone(want[r]), want[r]...); !slices.Equal(got, w) {
			t.Errorf("%s: types %q, want %q", r.name, got, w)
		}
	}

	// Publishing a reserved type is refused, and nothing is produced.
	for _, body := range []string{
		`{"value":"x","headers":{"event":"token-expired"}}`,
		`{"value":"x","headers":{"ce_type":"resync"}}`,
		`{"records":[{"value":"fine"},{"key":"k","value":"x","headers":{"event":"live"}}]}`,
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/topics/"+topic+"/records", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var e struct{ Error string }
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, "is reserved") {
			t.Errorf("POST %s: %d %s, want 400 naming the reserved type", body, resp.StatusCode, b)
		}
	}
	pws, _, err := websocket.Dial(ctx, wsBase+"/ws/"+topic+"?publish=1&publish_results=1", nil) //nolint:bodyclose // as above
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pws.CloseNow() }()
	if err := pws.Write(ctx, websocket.MessageText, []byte(`{"specversion":"1.0","id":"e1","source":"/page","type":"resync","data":{}}`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, b, err := pws.Read(ctx)
		if err != nil {
			t.Fatalf("no answer to the CloudEvent: %v", err)
		}
		var m struct {
			Event string
			Data  struct{ Status int }
		}
		_ = json.Unmarshal(b, &m)
		if m.Event == "publish-error" || m.Event == "published" {
			if m.Event != "publish-error" || m.Data.Status != http.StatusBadRequest {
				t.Errorf("a CloudEvent of type resync: %s, want a publish-error 400", b)
			}
			break
		}
	}
	n := 0
	for _, recs := range kafkatest.ReadAll(t, topic) {
		n += len(recs)
	}
	if n != 10 {
		t.Errorf("the topic holds %d records, want the 10 produced: a refused publish wrote some", n)
	}
}
