package stream

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
)

// h2Client returns a client of ps's TLS server that speaks HTTP/2 on one connection, taking at most
// perStream bytes of a stream its reader has not read, and a counter of the connections it opened.
func h2Client(t *testing.T, ps *poolServer, perStream int) (*http.Client, *atomic.Int64) {
	t.Helper()
	base := ps.hs.Client().Transport.(*http.Transport)
	tr := &http.Transport{
		TLSClientConfig:   base.TLSClientConfig.Clone(),
		ForceAttemptHTTP2: true,
		HTTP2:             &http.HTTP2Config{MaxReceiveBufferPerStream: perStream},
	}
	t.Cleanup(tr.CloseIdleConnections)
	conns := new(atomic.Int64)
	tr.TLSClientConfig.VerifyConnection = func(tls.ConnectionState) error { conns.Add(1); return nil }
	return &http.Client{Transport: tr}, conns
}

// openH2 opens a stream on c and reads its opening block.
func openH2(t *testing.T, c *http.Client, url string) *client {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.ProtoMajor != 2 {
		t.Fatalf("the stream came over %s, want HTTP/2", resp.Proto)
	}
	cl := &client{resp: resp, br: bufio.NewReader(resp.Body)}
	for {
		line, err := cl.br.ReadString('\n')
		if err != nil {
			t.Fatalf("opening block: %v", err)
		}
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			cl.id = strings.TrimSpace(id)
		}
		if line == "\n" {
			break
		}
	}
	cl.p = sse.NewParser(cl.br)
	return cl
}

// TestH2SlowStreamAlone: 100 streams share one HTTP/2 connection and one of them stops being read. Its
// flow-control window closes and its writes block, so it is cut after the write timeout as a slow HTTP/1.1
// reader is (write_failed), while the 99 others, on the same connection, get every frame in order meanwhile.
func TestH2SlowStreamAlone(t *testing.T) {
	const streams = 100
	f := newFeeder(t, 64<<20)
	ps := startPool(t, Config{WriteTimeout: 500 * time.Millisecond}, &Topic{Ring: f.rg}, Params{})
	ps.hs.EnableHTTP2 = true
	ps.hs.StartTLS()
	ps.start(t)
	c, conns := h2Client(t, ps, 64<<10)
	clients := make([]*client, streams)
	for i := range clients {
		clients[i] = openH2(t, c, ps.hs.URL)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d streams took %d connections, want 1", streams, n)
	}
	from := lastOffset(t, clients[0].id)

	data := strings.Repeat("z", 8<<10)
	const frames = 40 // 320 KiB: five times what the stream that is not read may hold
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i, cl := range clients[1:] {
		wg.Go(func() {
			for want := from + 1; want <= from+frames; want++ {
				ev, err := cl.p.Next()
				if err != nil {
					errs <- fmt.Errorf("stream %d at offset %d: %w", i+1, want, err)
					return
				}
				if ev.ID != fmt.Sprintf("v1:0-%d", want) || len(ev.Data) != len(data) {
					errs <- fmt.Errorf("stream %d got id %s (%d bytes), want offset %d", i+1, ev.ID, len(ev.Data), want)
					return
				}
			}
		})
	}
	for range frames {
		f.publish(data)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitUntil(t, "the stream that is not read to be cut", func() bool {
		return ps.st.Closed[ReasonWriteFailed].Load() == 1
	})
	if n := ps.st.Open.Load(); n != streams-1 {
		t.Errorf("Open = %d, want %d: only the stream that is not read ends", n, streams-1)
	}
	if n := ps.st.Parked.Load(); n != 0 {
		t.Errorf("Parked = %d: an HTTP/2 stream cannot be taken over by the writer pool", n)
	}
}

// TestH2LeavingSendsGoAway: a stream that starts while the server is leaving says where it is and ends, and
// its HTTP/2 connection gets a GOAWAY, so that the client's reconnect opens a new connection, which the
// Service can send to another pod, instead of coming back to this one on the connection it has.
func TestH2LeavingSendsGoAway(t *testing.T) {
	f := newFeeder(t, 1<<20)
	f.publish("a")
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{})
	ps.hs.EnableHTTP2 = true
	ps.hs.StartTLS()
	ps.start(t)
	c, conns := h2Client(t, ps, 64<<10)
	get := func() (reused bool) {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, ps.hs.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return reused
	}
	_ = openH2(t, c, ps.hs.URL) // an open stream keeps the connection in use
	ps.srv.Leave()
	if !get() {
		t.Fatal("the first stream while leaving did not reuse the connection")
	}
	waitUntil(t, "the GOAWAY to reach the client", func() bool { return !get() })
	if n := conns.Load(); n != 2 {
		t.Errorf("the client opened %d connections, want 2", n)
	}
}

// TestH2IdleStreamOutlivesWriteTimeout: an HTTP/2 stream that gets nothing for longer than the write timeout
// (a quiet topic, heartbeats further apart) stays open and gets what comes next: the write deadline bounds a
// write, not the silence after it (net/http's HTTP/2 server resets a stream whose deadline passes).
func TestH2IdleStreamOutlivesWriteTimeout(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{WriteTimeout: 200 * time.Millisecond}, &Topic{Ring: f.rg}, Params{})
	ps.hs.EnableHTTP2 = true
	ps.hs.StartTLS()
	ps.start(t)
	c, _ := h2Client(t, ps, 64<<10)
	cl := openH2(t, c, ps.hs.URL)
	time.Sleep(time.Second)
	f.publish("late")
	ev, err := cl.p.Next()
	if err != nil || ev.Data != "late" {
		t.Fatalf("after a second of silence: %+v, %v; want the frame published then", ev, err)
	}
	if n := ps.st.Closed[ReasonWriteFailed].Load(); n != 0 {
		t.Errorf("%d streams ended write_failed", n)
	}
}
