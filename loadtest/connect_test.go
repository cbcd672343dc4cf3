package main

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestConnectTimeoutCountsOnlyFailures runs connect against a gateway that accepts connections and never
// answers: connect must give up, report that nothing failed on its own (every stream was still opening and
// was cut off by connect's cancel), and not dial the streams still waiting for their turn once it has given
// up.
func TestConnectTimeoutCountsOnlyFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					_ = c.Close()
				}
				return
			}
			accepted.Add(1)
			held = append(held, c) // never answered
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})

	const conns, par = 20, 2
	r := &runner{
		cfg:         config{Mode: modeSteady, ConnectPar: par, PerSource: 0},
		connectBase: 200 * time.Millisecond,
	}
	for i := range conns {
		r.clients = append(r.clients, &client{n: i})
	}
	url := "http://" + ln.Addr().String() + "/streams/t"
	g, opened, err := r.connect(context.Background(), func(int) connOpts { return connOpts{url: url} }, noDelay, 0)
	if err == nil {
		g.stop()
		t.Fatal("connect succeeded against a gateway that never answers")
	}
	if opened != 0 {
		t.Fatalf("opened = %d, want 0", opened)
	}
	if !strings.Contains(err.Error(), "(0 failed,") {
		t.Fatalf("connect counted its own cancel as failures: %v", err)
	}
	if n := r.sh.connErrs.Load(); n != 0 {
		t.Fatalf("connErrs = %d, want 0", n)
	}
	for _, c := range r.clients {
		if c.err != nil {
			t.Fatalf("client %d: err = %v, want nil (cut off by connect's cancel)", c.n, c.err)
		}
	}
	if n := accepted.Load(); n > par {
		t.Fatalf("%d connections reached the gateway, want at most %d (the ones whose turn had come)", n, par)
	}
}
