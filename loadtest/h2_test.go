package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestH2GroupOf(t *testing.T) {
	tests := []struct {
		name                   string
		i, urls, perConn, want int
	}{
		{"first stream", 0, 1, 100, 0},
		{"last of the first group", 99, 1, 100, 0},
		{"first of the second group", 100, 1, 100, 1},
		{"one stream per connection", 7, 1, 1, 7},
		{"two urls: stream 1 is the first on the second url", 1, 2, 3, 0},
		{"two urls: streams 0 2 4 share url 0's first connection", 4, 2, 3, 0},
		{"two urls: stream 6 opens url 0's second connection", 6, 2, 3, 1},
		{"two urls: stream 7 opens url 1's second connection", 7, 2, 3, 1},
		{"three urls", 299, 3, 100, 0},
		{"three urls, next group", 300, 3, 100, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := h2GroupOf(tc.i, tc.urls, tc.perConn); got != tc.want {
				t.Fatalf("h2GroupOf(%d, %d, %d) = %d, want %d", tc.i, tc.urls, tc.perConn, got, tc.want)
			}
		})
	}
	// Every group holds perConn streams of one URL, whatever the number of URLs.
	for _, urls := range []int{1, 2, 3} {
		count := map[[2]int]int{}
		for i := range 1000 {
			count[[2]int{i % urls, h2GroupOf(i, urls, 50)}]++
		}
		for k, n := range count {
			if n > 50 {
				t.Fatalf("%d urls: group %v has %d streams, want at most 50", urls, k, n)
			}
		}
	}
}

func TestParseConfigProto(t *testing.T) {
	env := func(string) string { return "" }
	tests := []struct {
		name    string
		args    []string
		wantErr string // empty: accepted
	}{
		{"default is h1", nil, ""},
		{"h2c", []string{"--proto=h2c"}, ""},
		{"h2c in idle", []string{"--proto=h2c", "--mode=idle"}, ""},
		{"h2c in storm", []string{"--proto=h2c", "--mode=storm"}, ""},
		{"h2 with https", []string{"--proto=h2", "--url=https://127.0.0.1:8443", "--insecure"}, ""},
		{"h2 with a CA file", []string{"--proto=h2", "--url=https://localhost:8443", "--ca-file=ca.pem"}, ""},
		{"one stream per connection", []string{"--proto=h2c", "--streams-per-conn=1"}, ""},
		{"unknown proto", []string{"--proto=h3"}, "--proto"},
		{"h2 with http", []string{"--proto=h2", "--url=http://127.0.0.1:8080"}, "want https"},
		{"h1 with https", []string{"--url=https://127.0.0.1:8443"}, "TLS needs --proto=h2"},
		{"h2c with https", []string{"--proto=h2c", "--url=https://127.0.0.1:8443"}, "TLS needs --proto=h2"},
		{"h2 to a remote gateway", []string{"--proto=h2", "--url=https://10.0.0.1:443"}, "loopback"},
		{"admin port stays http", []string{"--proto=h2", "--url=https://127.0.0.1:8443", "--admin-url=https://127.0.0.1:9090"}, "want http"},
		{"slow is h1 only", []string{"--proto=h2c", "--mode=slow"}, "HTTP/1.1 only"},
		{"resume is h1 only", []string{"--proto=h2", "--url=https://127.0.0.1:8443", "--mode=resume"}, "HTTP/1.1 only"},
		{"zero streams per connection", []string{"--proto=h2c", "--streams-per-conn=0"}, "--streams-per-conn"},
		{"too many streams per connection", []string{"--proto=h2c", "--streams-per-conn=1001"}, "--streams-per-conn"},
		{"insecure without TLS", []string{"--proto=h2c", "--insecure"}, "--insecure"},
		{"CA file with h1", []string{"--ca-file=ca.pem"}, "--ca-file"},
		{"insecure and a CA file", []string{"--proto=h2", "--url=https://127.0.0.1:8443", "--insecure", "--ca-file=ca.pem"}, "one or the other"},
		{"heap profile in idle", []string{"--mode=idle", "--gateway-heap-profile=heap.pprof"}, ""},
		{"heap profile in steady", []string{"--gateway-heap-profile=heap.pprof"}, "idle mode only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args, env, io.Discard)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parseConfig(%v) = %v", tc.args, err)
				}
				if c.StreamsPerConn < 1 || c.Proto == "" {
					t.Fatalf("config = %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parseConfig(%v) = %v, want an error containing %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

func TestClientTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused on purpose
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		proto    string
		insecure bool
		caFile   string
		wantNil  bool
		wantErr  bool
		verifies bool // the config accepts the test server's certificate
	}{
		{"h1 has no TLS", protoH1, false, "", true, false, false},
		{"h2c has no TLS", protoH2C, false, "", true, false, false},
		{"system roots refuse a self-signed certificate", protoH2, false, "", false, false, false},
		{"insecure accepts it", protoH2, true, "", false, false, true},
		{"the certificate as its own CA", protoH2, false, caFile, false, false, true},
		{"missing CA file", protoH2, false, filepath.Join(dir, "missing.pem"), false, true, false},
		{"CA file without a certificate", protoH2, false, notPEM, false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := clientTLS(tc.proto, tc.insecure, tc.caFile)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if (c == nil) != tc.wantNil {
				t.Fatalf("config = %v, want nil: %v", c, tc.wantNil)
			}
			if c == nil {
				return
			}
			conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), c)
			if err == nil {
				_ = conn.Close()
			}
			if (err == nil) != tc.verifies {
				t.Fatalf("handshake: %v, want it to succeed: %v", err, tc.verifies)
			}
		})
	}
}

