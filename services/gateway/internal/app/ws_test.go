package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// wsMessage is a message of a WebSocket stream.
type wsMessage struct {
	ID        string          `json:"id"`
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	Key       *string         `json:"key"`
	Partition *int32          `json:"partition"`
	Offset    *int64          `json:"offset"`
	Retry     *int64          `json:"retry"`
	Topic     string          `json:"topic"`
}

// dialWS opens a WebSocket stream of the gateway at path (with its query).
func dialWS(t *testing.T, ctx context.Context, g *gateway, path string, h http.Header) *websocket.Conn {
	t.Helper()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+path, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %d %v", path, status, err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// nextWS reads the next message, within 10 s.
func nextWS(t *testing.T, ws *websocket.Conn) wsMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	typ, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m wsMessage
	if typ != websocket.MessageText || json.Unmarshal(b, &m) != nil {
		t.Fatalf("message %q is not JSON text", b)
	}
	return m
}

// TestWebSocketStream: a WebSocket stream gets the records an event stream gets, with the same ids, as JSON
// messages with their key, partition and offset (a JSON value as JSON, text as a string, bytes in base64); a
// stream resumed from an id (last_event_id) starts right after it; CloudEvents when asked.
func TestWebSocketStream(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sse := connect(t, ctx, g.url+"/streams/"+topic)
	ws := dialWS(t, ctx, g, "/ws/"+topic, nil)
	open := nextWS(t, ws)
	if open.Event != "open" || open.ID != sse.initialID || open.Retry == nil {
		t.Fatalf("first message %+v, want open at %s with a retry", open, sse.initialID)
	}
	cl := kafkatest.Client(t)
	recs := kafkatest.Produce(t, cl,
		&kgo.Record{Topic: topic, Key: []byte("a"), Value: []byte(`{"n":1}`), Partition: 0},
		&kgo.Record{Topic: topic, Key: []byte("b"), Value: []byte("plain text")},
		&kgo.Record{Topic: topic, Key: []byte{0xff}, Value: []byte{0, 1, 2}},
	)
	got := map[string]wsMessage{}
	var order []wsMessage
	for range recs {
		ev := sse.next(t)
		m := nextWS(t, ws)
		if m.Partition == nil || m.Offset == nil || m.Key == nil {
			t.Fatalf("message %+v has no partition, offset or key", m)
		}
		if m.ID != ev.ID {
			t.Errorf("message id %s, the event stream's %s", m.ID, ev.ID)
		}
		got[*m.Key] = m
		order = append(order, m)
	}
	checks := []struct {
		key, data string
		rec       *kgo.Record
	}{
		{"a", `{"n":1}`, recs[0]},
		{"b", `"plain text"`, recs[1]},
		{"base64:/w==", `"base64:AAEC"`, recs[2]},
	}
	for _, ch := range checks {
		m, ok := got[ch.key]
		if !ok {
			t.Fatalf("no message with key %q: %+v", ch.key, got)
		}
		if string(m.Data) != ch.data || *m.Partition != ch.rec.Partition || *m.Offset != ch.rec.Offset || m.Event != "message" {
			t.Errorf("key %s: %+v (data %s), want data %s at %d/%d", ch.key, m, m.Data, ch.data, ch.rec.Partition, ch.rec.Offset)
		}
	}
	// Resumed from the first message's id, a stream gets the two others and nothing else.
	resumed := dialWS(t, ctx, g, "/ws/"+topic+"?last_event_id="+order[0].ID, nil)
	if m := nextWS(t, resumed); m.Event != "open" || m.ID != order[0].ID {
		t.Fatalf("resumed stream opens with %+v, want open at %s", m, order[0].ID)
	}
	for _, want := range order[1:] {
		if m := nextWS(t, resumed); m.ID != want.ID || *m.Key != *want.Key {
			t.Errorf("the resumed stream got %+v, want %+v", m, want)
		}
	}
	ce := dialWS(t, ctx, g, "/ws/"+topic+"?format=cloudevents&from=earliest", nil)
	if _, _, err := ce.Read(ctx); err != nil { // the opening message
		t.Fatal(err)
	}
	_, b, err := ce.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil || c["specversion"] != "1.0" || c["source"] != "/topics/"+topic ||
		c["type"] != "message" || c["id"] == nil || c["kafkapartition"] == nil || c["datacontenttype"] == nil {
		t.Fatalf("CloudEvent %s: %v", b, err)
	}
}

