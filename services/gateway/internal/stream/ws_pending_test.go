package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsTestServer serves srv's WebSocket streams of the ring of f, their options from the query, counted in st.
func wsTestServer(t *testing.T, srv *Server, f *feeder, st *Stats) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, err := ParseWSOptions(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p := Params{LastEventID: r.URL.Query().Get("last_event_id")}
		srv.ServeWebSocket(w, r, []TopicStream{{Topic: &Topic{Name: "t", Ring: f.rg}, Params: p, Stats: st}}, nil, o)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// dialTestWS opens a WebSocket stream of hs with query.
func dialTestWS(t *testing.T, ctx context.Context, hs *httptest.Server, query string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/?"+query, nil)
	if err != nil {
		t.Fatalf("dial ?%s: %v", query, err)
	}
	ws.SetReadLimit(-1)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// readTestWS reads the next message's event and data.
func readTestWS(t *testing.T, ctx context.Context, ws *websocket.Conn) (event string, data json.RawMessage) {
	t.Helper()
	_, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v (close status %d)", err, websocket.CloseStatus(err))
	}
	var m struct {
		Event string
		Data  json.RawMessage
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("message %q: %v", b, err)
	}
	return m.Event, m.Data
}

// TestWSSlowAcksHoldNoPendingBytes: WebSocket clients that acknowledge slowly (ack=1, max_in_flight=1, no
// acknowledgement yet) wait for their acknowledgements without holding the pod's budget of unfinished writes
// (PendingBytes), so that another client's catch-up of the same records is written whole, and nobody's stream
// fails. Before, each of them held its whole catch-up batch while it waited, two were enough to use the budget
// up, and the other client's stream (and the next slow one's) ended as write_failed.
func TestWSSlowAcksHoldNoPendingBytes(t *testing.T) {
	f := newFeeder(t, 16<<20)
	f.publish("first")
	start := f.id()
	data := strings.Repeat("x", 1<<10)
	const n = 300 // 300 KiB of catch-up: batches of about 64 KiB (MaxWriteBytes) each
	for range n / 10 {
		f.publish(data, data, data, data, data, data, data, data, data, data)
	}
	const bound = 160 << 10 // room for two batches
	const slow = 6
	// Catch-up slots for all: a catch-up keeps its slot while it waits for acknowledgements, which is not what
	// this test is about.
	srv := NewServer(Config{WriteTimeout: time.Minute, PendingBytes: bound, CatchUps: slow + 1, Logger: discardLog})
	var st Stats
	hs := wsTestServer(t, srv, f, &st)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	for range slow {
		ws := dialTestWS(t, ctx, hs, "ack=1&max_in_flight=1&last_event_id="+start)
		if ev, _ := readTestWS(t, ctx, ws); ev != "open" {
			t.Fatalf("a slow client's first message is %q, want open", ev)
		}
		if ev, d := readTestWS(t, ctx, ws); ev != "message" || string(d) != `"`+data+`"` {
			t.Fatalf("a slow client's second message is %q %.20s, want the first record", ev, d)
		}
		// It now waits for an acknowledgement that does not come.
	}
	// Each gives back what it held once it finds no room for its next message.
	waitUntil(t, "the slow clients to wait holding none of the pod's budget", func() bool { return srv.PendingBytes() == 0 })
	fast := dialTestWS(t, ctx, hs, "last_event_id="+start)
	if ev, _ := readTestWS(t, ctx, fast); ev != "open" {
		t.Fatalf("the other client's first message is %q, want open", ev)
	}
	for i := range n {
		if ev, d := readTestWS(t, ctx, fast); ev != "message" || string(d) != `"`+data+`"` {
			t.Fatalf("the other client's record %d: %q %.20s", i, ev, d)
		}
	}
	if c := st.Closed[ReasonWriteFailed].Load(); c != 0 {
		t.Errorf("%d streams ended as write_failed, want none", c)
	}
	if o := st.Open.Load(); o != slow+1 {
		t.Errorf("%d streams open, want all %d", o, slow+1)
	}
}

// wsPair returns the gateway's end of a WebSocket (its sink, on srv, with options o) and the client's.
func wsPair(t *testing.T, srv *Server, o WSOptions) (*wsSink, *websocket.Conn) {
	t.Helper()
	accepted := make(chan *websocket.Conn, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		accepted <- ws
	}))
	t.Cleanup(hs.Close)
	client, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	client.SetReadLimit(-1)
	t.Cleanup(func() { _ = client.CloseNow() })
	ws := <-accepted
	t.Cleanup(func() { _ = ws.CloseNow() })
	return newWSSink(t.Context(), srv, make(chan struct{}), ws, o, "t"), client
}

// TestWSBigRecordNotKept: a socket does not keep a big record's frame and message once it sent them: before,
// both stayed for the connection's life (a 1 MiB record cost a socket about 2 MiB from then on).
func TestWSBigRecordNotKept(t *testing.T) {
	sink, client := wsPair(t, NewServer(Config{Logger: discardLog}), WSOptions{Format: "json", MaxInFlight: 100})
	big := strings.Repeat("b", 1<<20)
	frames := []string{"retry: 3000\nid: v1:0-0\n\n", "id: v1:0-1\n::m 0 1 -\ndata: " + big + "\n\n", "id: v1:0-2\n::m 0 2 -\ndata: small\n\n"}
	for _, f := range frames {
		if _, err := sink.write([][]byte{[]byte(f)}, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []string{"open", `"` + big + `"`, `"small"`} {
		ev, d := readTestWS(t, t.Context(), client)
		if (i == 0 && ev != want) || (i > 0 && string(d) != want) {
			t.Fatalf("message %d: %s %.20s, want %.20s", i, ev, d, want)
		}
	}
	if c := cap(sink.pend) + cap(sink.msg); c > wsKeepPend+wsKeepMsg {
		t.Errorf("after a 1 MiB record the socket keeps %d bytes of scratch, want at most %d", c, wsKeepPend+wsKeepMsg)
	}
}

// TestWSLongIDsInFlight: a socket keeps 8 bytes for each message waiting for an acknowledgement, not its id:
// 1,000 messages of a several-topic id of 2 KiB in flight cost it far less than their ids (2 MB, before).
func TestWSLongIDsInFlight(t *testing.T) {
	const n = 1000
	sink := &wsSink{o: WSOptions{Acks: true, MaxInFlight: 10000}, room: make(chan struct{}, 1)}
	prefix := strings.Repeat("7", 2<<10)
	id := func(i int) []byte { return fmt.Appendf(nil, "v1:%s-%d", prefix, i) }
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		sink.waitAck(id(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > n*(2<<10)/8 {
		t.Errorf("%d messages in flight with ids of 2 KiB hold %d bytes, want far less than their ids", n, grown)
	}
	if !sink.ack(string(id(n/2))) || len(sink.inflight) != n-n/2-1 {
		t.Errorf("after acknowledging message %d: %d in flight, want %d", n/2, len(sink.inflight), n-n/2-1)
	}
	if sink.ack(string(id(n / 4))) {
		t.Error("an acknowledgement of a message acknowledged already was taken")
	}
}
