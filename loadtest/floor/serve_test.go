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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingListener records every Write on the connections it accepts, so that a test can see how the
// floor cut its output into writes.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*recordingConn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recordingConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, rc)
	l.mu.Unlock()
	return rc, nil
}

type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err == nil {
		c.mu.Lock()
		c.writes = append(c.writes, bytes.Clone(p))
		c.mu.Unlock()
	}
	return n, err
}

// startServe runs serve on a recording loopback listener; stop ends it and returns what serve returned.
func startServe(t *testing.T, o options) (*recordingListener, func() (stats, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &recordingListener{Listener: ln}
	ctx, cancel := context.WithCancel(context.Background())
	type out struct {
		st  stats
		err error
	}
	done := make(chan out, 1)
	go func() {
		st, err := serve(ctx, rl, o)
		done <- out{st, err}
	}()
	var once sync.Once
	var res out
	stop := func() (stats, error) {
		once.Do(func() {
			cancel()
			res = <-done
		})
		return res.st, res.err
	}
	t.Cleanup(func() { _, _ = stop() })
	return rl, stop
}

// streamClient is one reader of the floor's stream.
type streamClient struct {
	conn  net.Conn
	br    *bufio.Reader
	first int64 // the opening block's record: the first frame must be the one after it
}

// dial opens a stream: it sends a GET, checks the head the floor answers with and reads the opening block.
func dial(t *testing.T, addr string) *streamClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET /streams/loadtest HTTP/1.1\r\nHost: "+addr+"\r\nAccept: text/event-stream\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		t.Fatalf("status %d", resp.StatusCode)
	case resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache":
		t.Fatalf("head %v, want an event stream that is not cached", resp.Header)
	case len(resp.TransferEncoding) != 0 || resp.ContentLength != -1 || !resp.Close:
		t.Fatalf("transfer encoding %v, length %d, close %v: want a body delimited by the end of the connection",
			resp.TransferEncoding, resp.ContentLength, resp.Close)
	}
	if line := readLine(t, br); line != "retry: 3000" {
		t.Fatalf("first body line %q, want the retry line", line)
	}
	id := readLine(t, br)
	n, ok := recordOf(id)
	if !ok {
		t.Fatalf("opening id line %q", id)
	}
	if blank := readLine(t, br); blank != "" {
		t.Fatalf("opening block goes on with %q", blank)
	}
	return &streamClient{conn: c, br: br, first: n}
}

func readLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("read %q: %v", line, err)
	}
	return strings.TrimSuffix(line, "\n")
}

