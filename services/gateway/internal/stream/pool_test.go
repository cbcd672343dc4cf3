package stream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// poolServer is a Server with a writer pool behind a real loopback HTTP server.
type poolServer struct {
	srv      *Server
	hs       *httptest.Server
	st       *Stats
	outcomes chan Outcome // what Serve returned, for the streams that fit
}

func startPool(t *testing.T, cfg Config, topic *Topic, p Params) *poolServer {
	t.Helper()
	if cfg.Writers == 0 {
		cfg.Writers = 2
	}
	cfg.Logger = discardLog
	ps := &poolServer{srv: NewServer(cfg), st: new(Stats), outcomes: make(chan Outcome, 16)}
	ps.hs = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The query's event, fields, conflate and opened parameters, as the gateway parses them, over p.
		pp := p
		q, err := ParseParams(r.URL.Query(), nil, 0)
		if err != nil {
			t.Errorf("%s: %v", r.URL.RawQuery, err)
		}
		if q.Events != nil {
			pp.Events = q.Events
		}
		if q.Fields != nil {
			pp.Fields = q.Fields
		}
		if q.Conflate != 0 {
			pp.Conflate = q.Conflate
		}
		pp.Opened = pp.Opened || q.Opened
		o := ps.srv.Serve(w, r, topic, pp, ps.st)
		select {
		case ps.outcomes <- o:
		default:
		}
	}))
	return ps
}

// start starts the server (unless the test started it, with TLS) and closes it when the test ends.
func (ps *poolServer) start(t *testing.T) *poolServer {
	t.Helper()
	if ps.hs.URL == "" {
		ps.hs.Start()
	}
	t.Cleanup(func() {
		ps.hs.Close()
		ps.srv.Close()
		// A stream net/http serves (HTTP/2, TLS) ends on its handler's goroutine, which httptest's Close does
		// not wait for on an HTTP/2 connection: its end is counted a moment after.
		deadline := time.Now().Add(10 * time.Second)
		for ps.st.Open.Load() != 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := ps.st.Open.Load(); n != 0 {
			t.Errorf("Open = %d 10 s after Close, want 0", n)
		}
	})
	return ps
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client is an EventSource-like reader of one stream.
type client struct {
	resp *http.Response
	br   *bufio.Reader
	p    *sse.Parser
	id   string // the id of the opening block
}

// TestPoolStreams: many HTTP/1.1 clients, joining at different moments, each get every frame published after
// they joined, exactly once and in order, from the writer pool; the response is a well-formed chunked
// HTTP/1.1 response with the stream's headers.
func TestPoolStreams(t *testing.T) {
	f := newFeeder(t, 8<<20)
	f.publish("before")
	ps := startPool(t, Config{Retry: time.Second}, &Topic{Ring: f.rg}, Params{}).start(t)

	var clients []*client
	var froms []int64
	join := func(n int) {
		for range n {
			clients = append(clients, dialOpen(t, ps.hs.URL))
			c := clients[len(clients)-1]
			froms = append(froms, lastOffset(t, c.id))
		}
	}
	join(10)
	checkHeaders(t, clients[0].resp.Header)
	if te := clients[0].resp.TransferEncoding; len(te) != 1 || te[0] != "chunked" {
		t.Errorf("Transfer-Encoding = %v, want chunked", te)
	}
	if !clients[0].resp.Close {
		t.Error("the response does not say the connection closes")
	}
	waitUntil(t, "10 parked connections", func() bool { return ps.st.Parked.Load() == 10 })
	for i := range 40 {
		f.publish(strings.Repeat("x", i%7+1), fmt.Sprint("a", i))
		if i == 20 {
			join(10) // at another cursor than the first ten
		}
	}
	f.publish("sentinel")
	last := f.offset - 1
	for i, c := range clients {
		for want := froms[i] + 1; want <= last; want++ {
			ev, err := c.p.Next()
			if err != nil {
				t.Fatalf("client %d, offset %d: %v", i, want, err)
			}
			if ev.ID != fmt.Sprintf("v1:0-%d", want) {
				t.Fatalf("client %d got id %s, want offset %d", i, ev.ID, want)
			}
		}
	}
	waitUntil(t, "20 parked connections", func() bool { return ps.st.Parked.Load() == 20 })
	if got, want := ps.st.Open.Load(), int64(20); got != want {
		t.Errorf("Open = %d, want %d", got, want)
	}
}

// dialOpen connects and returns once the opening block (retry and id) was read.
func dialOpen(t *testing.T, url string) *client {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	c := &client{resp: resp, br: bufio.NewReader(resp.Body)}
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			t.Fatalf("opening block: %v", err)
		}
		if strings.HasPrefix(line, "id: ") {
			c.id = strings.TrimSpace(strings.TrimPrefix(line, "id: "))
		}
		if line == "\n" {
			break
		}
	}
	c.p = sse.NewParser(c.br)
	return c
}

