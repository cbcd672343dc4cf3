package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ssegate/ssegate/pkg/sse"
)

// gatewayWSMessage is a record's message as the gateway writes it (stream.wsSink: a map marshaled by
// encoding/json, data the value as JSON when it is JSON, else a string).
func gatewayWSMessage(event, id string, value []byte, key string, part int32, off int64) []byte {
	m := map[string]any{"event": event, "id": id, "partition": part, "offset": off}
	if json.Valid(value) {
		m["data"] = json.RawMessage(value)
	} else {
		m["data"] = string(value)
	}
	if key != "" {
		m["key"] = key
	}
	b, _ := json.Marshal(m) // strings, numbers and valid raw JSON always marshal
	return b
}

func TestWSEvent(t *testing.T) {
	value := makeValue(1_700_000_000_123_456_789, 7, 200)
	tests := []struct {
		name      string
		msg       string
		wantKind  wsKind
		wantEv    sse.Event
		wantHasID bool
		wantErr   string
	}{
		{
			name: "open", msg: `{"event":"open","id":"v1:0-5812.1-5790","retry":3000}`,
			wantKind: wsOpen, wantEv: sse.Event{ID: "v1:0-5812.1-5790"}, wantHasID: true,
		},
		{
			name: "open of an empty topic", msg: `{"event":"open","id":"v1:","retry":3000}`,
			wantKind: wsOpen, wantEv: sse.Event{ID: "v1:"}, wantHasID: true,
		},
		{
			name:     "record of the tool: data is the value, as on an event stream",
			msg:      string(gatewayWSMessage("message", "v1:0-5813.1-5790", value, "k-7", 0, 5813)),
			wantKind: wsFrame, wantEv: sse.Event{Type: "message", ID: "v1:0-5813.1-5790", Data: string(value)}, wantHasID: true,
		},
		{
			name: "record with a JSON value", msg: `{"event":"message","id":"v1:0-5813.1-5790","data":{"item":"tea","n":[1,2]},"key":"user-42","partition":0,"offset":5813}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "message", ID: "v1:0-5813.1-5790", Data: `{"item":"tea","n":[1,2]}`}, wantHasID: true,
		},
		{
			name: "record whose value is not JSON: data is the string", msg: `{"event":"message","id":"v1:0-9","data":"plain \"text\"\nline 2","partition":0,"offset":9}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "message", ID: "v1:0-9", Data: "plain \"text\"\nline 2"}, wantHasID: true,
		},
		{
			name: "a number value", msg: `{"event":"message","id":"v1:0-10","data":42,"partition":0,"offset":10}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "message", ID: "v1:0-10", Data: "42"}, wantHasID: true,
		},
		{
			name: "record with an event type", msg: `{"event":"order.created","id":"v1:1-3","data":{},"partition":1,"offset":3}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "order.created", ID: "v1:1-3", Data: "{}"}, wantHasID: true,
		},
		{
			name: "tombstone: delete, data is the key", msg: `{"event":"delete","id":"v1:1-4","data":"k-1","key":"k-1","partition":1,"offset":4}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "delete", ID: "v1:1-4", Data: "k-1"}, wantHasID: true,
		},
		{
			name: "resync", msg: `{"event":"resync","id":"v1:0-9000.1-5790","data":{"reason":"retention","partitions":[0]}}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "resync", ID: "v1:0-9000.1-5790", Data: `{"reason":"retention","partitions":[0]}`}, wantHasID: true,
		},
		{
			name: "token-expiring", msg: `{"event":"token-expiring","id":"v1:0-12","data":{"expires_in":60}}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "token-expiring", ID: "v1:0-12", Data: `{"expires_in":60}`}, wantHasID: true,
		},
		{
			name: "a compact id", msg: `{"event":"message","id":"v2:AAECAw","data":{"a":1},"partition":0,"offset":1}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "message", ID: "v2:AAECAw", Data: `{"a":1}`}, wantHasID: true,
		},
		{
			name: "position: the stream moves without a record", msg: `{"event":"position","id":"v1:0-0"}`,
			wantKind: wsPosition, wantEv: sse.Event{ID: "v1:0-0"}, wantHasID: true,
		},
		{
			name: "an event without an id keeps the last one (the caller's)", msg: `{"event":"token-expired","data":{}}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "token-expired", Data: "{}"}, wantHasID: false,
		},
		{
			name: "whitespace and another field order", msg: " {\n \"id\" : \"v1:0-3\", \"partition\": 0, \"data\" : [1, {\"a\": \"}]\"}], \"event\":\"message\" }\n",
			wantKind: wsFrame, wantEv: sse.Event{Type: "message", ID: "v1:0-3", Data: `[1, {"a": "}]"}]`}, wantHasID: true,
		},
		{
			name: "escapes in the id and a key", msg: `{"event":"message","id":"v1:0-\u0033","d\u0061ta":{"x":"\"}"},"offset":-1.5e+3}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "message", ID: "v1:0-3", Data: `{"x":"\"}"}`}, wantHasID: true,
		},
		{
			name: "the last of a repeated field", msg: `{"event":"open","id":"v1:0-1","id":"v1:0-2"}`,
			wantKind: wsOpen, wantEv: sse.Event{ID: "v1:0-2"}, wantHasID: true,
		},
		{
			name: "data null", msg: `{"event":"message","id":"v1:0-4","data":null,"key":true}`,
			wantKind: wsFrame, wantEv: sse.Event{Type: "message", ID: "v1:0-4", Data: "null"}, wantHasID: true,
		},
		{name: "not JSON", msg: `id: v1:0-1`, wantErr: "not a JSON object"},
		{name: "empty", msg: ``, wantErr: "not a JSON object"},
		{name: "an id that is not a string", msg: `{"event":"open","id":5}`, wantErr: "not a JSON object"},
		{name: "trailing bytes", msg: `{"event":"open","id":"v1:0-1"}x`, wantErr: "not a JSON object"},
		{name: "trailing comma", msg: `{"event":"open","id":"v1:0-1",}`, wantErr: "not a JSON object"},
		{name: "unbalanced data", msg: `{"event":"message","id":"v1:0-1","data":{"a":[1}}`, wantErr: "not a JSON object"},
		{name: "a bad literal", msg: `{"event":"message","id":"v1:0-1","data":nul}`, wantErr: "not a JSON object"},
		{name: "a control character in a string", msg: "{\"event\":\"message\",\"id\":\"v1:0-1\",\"data\":\"a\tb\"}", wantErr: "not a JSON object"},
		{name: "a JSON array", msg: `[1,2]`, wantErr: "not a JSON object"},
		{name: "truncated", msg: `{"event":"message","id":"v1:0-1","data":{"a"`, wantErr: "not a JSON object"},
		{name: "no event", msg: `{"id":"v1:0-1","data":{}}`, wantErr: `without "event"`},
		{name: "open without an id", msg: `{"event":"open","retry":3000}`, wantErr: `"open" message without "id"`},
		{name: "position without an id", msg: `{"event":"position"}`, wantErr: `"position" message without "id"`},
	}
	for _, tc := range tests {
		// wsEvent (the scanner, encoding/json for what it does not take) and encoding/json alone agree.
		for name, f := range map[string]func([]byte) (wsKind, sse.Event, bool, error){"wsEvent": wsEvent, "wsEventJSON": wsEventJSON} {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				kind, ev, hasID, err := f([]byte(tc.msg))
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("%s(%s) = %v, want an error containing %q", name, tc.msg, err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s(%s): %v", name, tc.msg, err)
				}
				if kind != tc.wantKind || ev != tc.wantEv || hasID != tc.wantHasID {
					t.Fatalf("%s(%s) = %v %+v %v, want %v %+v %v", name, tc.msg, kind, ev, hasID, tc.wantKind, tc.wantEv, tc.wantHasID)
				}
			})
		}
	}
	// The gateway's messages take the fast path.
	for _, msg := range []string{
		string(gatewayWSMessage("message", "v1:0-1.1-2", value, "k-7", 0, 1)),
		`{"event":"open","id":"v1:0-5812.1-5790","retry":3000}`,
		`{"data":"not json","event":"message","id":"v1:0-9","key":"k","offset":9,"partition":0}`,
	} {
		if _, ok := scanWS([]byte(msg)); !ok {
			t.Errorf("scanWS(%s) fell back to encoding/json", msg)
		}
	}

	// The send time of a value the tool produced comes out of the message as out of the SSE frame.
	_, ev, _, err := wsEvent(gatewayWSMessage("message", "v1:0-1", value, "k-7", 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if ts, ok := sendTime(ev.Data); !ok || ts.UnixNano() != 1_700_000_000_123_456_789 {
		t.Fatalf("sendTime(%q) = %v %v", ev.Data, ts, ok)
	}
}

func TestAppendAck(t *testing.T) {
	for _, id := range []string{"v1:0-5813.1-5790", "v1:", "v2:AAEC-_", `we"ird\<id>&`, "caf\u00e9"} {
		b := appendAck(nil, id)
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 || m["ack"] != id {
			t.Fatalf("appendAck(%q) = %s: %v %v", id, b, m, err)
		}
	}
	if got := string(appendAck([]byte("junk"), "v1:0-1")[4:]); got != `{"ack":"v1:0-1"}` {
		t.Fatalf("appendAck = %s", got)
	}
}

func TestStreamURL(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
		want string
	}{
		{"sse", config{Mode: modeSteady, Proto: protoH1, Topic: "t"}, "http://g/streams/t"},
		{"sse idle", config{Mode: modeIdle, Proto: protoH1, Topic: "t"}, "http://g/streams/t?heartbeat=0"},
		{"h2c idle", config{Mode: modeIdle, Proto: protoH2C, Topic: "t"}, "http://g/streams/t?heartbeat=0"},
		{"ws", config{Mode: modeSteady, Proto: protoWS, Topic: "t"}, "http://g/ws/t"},
		{"ws idle", config{Mode: modeIdle, Proto: protoWS, Topic: "t"}, "http://g/ws/t?heartbeat=0"},
		{"ws with acks", config{Mode: modeSteady, Proto: protoWS, Topic: "t", WSAcks: 10, WSMaxInFlight: 100}, "http://g/ws/t?ack=1&max_in_flight=100"},
		{"ws idle with acks", config{Mode: modeIdle, Proto: protoWS, Topic: "t", WSAcks: 1, WSMaxInFlight: 5}, "http://g/ws/t?ack=1&heartbeat=0&max_in_flight=5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{cfg: tc.cfg}
			if got := r.streamURL("http://g", 0); got != tc.want {
				t.Fatalf("streamURL = %s, want %s", got, tc.want)
			}
		})
	}
	got, err := wsStreamURL("http://g/ws/t?ack=1&max_in_flight=5", "v1:0-5.1-7")
	if err != nil || got != "http://g/ws/t?ack=1&last_event_id=v1%3A0-5.1-7&max_in_flight=5" {
		t.Fatalf("wsStreamURL = %s, %v", got, err)
	}
}

