package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
)

// shared holds what every connection goroutine updates.
type shared struct {
	hist      atomic.Pointer[histogram] // latencies of live frames go here; nil records none
	frames    atomic.Int64              // events received by all connections
	connErrs  atomic.Int64              // streams that ended with an error other than our own cancel
	openConns atomic.Int64              // streams whose opening block has been read
	idBytes   atomic.Int64              // bytes of the id: values of the events received by all connections
	bodyBytes atomic.Int64              // bytes of event-stream body (after chunked decoding), or of WebSocket messages, read by all connections
	wsAcks    atomic.Int64              // acknowledgements sent by all WebSocket streams (--ws-acks)
}

// countingReader counts the bytes read through it; one per connection, summed into shared when it ends.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// client is one simulated browser: it holds the position tracker across reconnects.
type client struct {
	n      int
	tr     tracker
	sc     *shapeCheck // the values' check of a shaped stream (--shape); nil for plain streams
	failed atomic.Bool // the last stream ended with an error; readable while it runs

	// Set by the connection goroutine, read after it has been joined.
	err        error     // how the last stream ended, nil for our own cancel
	requested  time.Time // when the last request was sent
	firstFrame time.Time // first event after the last request (zero if none)
	closedByGW bool      // slow mode: the gateway closed the stream while we were not reading
	closeErr   error     // slow mode: what reading after the stall ended with (nil: a clean end)
}

// connOpts says how one stream is opened and read.
type connOpts struct {
	url     string     // full stream URL with query
	lastID  string     // Last-Event-ID header; empty for a new stream
	opened  func()     // called once the opening block has been read
	rcvBuf  int        // SO_RCVBUF for the socket; 0 leaves the kernel default
	local   netip.Addr // source address to bind (see source.go); the zero Addr lets the kernel choose
	readBuf int        // bytes read from the socket at once, at least 4096
	measure bool       // record latencies (slow mode leaves out the slow ones)

	// HTTP/2 (h2.go): the run's connections and this stream's group among them; nil h2 speaks HTTP/1.1.
	h2      *h2Pool
	h2Group int

	// WebSocket (ws.go): the stream is GET /ws/{topic} (url says so) read as JSON messages; wsAckEvery > 0
	// acknowledges every wsAckEvery-th message (url asks for ack=1).
	ws         bool
	wsAckEvery int

	// Slow mode: when stopRead closes, the stream stops reading; when check closes, it reads what is left
	// for up to checkWait to learn whether the gateway closed it meanwhile.
	stopRead  <-chan struct{}
	check     <-chan struct{}
	checkWait time.Duration
}

// dialer connects from local (when valid) with an optional small receive buffer, so a client that stops
// reading fills its socket quickly (otherwise loopback autotuning lets it absorb megabytes first).
func dialer(rcvBuf int, local netip.Addr) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if local.IsValid() {
		d.LocalAddr = localTCPAddr(local)
	}
	if rcvBuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvBuf)
			})
			return errors.Join(err, serr)
		}
	}
	return d
}

