package stream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWSSlowPublishKeepsSocket: while the read loop publishes a client's message for longer than the write
// timeout (Kafka slow: here five times it), the client's pongs and acknowledgements wait unread behind it;
// neither the keep-alives (every 100 ms) nor a record waiting for room close the socket as too slow, and once
// the publish is answered the stream goes on. Before, the first keep-alive, or the wait for an
// acknowledgement, during the publish closed it 4002.
func TestWSSlowPublishKeepsSocket(t *testing.T) {
	f := newFeeder(t, 1<<20)
	f.publish("first")
	srv := NewServer(Config{WriteTimeout: 200 * time.Millisecond, Logger: discardLog})
	var st Stats
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, err := ParseWSOptions(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.Inbound = func(ctx context.Context, msg []byte) ([]byte, int) {
			select { // Kafka takes its time
			case <-release:
			case <-ctx.Done():
			}
			return []byte(`{"event":"published","data":{}}`), http.StatusOK
		}
		p := Params{LastEventID: "v1:", Heartbeat: 100 * time.Millisecond}
		srv.ServeWebSocket(w, r, []TopicStream{{Topic: &Topic{Name: "t", Ring: f.rg}, Params: p, Stats: &st}}, nil, o)
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ws := dialTestWS(t, ctx, hs, "publish=1&publish_results=1&ack=1&max_in_flight=1")
	if ev, _ := readTestWS(t, ctx, ws); ev != "open" {
		t.Fatalf("first message %q, want open", ev)
	}
	if ev, _ := readTestWS(t, ctx, ws); ev != "message" {
		t.Fatalf("second message %q, want the record", ev)
	}
	// Reads in the background answer the pings.
	got := make(chan string, 4)
	go func() {
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				got <- "closed: " + err.Error()
				return
			}
			got <- string(b)
		}
	}()
	send := func(msg string) {
		t.Helper()
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	// quiet fails unless nothing comes for five write timeouts: the publish goes on, and nothing closes.
	quiet := func(what string) {
		t.Helper()
		select {
		case m := <-got:
			t.Fatalf("%s: %s", what, m)
		case <-time.After(time.Second): // the length of the publish this test needs
		}
	}
	// A publish while keep-alives are due: their pongs wait unread.
	send("hello")
	quiet("during the first publish")
	release <- struct{}{}
	if m := <-got; !strings.Contains(m, `"published"`) {
		t.Fatalf("after the first publish: %s, want its answer", m)
	}
	// A publish while a record waits for room (max_in_flight=1, the first record not acknowledged): the
	// acknowledgement waits unread behind the publish.
	send("again")
	send(`{"ack":"v1:0-0"}`)
	f.publish("second")
	quiet("during the second publish")
	release <- struct{}{}
	if m := <-got; !strings.Contains(m, `"published"`) {
		t.Fatalf("after the second publish: %s, want its answer", m)
	}
	if m := <-got; !strings.Contains(m, `"second"`) {
		t.Fatalf("then: %s, want the record the acknowledgement made room for", m)
	}
	if n := st.Closed[ReasonWriteFailed].Load(); n != 0 {
		t.Errorf("%d streams ended as write_failed", n)
	}
}