// lastOffset returns partition 0's offset in id, or -1.
func lastOffset(t *testing.T, id string) int64 {
	t.Helper()
	v, err := position.Parse(id)
	if err != nil {
		t.Fatalf("id %q: %v", id, err)
	}
	if o, ok := v.Offset(0); ok {
		return o
	}
	return -1
}

// TestPoolSlowClient: a client that stops reading leaves the writer pool once its socket is full and is
// closed after the write timeout, while another client on the same ring gets everything meanwhile.
func TestPoolSlowClient(t *testing.T) {
	f := newFeeder(t, 64<<20)
	// The fast client reads 32 MB within the slow one's write timeout: 3 s was not always enough for that under
	// -race on two busy cores (CI saw 3.46 s).
	ps := startPool(t, Config{WriteTimeout: 6 * time.Second}, &Topic{Ring: f.rg}, Params{}).start(t)

	slow, err := net.Dial("tcp", ps.hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slow.Close() }()
	if _, err := io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	fast := dialOpen(t, ps.hs.URL)
	waitUntil(t, "both connections parked", func() bool { return ps.st.Parked.Load() == 2 })

	// 32 MB: more than the slow client's socket buffers hold.
	data := strings.Repeat("y", 16<<10)
	const n = 2000
	for range n / 10 {
		f.publish(data, data, data, data, data, data, data, data, data, data)
	}
	for i := range n {
		ev, err := fast.p.Next()
		if err != nil || len(ev.Data) != len(data) {
			t.Fatalf("fast client, frame %d: %d bytes, %v", i, len(ev.Data), err)
		}
	}
	if open := ps.st.Open.Load(); open != 2 {
		t.Fatalf("Open = %d once the fast client had everything, want 2 (the slow one still within its write timeout)", open)
	}
	waitUntil(t, "the slow client to be closed", func() bool { return ps.st.Closed[ReasonWriteFailed].Load() == 1 })
	if parked := ps.st.Parked.Load(); parked != 1 {
		t.Errorf("Parked = %d after the slow client left, want 1 (the fast one)", parked)
	}
}

// TestPoolHeartbeatAndClientGone: a parked stream gets its keep-alive comments, and a client that closes its
// connection is noticed within a heartbeat.
func TestPoolHeartbeatAndClientGone(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{Heartbeat: 100 * time.Millisecond}).start(t)
	c := dialOpen(t, ps.hs.URL)
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	for range 3 {
		line, err := c.br.ReadString('\n')
		if err != nil || line != ": keep-alive\n" {
			t.Fatalf("got %q, %v; want a keep-alive comment", line, err)
		}
		if line, err = c.br.ReadString('\n'); err != nil || line != "\n" {
			t.Fatalf("got %q, %v after the comment, want a blank line", line, err)
		}
	}
	f.publish("live")
	if ev, err := c.p.Next(); err != nil || ev.Data != "live" {
		t.Fatalf("got %+v, %v; want the live frame", ev, err)
	}
	_ = c.resp.Body.Close()
	waitUntil(t, "the closed client to be noticed", func() bool {
		return ps.st.Closed[ReasonClientGone].Load() == 1 && ps.st.Open.Load() == 0 && ps.st.Parked.Load() == 0
	})
}