// recordOf returns n from the line "id: v1:0-<n>".
func recordOf(line string) (int64, bool) {
	s, ok := strings.CutPrefix(line, "id: v1:0-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// checkFrame checks that frame is exactly record n's: its id, a value of valueBytes bytes of the load tool's
// form, and the blank line.
func checkFrame(frame string, n int64, valueBytes int) error {
	id, rest, _ := strings.Cut(frame, "\n")
	if got, ok := recordOf(id); !ok || got != n {
		return fmt.Errorf("id line %q, want record %d", id, n)
	}
	data, rest, _ := strings.Cut(rest, "\n")
	value, ok := strings.CutPrefix(data, "data: ")
	if !ok || len(value) != valueBytes {
		return fmt.Errorf("data line %q: want %d bytes of value", data, valueBytes)
	}
	if !strings.HasPrefix(value, `{"ts":`) || !strings.Contains(value, `,"seq":`+strconv.FormatInt(n, 10)+`,"pad":"x`) ||
		!strings.HasSuffix(value, `x"}`) {
		return fmt.Errorf("value %q is not the load tool's value for record %d", value, n)
	}
	if rest != "\n" {
		return fmt.Errorf("frame ends with %q, want one blank line", rest)
	}
	return nil
}

// readFrames reads frames until the end of the stream and checks that they are the records after the
// opening one, each well-formed, in order; it returns the last record read.
func (c *streamClient) readFrames(valueBytes int) (int64, error) {
	want := c.first + 1
	for {
		var frame strings.Builder
		for {
			line, err := c.br.ReadString('\n')
			if errors.Is(err, io.EOF) && line == "" && frame.Len() == 0 {
				return want - 1, nil
			}
			if err != nil {
				return want - 1, fmt.Errorf("after record %d: %w", want-1, err)
			}
			frame.WriteString(line)
			if line == "\n" {
				break
			}
		}
		if err := checkFrame(frame.String(), want, valueBytes); err != nil {
			return want - 1, err
		}
		want++
	}
}

// TestServeFramesOneWriteEach serves a few connections at a modest rate from two writers: every connection
// gets a proper head and opening block in one write, then every record after its opening one, in order, each
// frame well-formed and written by a write of its own, up to the last record published, then the end of its
// stream.
func TestServeFramesOneWriteEach(t *testing.T) {
	const conns, valueBytes = 5, 200
	rl, stop := startServe(t, options{writers: 2, rate: 200, valueBytes: valueBytes, drain: 5 * time.Second})
	addr := rl.Addr().String()
	clients := make([]*streamClient, conns)
	for i := range clients {
		clients[i] = dial(t, addr)
	}
	// Let every connection get a few dozen records.
	time.Sleep(300 * time.Millisecond)
	st, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if st.Conns != conns || st.Dropped != 0 || st.Last < 30 {
		t.Fatalf("stats %+v: want %d connections, none dropped, 30 records or more", st, conns)
	}
	var received int64
	for i, c := range clients {
		last, err := c.readFrames(valueBytes)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if last != st.Last {
			t.Fatalf("client %d read up to record %d, and the floor published up to %d", i, last, st.Last)
		}
		received += last - c.first
	}
	if st.Frames != received {
		t.Fatalf("the floor counted %d frames written, the clients read %d", st.Frames, received)
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	var writes int64
	for i, rc := range rl.conns {
		rc.mu.Lock()
		ws := rc.writes
		rc.mu.Unlock()
		if len(ws) == 0 || !bytes.HasPrefix(ws[0], []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(ws[0], []byte("\n\n")) {
			t.Fatalf("conn %d: the first write is not the head with the opening block: %q", i, ws)
		}
		first, _ := recordOf(string(ws[0][bytes.LastIndex(ws[0], []byte("id: ")) : len(ws[0])-2]))
		for j, w := range ws[1:] {
			if err := checkFrame(string(w), first+1+int64(j), valueBytes); err != nil {
				t.Fatalf("conn %d, write %d is not one frame: %v", i, j+1, err)
			}
		}
		writes += int64(len(ws) - 1)
	}
	if writes != st.Frames {
		t.Fatalf("%d frame writes, %d frames: want one write per frame", writes, st.Frames)
	}
}

// TestServeDropsGoneClient closes one client while the others read on: the floor drops it once a write to it
// fails, and the others still get every record.
func TestServeDropsGoneClient(t *testing.T) {
	rl, stop := startServe(t, options{writers: 1, rate: 500, valueBytes: 50, drain: 5 * time.Second})
	addr := rl.Addr().String()
	gone, stay := dial(t, addr), dial(t, addr)
	_ = gone.conn.Close()
	time.Sleep(200 * time.Millisecond) // tens of records: the second write after the close fails
	st, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if st.Dropped != 1 || st.Conns != 2 {
		t.Fatalf("stats %+v: want 2 connections, 1 dropped", st)
	}
	last, err := stay.readFrames(50)
	if err != nil || last != st.Last {
		t.Fatalf("the remaining client read up to %d (%v), want %d", last, err, st.Last)
	}
}

// TestServeRefusesOtherMethods answers a POST with 405, and the floor goes on serving.
func TestServeRefusesOtherMethods(t *testing.T) {
	rl, stop := startServe(t, options{writers: 1, rate: 100, valueBytes: 10, drain: 5 * time.Second})
	c, err := net.Dial("tcp", rl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "POST /streams/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("status %d, want 405", resp.StatusCode)
	}
	dial(t, rl.Addr().String())
	if st, err := stop(); err != nil || st.Conns != 1 {
		t.Fatalf("stats %+v, %v: want the GET's connection only", st, err)
	}
}

func TestParseFlags(t *testing.T) {
	o, listen, err := parseFlags([]string{"--listen=[::1]:0", "--writers=3", "--rate=50", "--value-bytes=100"}, io.Discard)
	if err != nil || listen != "[::1]:0" || o.writers != 3 || o.rate != 50 || o.valueBytes != 100 {
		t.Fatalf("parseFlags = %+v, %q, %v", o, listen, err)
	}
	for _, args := range [][]string{
		{"--listen=0.0.0.0:0"},
		{"--listen=:8080"},
		{"--listen=example.com:80"},
		{"--listen=127.0.0.1"},
		{"--rate=0"},
		{"--rate=-5"},
		{"--writers=0"},
		{"--value-bytes=-1"},
		{"--drain=0s"},
		{"extra"},
	} {
		if _, _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%v) accepted it", args)
		}
	}
	var stderr bytes.Buffer
	if code := mainStatus([]string{"--listen=10.0.0.1:0"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "loopback") {
		t.Fatalf("a non-loopback --listen: status %d, %q", code, stderr.String())
	}
}
