package stream

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
	if p := srv.PendingBytes(); p != 0 {
		t.Errorf("%d slow clients waiting for their acknowledgements hold %d bytes of the pod's budget, want none", slow, p)
	}
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