// stream opens one SSE stream and reads it until ctx ends or the stream fails. Over HTTP/1.1 it uses a raw
// TCP connection (one goroutine, a 4 KiB buffer) rather than net/http's client, which would add two
// goroutines and two buffers per connection; over HTTP/2 (o.h2) it sends the request on its group's shared
// connection (h2.go). Either way the response body is read by read. A WebSocket stream (o.ws) is opened and
// read by streamWS (ws.go), its messages checked by the same begin and event.
func (c *client) stream(ctx context.Context, sh *shared, o connOpts) error {
	if o.ws {
		return c.streamWS(ctx, sh, o)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url, http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if o.lastID != "" {
		req.Header.Set("Last-Event-ID", o.lastID)
	}
	c.requested = time.Time{}
	c.firstFrame = time.Time{}
	var (
		resp    *http.Response
		conn    net.Conn // HTTP/1.1 only: the socket, for the slow mode's stall
		bodyBuf = 4096
	)
	if o.h2 != nil {
		if resp, err = c.roundTripH2(ctx, req, o); err != nil {
			return err
		}
		// The body is read from the connection's buffers, not a socket: a busy stream reads more at once.
		bodyBuf = max(o.readBuf, 4096)
	} else {
		h, err := c.roundTripH1(ctx, req, o)
		if err != nil {
			return err
		}
		defer h.done()
		resp, conn = h.resp, h.conn
	}
	defer func() { _ = resp.Body.Close() }()
	return c.read(ctx, sh, resp, conn, bodyBuf, o)
}

// h1Conn is a request sent on a TCP connection of the stream's own, and its response.
type h1Conn struct {
	resp *http.Response
	conn net.Conn
	br   *bufio.Reader // the connection's reader, past the response header (a 101's WebSocket frames follow)
	done func()        // closes the connection
}

// roundTripH1 dials a TCP connection of the stream's own (from o.local, with o.rcvBuf), closed when ctx ends,
// writes the request and reads the response header. Event streams and WebSocket handshakes both use it.
func (c *client) roundTripH1(ctx context.Context, req *http.Request, o connOpts) (h1Conn, error) {
	network, local := "tcp", netip.Addr{}
	if o.local.IsValid() && bindsSource(req.URL.Hostname()) {
		network, local = "tcp4", o.local
	}
	conn, err := dialer(o.rcvBuf, local).DialContext(ctx, network, req.URL.Host)
	if err != nil {
		return h1Conn{}, fmt.Errorf("connect: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	done := func() {
		stop()
		_ = conn.Close()
	}
	c.requested = time.Now()
	if err := req.Write(conn); err != nil {
		done()
		return h1Conn{}, fmt.Errorf("request: %w", err)
	}
	br := bufio.NewReaderSize(conn, max(o.readBuf, 4096))
	resp, err := http.ReadResponse(br, req) //nolint:bodyclose // the body is the stream: read reads it, done closes its connection
	if err != nil {
		done()
		return h1Conn{}, fmt.Errorf("response: %w", err)
	}
	return h1Conn{resp: resp, conn: conn, br: br, done: done}, nil
}

// read checks the response and reads its event stream until ctx ends or the stream fails: the opening
// block, then every event through event. conn is the stream's own socket (HTTP/1.1), nil over HTTP/2.
func (c *client) read(ctx context.Context, sh *shared, resp *http.Response, conn net.Conn, bodyBuf int, o connOpts) error {
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	counted := &countingReader{r: resp.Body}
	var idBytes int64
	defer func() {
		sh.bodyBytes.Add(counted.n)
		sh.idBytes.Add(idBytes)
	}()
	body := bufio.NewReaderSize(counted, bodyBuf)
	id, err := readOpening(body)
	if err != nil {
		return err
	}
	if err := c.begin(sh, id, o); err != nil {
		return err
	}
	defer sh.openConns.Add(-1)

	p := sse.NewParser(body)
	for {
		if o.stopRead != nil && conn != nil {
			select {
			case <-o.stopRead:
				return c.stall(ctx, conn, body, o)
			default:
			}
		}
		ev, err := p.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, sse.ErrEventTooLarge) || errors.Is(err, sse.ErrLineTooLong) {
				continue
			}
			return fmt.Errorf("stream: %w", err)
		}
		if err := c.event(sh, ev, o.measure); err != nil {
			return err
		}
		idBytes += int64(len(ev.ID))
	}
}

// begin accounts for a stream's opening position, whatever the transport (the opening block of an event
// stream, the "open" message of a WebSocket): the tracker takes its id (the first sets where the client
// starts, a later one, a resume's, is checked against what the client had), the stream counts as open and
// o.opened is called. The caller subtracts the stream from sh.openConns when it ends.
func (c *client) begin(sh *shared, id string, o connOpts) error {
	now := time.Now()
	if err := c.tr.open(id, now); err != nil {
		return err
	}
	if c.sc != nil {
		c.sc.opened(now)
	}
	sh.openConns.Add(1)
	if o.opened != nil {
		o.opened()
	}
	return nil
}