// TestServeOutcome: Serve says a stream was parked when the writer pool took it over, and why it ended when it
// ended on its own goroutine.
func TestServeOutcome(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL)
	if o := <-ps.outcomes; !o.Parked {
		t.Fatalf("Serve returned %+v for an idle pool stream, want parked", o)
	}
	_ = c.resp.Body.Close()
	var st Stats
	srv := NewServer(Config{Logger: discardLog})
	r := httptest.NewRequestWithContext(canceled(t), http.MethodGet, "/streams/t", nil)
	if o := srv.Serve(newMemWriter(), r, &Topic{Ring: f.rg}, Params{}, &st); o.Parked || o.Reason != ReasonClientGone {
		t.Fatalf("Serve returned %+v for a stream whose client left, want client_gone", o)
	}
}

// canceled returns a context that has ended.
func canceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// TestPoolProbe: without heartbeats, a client that closed an idle stream is still noticed, by the writer's
// periodic look at the connection.
func TestPoolProbe(t *testing.T) {
	old := probeEvery
	t.Cleanup(func() { probeEvery = old }) // after startPool's cleanup has stopped the writers
	probeEvery = int64(50 * time.Millisecond)
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL)
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	time.Sleep(200 * time.Millisecond) // a few probes of a live client
	if n := ps.st.Open.Load(); n != 1 {
		t.Fatalf("Open = %d with the client still there, want 1", n)
	}
	before := ps.st.Bytes.Load()
	_ = c.resp.Body.Close()
	waitUntil(t, "the closed client to be noticed", func() bool {
		return ps.st.Closed[ReasonClientGone].Load() == 1 && ps.st.Open.Load() == 0
	})
	if n := ps.st.Bytes.Load(); n != before {
		t.Errorf("%d bytes written after the stream opened: a probe must not write", n-before)
	}
}

// TestPoolDrain: a draining server closes parked streams within the drain window, each with the end of the
// chunked body (a clean end, not a cut connection), and Wait returns once they are gone.
func TestPoolDrain(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{Drain: 300 * time.Millisecond}, &Topic{Ring: f.rg}, Params{Heartbeat: time.Minute}).start(t)
	var cs []*client
	for range 5 {
		cs = append(cs, dialOpen(t, ps.hs.URL))
	}
	waitUntil(t, "5 parked connections", func() bool { return ps.st.Parked.Load() == 5 })
	began := time.Now()
	ps.srv.Drain()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := ps.srv.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("drain took %v, window 300ms", took)
	}
	for i, c := range cs {
		if rest, err := io.ReadAll(c.br); err != nil || len(rest) != 0 {
			t.Errorf("client %d: after the drain read %q, %v; want a clean end of the body", i, rest, err)
		}
	}
	if got := ps.st.Closed[ReasonShutdown].Load(); got != 5 {
		t.Errorf("Closed[shutdown] = %d, want 5", got)
	}
}

// TestPoolClose: Close ends every taken-over stream at once.
func TestPoolClose(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)
	for range 3 {
		dialOpen(t, ps.hs.URL)
	}
	waitUntil(t, "3 parked connections", func() bool { return ps.st.Parked.Load() == 3 })
	ps.srv.Close()
	if o, c := ps.st.Open.Load(), ps.st.Closed[ReasonShutdown].Load(); o != 0 || c != 3 {
		t.Fatalf("after Close: Open = %d, Closed[shutdown] = %d; want 0 and 3", o, c)
	}
}