func TestParseConfigWS(t *testing.T) {
	env := func(string) string { return "" }
	tests := []struct {
		name    string
		args    []string
		wantErr string // empty: accepted
	}{
		{"ws steady", []string{"--proto=ws"}, ""},
		{"ws idle", []string{"--proto=ws", "--mode=idle"}, ""},
		{"ws storm", []string{"--proto=ws", "--mode=storm"}, ""},
		{"ws with acks", []string{"--proto=ws", "--ws-acks=1"}, ""},
		{"ws acks every max_in_flight", []string{"--proto=ws", "--ws-acks=20", "--ws-max-in-flight=20"}, ""},
		{"ws slow", []string{"--proto=ws", "--mode=slow"}, "HTTP/1.1 only"},
		{"ws resume", []string{"--proto=ws", "--mode=resume"}, "HTTP/1.1 only"},
		{"ws over https", []string{"--proto=ws", "--url=https://127.0.0.1:8443"}, "want http"},
		{"ws to a remote gateway", []string{"--proto=ws", "--url=http://10.0.0.1:8080"}, "loopback"},
		{"acks without ws", []string{"--ws-acks=1"}, "--proto=ws only"},
		{"negative acks", []string{"--proto=ws", "--ws-acks=-1"}, "--ws-acks"},
		{"acks beyond max in flight", []string{"--proto=ws", "--ws-acks=101"}, "stalls"},
		{"max in flight 0", []string{"--proto=ws", "--ws-max-in-flight=0"}, "--ws-max-in-flight"},
		{"max in flight too large", []string{"--proto=ws", "--ws-max-in-flight=10001"}, "--ws-max-in-flight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args, env, io.Discard)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parseConfig(%v) = %v", tc.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parseConfig(%v) = %v, want an error containing %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

// testRecord is one record a test server sends every stream: its id, partition and offset, as the gateway
// would (or a repeat, or a jump, to be caught).
type testRecord struct {
	id        string
	part      int32
	off       int64
	event     string // empty: a record ("message"); "position": a position message / id-only block
	value     []byte
	keepAlive bool // a heartbeat (SSE comment, WebSocket ping) before this record
}

// testStream is what both test servers send: an opening id, then 12 records of two partitions, one of
// them repeated (a duplicate), one offset skipped (a loss), a position move and a keep-alive on the way.
func testStream() (open string, recs []testRecord, ends []int64) {
	now := time.Now().UnixNano()
	val := func(i int) []byte { return makeValue(now, int64(i), 200) }
	offs := [2]int64{100, 200}
	for i := range 12 {
		p := int32(i % 2)
		offs[p]++
		if i == 7 {
			offs[p]++ // skips one offset of partition 1: one record lost
		}
		id := fmt.Sprintf("v1:0-%d.1-%d", offs[0], offs[1])
		recs = append(recs, testRecord{id: id, part: p, off: offs[p], value: val(i), keepAlive: i == 3})
		if i == 4 {
			recs = append(recs, recs[len(recs)-1]) // the same record again: one duplicate
		}
		if i == 9 {
			recs = append(recs, testRecord{id: id, event: "position"})
		}
	}
	return "v1:0-100.1-200", recs, []int64{offs[0] + 1, offs[1] + 1}
}

// wsTestServer is an in-process gateway stand-in speaking the gateway's WebSocket transport
// (coder/websocket, as the gateway): the "open" message, then testStream's records as JSON messages, with
// acknowledgements when the query asks (ack=1, max_in_flight), checked as the gateway checks them.
type wsTestServer struct {
	open  string
	recs  []testRecord
	close websocket.StatusCode // after the records, close the stream with this code; 0 keeps it open
	stop  chan struct{}

	mu      sync.Mutex
	queries []string
	acks    int
	badAcks []string
}

func (s *wsTestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/ws/") {
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	s.queries = append(s.queries, r.URL.RawQuery)
	s.mu.Unlock()
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = ws.CloseNow() }()
	ctx := r.Context()
	maxInFlight := 0
	if q.Get("ack") == "1" {
		maxInFlight, _ = strconv.Atoi(q.Get("max_in_flight"))
	}
	var (
		mu       sync.Mutex
		inflight []string
		room     = make(chan struct{}, 1)
	)
	go func() { // the gateway's readLoop: cumulative acknowledgements of ids waiting for one
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			id, ok := parseTestAck(b)
			mu.Lock()
			last := -1
			for i, x := range inflight {
				if ok && x == id {
					last = i
				}
			}
			if last < 0 {
				mu.Unlock()
				s.mu.Lock()
				s.badAcks = append(s.badAcks, string(b))
				s.mu.Unlock()
				_ = ws.Close(websocket.StatusPolicyViolation, "not an id waiting")
				return
			}
			inflight = inflight[last+1:]
			mu.Unlock()
			s.mu.Lock()
			s.acks++
			s.mu.Unlock()
			select {
			case room <- struct{}{}:
			default:
			}
		}
	}()
	write := func(b []byte) bool {
		return ws.Write(ctx, websocket.MessageText, b) == nil
	}
	if !write([]byte(`{"event":"open","id":"` + s.open + `","retry":1000}`)) {
		return
	}
	for _, rec := range s.recs {
		if rec.keepAlive {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := ws.Ping(pctx) // answered by the client's reads
			cancel()
			if err != nil {
				return
			}
		}
		if rec.event == "position" {
			if !write([]byte(`{"event":"position","id":"` + rec.id + `"}`)) {
				return
			}
			continue
		}
		for maxInFlight > 0 {
			mu.Lock()
			n := len(inflight)
			mu.Unlock()
			if n < maxInFlight {
				break
			}
			select {
			case <-room:
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
				_ = ws.Close(4002, "too slow: nothing acknowledged")
				return
			}
		}
		if maxInFlight > 0 {
			mu.Lock()
			inflight = append(inflight, rec.id)
			mu.Unlock()
		}
		if !write(gatewayWSMessage("message", rec.id, rec.value, "k", rec.part, rec.off)) {
			return
		}
	}
	if s.close != 0 {
		_ = ws.Close(s.close, "closed by the test")
		return
	}
	select {
	case <-ctx.Done():
	case <-s.stop:
	}
}

func parseTestAck(b []byte) (string, bool) {
	var m map[string]string
	if json.Unmarshal(b, &m) != nil || len(m) != 1 {
		return "", false
	}
	id, ok := m["ack"]
	return id, ok
}

// sseTestHandler sends testStream as an HTTP/1.1 event stream, as the gateway does.
func sseTestHandler(open string, recs []testRecord, stop <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = fmt.Fprintf(w, "retry: 1000\nid: %s\n\n", open)
		for _, rec := range recs {
			if rec.keepAlive {
				_, _ = io.WriteString(w, ":\n\n")
			}
			if rec.event == "position" {
				_, _ = fmt.Fprintf(w, "id: %s\n\n", rec.id)
			} else {
				_, _ = fmt.Fprintf(w, "id: %s\ndata: %s\n\n", rec.id, rec.value)
			}
			_ = rc.Flush()
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}
}

// runTestStreams connects n streams of proto to url with the runner's connect, waits until they have
// received want frames (or fails the test after 20 s), stops them and returns the runner.
func runTestStreams(t *testing.T, cfg config, n int, want int64) (*runner, *histogram) {
	t.Helper()
	cfg.ConnectPar, cfg.Mode, cfg.Topic = 64, modeSteady, "t"
	r := &runner{cfg: cfg, connectBase: 10 * time.Second}
	for i := range n {
		r.clients = append(r.clients, &client{n: i})
	}
	var h histogram
	r.sh.hist.Store(&h)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, opened, err := r.connect(ctx, func(int) connOpts {
		return connOpts{url: r.streamURL(cfg.URLs[0], 0), measure: true}
	}, noDelay, 0)
	if err != nil {
		t.Fatal(err)
	}
	if opened != n {
		g.stop()
		t.Fatalf("opened = %d, want %d", opened, n)
	}
	for r.sh.frames.Load() < want && ctx.Err() == nil && r.sh.connErrs.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	g.stop()
	if got := r.sh.frames.Load(); got != want {
		for _, c := range r.clients {
			if c.err != nil {
				t.Logf("client %d: %v", c.n, c.err)
			}
		}
		t.Fatalf("%d of %d frames received", got, want)
	}
	return r, &h
}

// TestWSChecksAsSSE runs the same stream, with a duplicate, a skipped offset, a position move and a
// keep-alive, past the tool as an HTTP/1.1 event stream and as WebSocket messages from a coder/websocket
// server: every stream must be counted and checked alike (frames, delivered, lost, duplicated, latencies,
// id bytes), the WebSocket request must be GET /ws/{topic}, and the opening counts.
func TestWSChecksAsSSE(t *testing.T) {
	open, recs, ends := testStream()
	stop := make(chan struct{})
	defer close(stop)
	sseSrv := httptest.NewServer(sseTestHandler(open, recs, stop))
	defer sseSrv.Close()
	ws := &wsTestServer{open: open, recs: recs, stop: stop}
	wsSrv := httptest.NewServer(ws)
	defer wsSrv.Close()

	const streams = 5
	frames := int64(0)
	for _, rec := range recs {
		if rec.event == "" {
			frames++
		}
	}
	type outcome struct {
		frames, latencies, idBytes int64
		counts                     []trackerCounts
	}
	results := map[string]outcome{}
	for _, tc := range []struct{ proto, url string }{{protoH1, sseSrv.URL}, {protoWS, wsSrv.URL}} {
		r, h := runTestStreams(t, config{Proto: tc.proto, URLs: []string{tc.url}, WSMaxInFlight: 100}, streams, streams*frames)
		o := outcome{frames: r.sh.frames.Load(), latencies: h.Count(), idBytes: r.sh.idBytes.Load()}
		for _, c := range r.clients {
			if c.err != nil {
				t.Errorf("%s client %d: %v", tc.proto, c.n, c.err)
			}
			c.tr.finish(ends)
			o.counts = append(o.counts, c.tr.counts())
		}
		if n := r.sh.connErrs.Load(); n != 0 {
			t.Errorf("%s: connErrs = %d", tc.proto, n)
		}
		if n := r.sh.openConns.Load(); n != 0 {
			t.Errorf("%s: %d streams still counted open after stopping", tc.proto, n)
		}
		if r.sh.bodyBytes.Load() <= 0 {
			t.Errorf("%s: no bytes counted", tc.proto)
		}
		results[tc.proto] = o
	}
	sse, ws2 := results[protoH1], results[protoWS]
	want := trackerCounts{Delivered: frames - 1, Lost: 1, Dup: 1}
	for i, n := range sse.counts {
		if n != want {
			t.Errorf("SSE client %d: %+v, want %+v", i, n, want)
		}
	}
	if fmt.Sprint(ws2) != fmt.Sprint(sse) {
		t.Errorf("WebSocket streams were counted otherwise than SSE ones:\n ws  %+v\n sse %+v", ws2, sse)
	}
	if sse.latencies != streams*frames {
		t.Errorf("latencies = %d, want %d", sse.latencies, streams*frames)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.queries) != streams || ws.queries[0] != "" {
		t.Errorf("WebSocket requests' queries = %q, want %d without acknowledgements", ws.queries, streams)
	}
}

// TestWSAcks: with --ws-acks the streams ask for acknowledgements and send them, every message or every N,
// cumulatively; the server sends at most max_in_flight unacknowledged, so a tool that did not acknowledge
// would stall after that many.
func TestWSAcks(t *testing.T) {
	open := "v1:0-0"
	var recs []testRecord
	now := time.Now().UnixNano()
	for i := 1; i <= 50; i++ {
		recs = append(recs, testRecord{id: fmt.Sprintf("v1:0-%d", i), part: 0, off: int64(i), value: makeValue(now, int64(i), 50)})
	}
	for _, tc := range []struct{ every, maxInFlight, wantAcks int }{
		{1, 1, 50},
		{1, 100, 50},
		{4, 4, 12},
		{7, 10, 7},
	} {
		t.Run(fmt.Sprintf("every_%d_of_%d", tc.every, tc.maxInFlight), func(t *testing.T) {
			stop := make(chan struct{})
			defer close(stop)
			s := &wsTestServer{open: open, recs: recs, stop: stop}
			srv := httptest.NewServer(s)
			defer srv.Close()
			const streams = 3
			r, _ := runTestStreams(t, config{Proto: protoWS, URLs: []string{srv.URL}, WSAcks: tc.every, WSMaxInFlight: tc.maxInFlight}, streams, streams*50)
			for _, c := range r.clients {
				c.tr.finish([]int64{51})
				if n := c.tr.counts(); n != (trackerCounts{Delivered: 50}) {
					t.Errorf("client %d: %+v (err %v)", c.n, n, c.err)
				}
			}
			if got := r.sh.wsAcks.Load(); got != int64(streams*tc.wantAcks) {
				t.Errorf("acks sent = %d, want %d", got, streams*tc.wantAcks)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				s.mu.Lock()
				acks, bad, qs := s.acks, s.badAcks, s.queries
				s.mu.Unlock()
				if acks == streams*tc.wantAcks || time.Now().After(deadline) {
					if acks != streams*tc.wantAcks || len(bad) > 0 {
						t.Errorf("server took %d acks, want %d; refused %q", acks, streams*tc.wantAcks, bad)
					}
					if want := fmt.Sprintf("ack=1&max_in_flight=%d", tc.maxInFlight); len(qs) != streams || qs[0] != want {
						t.Errorf("queries = %q, want %q", qs, want)
					}
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// TestWSStreamFailures: what ends a WebSocket stream is reported as a connection error with the reason: a
// refusal before the upgrade (status and body, as for an event stream), a first message that is not "open",
// resync (as over SSE), a close by the gateway (its code), a resume's id sent as last_event_id.
func TestWSStreamFailures(t *testing.T) {
	rec := testRecord{id: "v1:0-1", value: makeValue(time.Now().UnixNano(), 1, 50)}
	tests := []struct {
		name    string
		handler func(t *testing.T) http.Handler
		lastID  string
		wantErr string
	}{
		{
			name: "refused before the upgrade",
			handler: func(*testing.T) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					http.Error(w, `{"error":"topic not served"}`, http.StatusNotFound)
				})
			},
			wantErr: `status 404: {"error":"topic not served"}`,
		},
		{
			name: "closed by the gateway as too slow",
			handler: func(*testing.T) http.Handler {
				return &wsTestServer{open: "v1:0-0", recs: []testRecord{rec}, close: 4002, stop: make(chan struct{})}
			},
			wantErr: "closed by the gateway (4002)",
		},
		{
			name: "a record before the opening message",
			handler: func(t *testing.T) http.Handler {
				return wsHandler(t, `{"event":"message","id":"v1:0-1","data":{}}`)
			},
			wantErr: `unexpected event "message" before the opening id`,
		},
		{
			name: "resync",
			handler: func(t *testing.T) http.Handler {
				return wsHandler(t, `{"event":"open","id":"v1:0-0"}`, `{"event":"resync","id":"v1:0-9","data":{"reason":"retention"}}`)
			},
			wantErr: `gateway sent event: resync: {"reason":"retention"}`,
		},
		{
			name: "a message that is not JSON",
			handler: func(t *testing.T) http.Handler {
				return wsHandler(t, `{"event":"open","id":"v1:0-0"}`, `data: x`)
			},
			wantErr: "not a JSON object",
		},
		{
			name: "the resume's id goes in the query",
			handler: func(t *testing.T) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if got := r.URL.Query().Get("last_event_id"); got != "v1:0-7" {
						t.Errorf("last_event_id = %q", got)
					}
					wsHandler(t, `{"event":"open","id":"v1:0-7"}`, `{"event":"resync","id":"v1:0-7","data":"stop"}`).ServeHTTP(w, r)
				})
			},
			lastID:  "v1:0-7",
			wantErr: "resync: stop",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler(t))
			defer srv.Close()
			c := &client{}
			var sh shared
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.stream(ctx, &sh, connOpts{url: srv.URL + "/ws/t", ws: true, lastID: tc.lastID})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("stream = %v, want an error containing %q", err, tc.wantErr)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("stream timed out: %v", err)
			}
			if n := sh.openConns.Load(); n != 0 {
				t.Fatalf("openConns = %d after the stream ended", n)
			}
		})
	}
}

// wsHandler accepts a WebSocket, sends msgs and holds the connection until the client leaves.
func wsHandler(t *testing.T, msgs ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		defer func() { _ = ws.CloseNow() }()
		for _, m := range msgs {
			if err := ws.Write(r.Context(), websocket.MessageText, []byte(m)); err != nil {
				return
			}
		}
		_, _, _ = ws.Read(r.Context()) // until the client closes
	})
}
