package app

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHandOverSendsGoAway: at the drain, an HTTP/2 client is told to go away (its next request opens a new
// connection) while the stream it has open carries on, the port keeps answering, and Shutdown waits for the
// open stream to end before it returns and closes the port.
func TestHandOverSendsGoAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/where" {
			_, _ = fmt.Fprintln(w, r.RemoteAddr, r.Proto)
			return
		}
		rc := http.NewResponseController(w)
		for i := 0; ; i++ {
			if _, err := fmt.Fprintln(w, r.RemoteAddr, i); err != nil {
				return
			}
			_ = rc.Flush()
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	cfg := TLSConfig{H2C: true}
	cs := newClientServer(ln, false, func() *http.Server {
		srv := newServer(handler, headerTimeout)
		srv.Protocols = cfg.protocols()
		return srv
	})
	served := make(chan error, 1)
	go func() { served <- cs.Serve() }()

	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: p}, Timeout: 10 * time.Second}
	url := "http://" + ln.Addr().String()
	resp, err := client.Get(url + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the stream came over %s, want HTTP/2", resp.Proto)
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	streamConn := strings.Fields(first)[0]
	where := func() string {
		t.Helper()
		r, err := client.Get(url + "/where")
		if err != nil {
			t.Fatalf("the port after the handover: %v", err)
		}
		defer func() { _ = r.Body.Close() }()
		var addr, proto string
		if _, err := fmt.Fscan(r.Body, &addr, &proto); err != nil {
			t.Fatal(err)
		}
		return addr
	}
	if got := where(); got != streamConn {
		t.Fatalf("a second request before the handover came on %s, want the stream's connection %s", got, streamConn)
	}

	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs.handOver(sctx)
	// The GOAWAY is written by the old server's connection goroutine after handOver returns, and the client
	// reads it on its own: a request sent in between may still come on the old connection. So the test
	// waits a little for requests to move; without a handover they never do.
	for deadline := time.Now().Add(3 * time.Second); ; {
		got := where()
		if got != streamConn {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests after the handover still come on the stream's connection %s: no GOAWAY", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the open stream after the handover: %v", err)
		}
		if !strings.HasPrefix(line, streamConn+" ") {
			t.Fatalf("stream line %q", line)
		}
	}

	shut := make(chan error, 1)
	go func() { shut <- cs.Shutdown(sctx) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a stream was open", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		_ = c.Close()
		t.Error("the port still accepts connections after Shutdown")
	}
}