// TestPoolBehind: a parked stream whose next frame was evicted before its writer got to it catches up on a
// goroutine of its own; here the topic has no Kafka to catch up from, so it ends as behind, and resumes from
// its last id when the client reconnects.
func TestPoolBehind(t *testing.T) {
	f := newFeeder(t, 64<<10)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL)
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	big := strings.Repeat("z", 20<<10)
	f.publish(big, big, big, big, big) // 100 KB in one publish: the first frames are gone before anyone reads
	if rest, err := io.ReadAll(c.br); err != nil {
		t.Fatalf("reading to the end: %q, %v", rest, err)
	}
	// The stream closes its connection before it counts the close, so the count may come just after EOF.
	waitUntil(t, "the stream counted as closed behind", func() bool { return ps.st.Closed[ReasonBehind].Load() == 1 })
}

// TestPoolKeepsOthersOnHandlerPath: HTTP/2 streams and TLS connections are not taken over; they stream as
// before, with no parked connection.
func TestPoolKeepsOthersOnHandlerPath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tls   bool
		proto int
	}{
		{"http2", true, 2},
		{"http1 over tls", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeeder(t, 1<<20)
			ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{})
			cl := http.DefaultClient
			if tc.tls {
				ps.hs.EnableHTTP2 = tc.proto == 2
				ps.hs.StartTLS()
				tr := ps.hs.Client().Transport.(*http.Transport).Clone() //nolint:forcetypeassert // httptest's client has one
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetHTTP1(tc.proto == 1)
				tr.Protocols.SetHTTP2(tc.proto == 2)
				cl = &http.Client{Transport: tr}
			} else {
				ps.hs.Start()
			}
			t.Cleanup(func() { ps.hs.Close(); ps.srv.Close() })
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ps.hs.URL, nil)
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.ProtoMajor != tc.proto {
				t.Fatalf("protocol %s, want major %d", resp.Proto, tc.proto)
			}
			p := sse.NewParser(resp.Body)
			f.publish("hello")
			ev, err := p.Next()
			if err != nil || ev.Data != "hello" {
				t.Fatalf("got %+v, %v", ev, err)
			}
			if n := ps.st.Parked.Load(); n != 0 {
				t.Errorf("Parked = %d, want 0", n)
			}
		})
	}
}

// TestPoolFiltered: a filtered stream is parked too; its writer passes over the frames the filter drops and
// writes the others with their positions.
func TestPoolFiltered(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL+"?event=keep")
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	publish := func(typ string, n int) {
		f.b.Reset()
		for range n {
			f.offset++
			f.b.Add(sse.AppendEvent(f.b.Buf(), f.id(), typ, []byte(fmt.Sprint(typ, f.offset-1))), 0, f.offset-1, nil)
		}
		f.rg.Publish(&f.b, []byte(f.id()))
	}
	for i := range 20 {
		publish("skip", i%3)
		publish("keep", 1)
	}
	publish("skip", 5)
	publish("keep", 1)
	want := int64(0)
	for i := range 21 {
		ev, err := c.p.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		want += int64(i%3) + 1
		if i == 20 {
			want = f.offset
		}
		if ev.Type != "keep" || ev.ID != fmt.Sprintf("v1:0-%d", want-1) || ev.Data != fmt.Sprint("keep", want-1) {
			t.Fatalf("event %d = %+v, want a keep event at offset %d", i, ev, want-1)
		}
	}
	if n := ps.st.Parked.Load(); n != 1 {
		t.Errorf("Parked = %d, want 1", n)
	}
	if n := ps.st.Frames.Load(); n != 21 {
		t.Errorf("Frames = %d, want 21 (skipped frames are not written)", n)
	}
}

// TestPoolLinger: with a linger, frames published close together still all arrive, in order.
func TestPoolLinger(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{Linger: 20 * time.Millisecond}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL)
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 100 {
			f.publish(strconv.Itoa(i))
			if i%10 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	for i := range 100 {
		ev, err := c.p.Next()
		if err != nil || ev.Data != strconv.Itoa(i) {
			t.Fatalf("frame %d: %+v, %v", i, ev, err)
		}
	}
	wg.Wait()
}