// event accounts for one event just received, whatever the transport (a WebSocket message is mapped to the
// event an event stream would have carried, wsEvent): the tracker checks its id, the shared counters count it
// and, with measure, its latency goes into the histogram. The clock is read only when something needs it
// (a latency, the first frame, a storm target reached): at millions of frames a second, reading it for
// every frame was a tenth of the tool's time.
func (c *client) event(sh *shared, ev sse.Event, measure bool) error {
	var clk lazyClock
	h := sh.hist.Load()
	if h != nil && measure {
		clk.now()
	}
	if c.firstFrame.IsZero() {
		c.firstFrame = clk.now()
	}
	if ev.Type == "resync" {
		return fmt.Errorf("gateway sent event: resync: %s", ev.Data)
	}
	if ev.Type == "live" && c.sc != nil {
		// A snapshot's cut: the position, and every frame after it moves it by one record.
		c.sc.live(clk.now())
		c.tr.exactFrom(ev.ID)
		return nil
	}
	c.tr.frame(ev.ID, &clk)
	if c.sc != nil {
		c.sc.record(ev.Data)
	}
	sh.frames.Add(1)
	if h != nil && measure {
		if ts, ok := sendTime(ev.Data); ok {
			h.Record(clk.now().Sub(ts))
		}
	}
	return nil
}

// lazyClock reads the time once, on first use.
type lazyClock struct{ t time.Time }

func (c *lazyClock) now() time.Time {
	if c.t.IsZero() {
		c.t = time.Now()
	}
	return c.t
}

// stall stops reading, like a browser tab frozen by the OS, until o.check closes, then finds out whether
// the gateway closed the stream meanwhile: it reads what is left for up to o.checkWait; an end of stream or a
// reset means the gateway gave up on us, a timeout means the stream is still open.
func (c *client) stall(ctx context.Context, conn net.Conn, body io.Reader, o connOpts) error {
	select {
	case <-o.check:
	case <-ctx.Done():
		return nil
	}
	_ = conn.SetReadDeadline(time.Now().Add(o.checkWait))
	_, err := io.Copy(io.Discard, body)
	var ne net.Error
	if timedOut := errors.As(err, &ne) && ne.Timeout(); ctx.Err() == nil && !timedOut {
		c.closedByGW = true
		c.closeErr = err
	}
	return nil
}

// readOpening reads the stream's opening block ("retry:" and "id:" lines, then a blank line) and returns
// its id. The Parser does not report it (an id-only block dispatches no event), and without it the first
// frame could not be checked.
func readOpening(r *bufio.Reader) (string, error) {
	id, haveID := "", false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("opening block: %w", err)
		}
		line = trimEOL(line)
		switch {
		case line == "":
			if haveID {
				return id, nil
			}
		case len(line) >= 3 && line[:3] == "id:":
			id, haveID = trimField(line[3:]), true
		case len(line) >= 6 && line[:6] == "event:":
			return "", fmt.Errorf("opening block: unexpected event %q before the opening id", trimField(line[6:]))
		}
	}
}

func trimEOL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

func trimField(s string) string {
	if len(s) > 0 && s[0] == ' ' {
		return s[1:]
	}
	return s
}

// valuePrefix starts every value the tool produces; the send time follows it.
const valuePrefix = `{"ts":`

// sendTime extracts the send timestamp (unix nanoseconds) from a value the tool produced, without a JSON
// decoder: the tool writes "ts" first. Values of other producers are skipped.
func sendTime(data string) (time.Time, bool) {
	if len(data) < len(valuePrefix) || data[:len(valuePrefix)] != valuePrefix {
		return time.Time{}, false
	}
	rest := data[len(valuePrefix):]
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	ns, err := strconv.ParseInt(rest[:end], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