// TestWebSocketAcks: with ack=1 at most max_in_flight messages wait for an acknowledgement; an acknowledgement
// makes room; one of an id not waiting closes the connection as a policy violation; a client that
// acknowledges nothing for the write timeout is closed as too slow.
func TestWebSocketAcks(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.WriteTimeout = time.Second })
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ws := dialWS(t, ctx, g, "/ws/"+topic+"?ack=1&max_in_flight=2", nil)
	nextWS(t, ws) // open
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	for i := range 5 {
		kafkatest.Produce(t, cl, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)})
	}
	m0, m1 := nextWS(t, ws), nextWS(t, ws)
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, b, err := ws.Read(short); err == nil {
		t.Fatalf("a third message %s with two unacknowledged and max_in_flight=2", b)
	}
	cancelShort()
	// The read cut short closed the connection (the library closes it on a canceled read): a new one.
	ws = dialWS(t, ctx, g, "/ws/"+topic+"?ack=1&max_in_flight=2&last_event_id="+m1.ID, nil)
	nextWS(t, ws)
	m2, m3 := nextWS(t, ws), nextWS(t, ws)
	if string(m2.Data) != `"r2"` || string(m3.Data) != `"r3"` || string(m0.Data) != `"r0"` {
		t.Fatalf("messages %s %s %s", m0.Data, m2.Data, m3.Data)
	}
	ack := func(id string) {
		t.Helper()
		if err := ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"ack":%q}`, id)); err != nil {
			t.Fatal(err)
		}
	}
	ack(m2.ID)
	if m4 := nextWS(t, ws); string(m4.Data) != `"r4"` {
		t.Fatalf("after an acknowledgement: %s, want r4", m4.Data)
	}
	ack("v1:0-999")
	_, _, err := ws.Read(ctx)
	if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation {
		t.Fatalf("after an acknowledgement of an id never sent: %v, want close 1008", err)
	}

	slow := dialWS(t, ctx, g, "/ws/"+topic+"?ack=1&max_in_flight=1&from=earliest", nil)
	nextWS(t, slow)
	nextWS(t, slow)
	_, _, err = slow.Read(ctx)
	if st := websocket.CloseStatus(err); st != stream.CloseTooSlow {
		t.Fatalf("a client that acknowledges nothing: %v, want close %d", err, stream.CloseTooSlow)
	}
}

// TestWebSocketHelloAndDrain: a client may send its position in its first message instead of the URL; at
// shutdown the stream gets a drain message at its position, then closes with 1001 going away.
func TestWebSocketHelloAndDrain(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.Drain = 500 * time.Millisecond })
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")})
	ws := dialWS(t, ctx, g, "/ws/"+topic+"?hello=1", nil)
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"last_event_id":"v1:0-0"}`)); err != nil {
		t.Fatal(err)
	}
	if m := nextWS(t, ws); m.Event != "open" || m.ID != "v1:0-0" {
		t.Fatalf("opening %+v, want open at v1:0-0", m)
	}
	if m := nextWS(t, ws); string(m.Data) != `"b"` {
		t.Fatalf("after the hello: %s, want b", m.Data)
	}
	bad := dialWS(t, ctx, g, "/ws/"+topic+"?hello=1", nil)
	_ = bad.Write(ctx, websocket.MessageText, []byte(`{"from":"earliest"}`))
	if _, _, err := bad.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("a first message that is no hello: %v, want close 1008", err)
	}
	g.stop()
	if m := nextWS(t, ws); m.Event != "drain" || m.ID != "v1:0-1" {
		t.Fatalf("at shutdown: %+v, want a drain message at the client's position v1:0-1", m)
	}
	_, _, err := ws.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("at shutdown: %v, want close 1001", err)
	}
	g.waitStopped(t)
}