// sseServer is an in-process gateway stand-in: each stream gets the opening block and then frames records
// of one partition, offsets 101 to 100+frames, and stays open. It records each request's protocol and
// connection.
type sseServer struct {
	frames int
	stop   chan struct{} // closed at the end of the test: every stream ends

	mu     sync.Mutex
	protos map[string]int // request protocol -> streams
	conns  map[string]int // remote address (one per connection) -> streams
	dialed atomic.Int64   // connections accepted
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.protos[r.Proto]++
	s.conns[r.RemoteAddr]++
	s.mu.Unlock()
	if r.ProtoMajor != 2 {
		http.Error(w, "HTTP/2 only", http.StatusHTTPVersionNotSupported)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	_, _ = io.WriteString(w, "retry: 1000\nid: v1:0-100\n\n")
	_ = rc.Flush()
	for i := 1; i <= s.frames; i++ {
		_, _ = fmt.Fprintf(w, "id: v1:0-%d\ndata: %s\n\n", 100+i, makeValue(time.Now().UnixNano(), int64(i), 200))
		_ = rc.Flush()
	}
	select {
	case <-r.Context().Done():
	case <-s.stop:
	}
}

// newSSEServer returns an unstarted server of s, closed at the end of the test.
func newSSEServer(t *testing.T, frames int) (*sseServer, *httptest.Server) {
	s := &sseServer{frames: frames, stop: make(chan struct{}), protos: map[string]int{}, conns: map[string]int{}}
	srv := httptest.NewUnstartedServer(s)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes of TestH2WrongProtocol
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(s.stop) }) // first: Close waits for the handlers
	return s, srv
}

// TestH2StreamsShareConnections runs connect against an in-process HTTP/2 server (TLS with ALPN, and
// cleartext with prior knowledge): streams must share connections streams-per-conn at a time, every request
// must be HTTP/2, and every frame must go through the same checks as over HTTP/1.1 (ids, counters,
// latency).
func TestH2StreamsShareConnections(t *testing.T) {
	tests := []struct {
		proto            string
		streams, perConn int
		wantConns        int
	}{
		{protoH2, 10, 10, 1},
		{protoH2, 10, 4, 3},
		{protoH2C, 10, 10, 1},
		{protoH2C, 9, 3, 3},
		{protoH2C, 3, 1, 3},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d_streams/%d_per_conn", tc.proto, tc.streams, tc.perConn), func(t *testing.T) {
			const frames = 20
			s, srv := newSSEServer(t, frames)
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					s.dialed.Add(1)
				}
			}
			r := &runner{
				cfg: config{
					Mode: modeSteady, ConnectPar: 64, Proto: tc.proto, StreamsPerConn: tc.perConn,
					URLs: []string{""},
				},
				connectBase: 10 * time.Second,
			}
			if tc.proto == protoH2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
				r.tls = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, MinVersion: tls.VersionTLS12}
			} else {
				srv.Config.Protocols = new(http.Protocols)
				srv.Config.Protocols.SetHTTP1(true)
				srv.Config.Protocols.SetUnencryptedHTTP2(true)
				srv.Start()
			}
			r.cfg.URLs[0] = srv.URL
			for i := range tc.streams {
				r.clients = append(r.clients, &client{n: i})
			}
			var h histogram
			r.sh.hist.Store(&h)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			g, opened, err := r.connect(ctx, func(int) connOpts {
				return connOpts{url: srv.URL + "/streams/t", measure: true}
			}, noDelay, 0)
			if err != nil {
				t.Fatal(err)
			}
			if opened != tc.streams {
				g.stop()
				t.Fatalf("opened = %d, want %d", opened, tc.streams)
			}
			want := int64(tc.streams * frames)
			for r.sh.frames.Load() < want && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			g.stop()
			if err := ctx.Err(); err != nil {
				t.Fatalf("%d of %d frames received: %v", r.sh.frames.Load(), want, err)
			}

			if n := r.h2Dials.Load(); n != int64(tc.wantConns) {
				t.Errorf("the tool dialed %d connections, want %d", n, tc.wantConns)
			}
			if n := s.dialed.Load(); n != int64(tc.wantConns) {
				t.Errorf("the server accepted %d connections, want %d", n, tc.wantConns)
			}
			s.mu.Lock()
			if s.protos["HTTP/2.0"] != tc.streams || len(s.protos) != 1 {
				t.Errorf("request protocols = %v, want %d HTTP/2.0", s.protos, tc.streams)
			}
			if len(s.conns) != tc.wantConns {
				t.Errorf("streams came on %d connections, want %d: %v", len(s.conns), tc.wantConns, s.conns)
			}
			for addr, n := range s.conns {
				if n > tc.perConn {
					t.Errorf("connection %s carried %d streams, want at most %d", addr, n, tc.perConn)
				}
			}
			s.mu.Unlock()
			if n := r.sh.connErrs.Load(); n != 0 {
				t.Errorf("connErrs = %d", n)
			}
			for _, c := range r.clients {
				if c.err != nil {
					t.Errorf("client %d: %v", c.n, c.err)
				}
				c.tr.finish([]int64{100 + frames})
				if n := c.tr.counts(); n.Delivered != frames || n.Lost != 0 || n.Dup != 0 || n.BadIDs != 0 {
					t.Errorf("client %d: counts = %+v, want %d delivered and nothing else", c.n, n, frames)
				}
			}
			if h.Count() != want {
				t.Errorf("latencies recorded = %d, want %d", h.Count(), want)
			}
			if b := r.sh.bodyBytes.Load(); b <= 0 {
				t.Errorf("body bytes = %d", b)
			}
		})
	}
}

// TestH2WrongProtocol: a cleartext HTTP/1.1-only server does not speak h2c, and a TLS server without HTTP/2
// does not offer it by ALPN: the streams fail, with the reason, rather than fall back to HTTP/1.1.
func TestH2WrongProtocol(t *testing.T) {
	for _, proto := range []string{protoH2C, protoH2} {
		t.Run(proto, func(t *testing.T) {
			_, srv := newSSEServer(t, 0)
			r := &runner{cfg: config{Mode: modeSteady, ConnectPar: 4, Proto: proto, StreamsPerConn: 10}, connectBase: 5 * time.Second}
			if proto == protoH2 {
				// HTTP/1.1 only: EnableHTTP2 is not set.
				srv.StartTLS()
				r.tls = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // a test server
			} else {
				srv.Start()
			}
			r.clients = []*client{{n: 0}, {n: 1}}
			g, opened, err := r.connect(context.Background(), func(int) connOpts {
				return connOpts{url: srv.URL + "/streams/t"}
			}, noDelay, 0)
			if err == nil {
				g.stop()
			}
			if opened != 0 {
				t.Fatalf("opened = %d, want 0", opened)
			}
			if r.sh.connErrs.Load() != 2 {
				t.Fatalf("connErrs = %d, want 2 (err %v)", r.sh.connErrs.Load(), err)
			}
			for _, c := range r.clients {
				if c.err == nil || errors.Is(c.err, context.Canceled) {
					t.Fatalf("client %d: err = %v, want the protocol failure", c.n, c.err)
				}
			}
			t.Logf("%s against an HTTP/1.1 server: %v", proto, r.clients[0].err)
		})
	}
}