// TestWebSocketRefusals: a WebSocket stream asks what an event stream asks: an origin not allowed, a topic
// not served, a bad parameter are refused before the upgrade, with the same JSON errors.
func TestWebSocketRefusals(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.CORS.Origins = []string{"https://ok.example"} })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		path, origin string
		status       int
	}{
		{"/ws/" + topic, "https://evil.example", http.StatusForbidden},
		{"/ws/nope", "", http.StatusNotFound},
		{"/ws/" + topic + "?max_in_flight=5", "", http.StatusBadRequest},
		{"/ws/" + topic + "?format=xml", "", http.StatusBadRequest},
		{"/ws/" + topic + "?heartbeat=1", "", http.StatusBadRequest},
	} {
		h := http.Header{}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+tc.path, &websocket.DialOptions{HTTPHeader: h})
		if err == nil || resp == nil || resp.StatusCode != tc.status {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			t.Errorf("%s from %q: %d %v, want %d", tc.path, tc.origin, code, err, tc.status)
		}
	}
	ok := dialWS(t, ctx, g, "/ws/"+topic, http.Header{"Origin": {"https://ok.example"}})
	if m := nextWS(t, ok); m.Event != "open" {
		t.Fatalf("an allowed origin: %+v", m)
	}
}

// TestWebSocketAtLeastOnceAcrossGateways: clients that acknowledge some of what they process, drop at random
// and resume on the other gateway from the last id they acknowledged get every record of the topic at least
// once, in offset order per partition on each connection.
func TestWebSocketAtLeastOnceAcrossGateways(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	gs := []*gateway{startGateway(t, []string{topic}, nil), startGateway(t, []string{topic}, nil)}
	for _, g := range gs {
		g.waitReady(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const total = 300
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	start := map[int]string{}
	type client struct {
		acked string
		seen  map[string]bool // partition/offset
	}
	clients := make([]*client, 4)
	for i := range clients {
		clients[i] = &client{seen: map[string]bool{}}
		ws := dialWS(t, ctx, gs[i%2], "/ws/"+topic, nil)
		clients[i].acked = nextWS(t, ws).ID
		start[i] = clients[i].acked
		_ = ws.CloseNow()
	}
	go func() {
		for i := range total {
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "%d", i)}, nil)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for i, c := range clients {
		for conn := 0; len(c.seen) < total; conn++ {
			if conn > 200 {
				t.Fatalf("client %d: %d records after 200 connections", i, len(c.seen))
			}
			window := 1 + rng.IntN(20)
			ws := dialWS(t, ctx, gs[(i+conn)%2], "/ws/"+topic+"?ack=1&max_in_flight="+fmt.Sprint(window)+"&last_event_id="+c.acked, nil)
			nextWS(t, ws)
			last := map[int32]int64{}
			unacked := 0
			for n := rng.IntN(60); n > 0 && len(c.seen) < total; n-- {
				m := nextWS(t, ws)
				if prev, ok := last[*m.Partition]; ok && *m.Offset <= prev {
					t.Fatalf("client %d: partition %d offset %d after %d on one connection", i, *m.Partition, *m.Offset, prev)
				}
				last[*m.Partition] = *m.Offset
				c.seen[fmt.Sprintf("%d/%d", *m.Partition, *m.Offset)] = true
				unacked++
				if rng.IntN(3) == 0 || unacked == window {
					unacked = 0
					if err := ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"ack":%q}`, m.ID)); err != nil && !errors.Is(err, context.Canceled) {
						t.Fatal(err)
					}
					c.acked = m.ID
				}
			}
			_ = ws.CloseNow()
		}
	}
	for part, recs := range kafkatest.ReadAll(t, topic) {
		for _, r := range recs {
			for i, c := range clients {
				if !c.seen[fmt.Sprintf("%d/%d", part, r.Offset)] {
					t.Fatalf("client %d (from %s) never got %d/%d", i, start[i], part, r.Offset)
				}
			}
		}
	}
}

// TestWebSocketPublish: with publish=1 a client's messages are published into the topic (a structured
// CloudEvent as that event, its source and id its idempotency key; anything else as the data of a new
// event), each answered with its place when publish_results=1, and the client reads its own writes on the same
// socket; a bad message is answered and produces nothing; without publish=1, or on a topic not open, the
// client cannot publish.
func TestWebSocketPublish(t *testing.T) {
	topic, closed := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic, closed}, func(c *Config) {
		c.Publish.Topics = []string{topic}
		c.Publish.Anonymous = true
	})
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ws := dialWS(t, ctx, g, "/ws/"+topic+"?publish=1&publish_results=1", nil)
	nextWS(t, ws) // open
	send := func(msg string) {
		t.Helper()
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	// Answers and the records published come on one socket, in either order.
	collect := func(n int) (answers []map[string]any, events []wsMessage) {
		t.Helper()
		for range n {
			m := nextWS(t, ws)
			if m.Event == "published" || m.Event == "publish-error" {
				var d map[string]any
				_ = json.Unmarshal(m.Data, &d)
				d["event"] = m.Event
				answers = append(answers, d)
				continue
			}
			events = append(events, m)
		}
		return answers, events
	}
	send("hello")
	answers, events := collect(2)
	if len(answers) != 1 || answers[0]["event"] != "published" || answers[0]["offset"] != float64(0) || answers[0]["id"] != "v1:0-0" {
		t.Fatalf("answer %v", answers)
	}
	if len(events) != 1 || string(events[0].Data) != `"hello"` || events[0].ID != "v1:0-0" {
		t.Fatalf("own write read back: %+v", events)
	}
	ce := `{"specversion":"1.0","id":"e1","source":"/shop","type":"order.placed","partitionkey":"user-1","data":{"n":1}}`
	send(ce)
	answers, events = collect(2)
	if answers[0]["event"] != "published" || answers[0]["duplicate"] != false || len(events) != 1 ||
		events[0].Event != "order.placed" || *events[0].Key != "user-1" || string(events[0].Data) != `{"n":1}` {
		t.Fatalf("a CloudEvent: answer %v, events %+v", answers, events)
	}
	send(ce)
	if answers, _ = collect(1); answers[0]["duplicate"] != true || answers[0]["offset"] != float64(1) {
		t.Fatalf("the same CloudEvent again: %v, want a duplicate at offset 1", answers)
	}
	send(`{"specversion":"0.3","id":"e2","source":"/shop","type":"x"}`)
	if answers, _ = collect(1); answers[0]["event"] != "publish-error" || answers[0]["status"] != float64(400) {
		t.Fatalf("a CloudEvent of another version: %v, want a 400 publish-error", answers)
	}
	if recs := kafkatest.ReadAll(t, topic)[0]; len(recs) != 2 {
		t.Fatalf("the topic holds %d records, want 2", len(recs))
	}

	readOnly := dialWS(t, ctx, g, "/ws/"+topic, nil)
	nextWS(t, readOnly)
	_ = readOnly.Write(ctx, websocket.MessageText, []byte("hello"))
	for {
		_, _, err := readOnly.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Fatalf("a message on a stream without publish=1: %v, want close 1008", err)
			}
			break
		}
	}
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/ws/"+closed+"?publish=1", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("publish=1 on a topic not open: %v, want 403", err)
	}
}
