//go:build linux

package app

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestReusePortTakeOver: on a port shared with listen-reuse-port, a process that joins leaves every new
// connection with the one that was there, takes them all once it takes over, and keeps them when the older
// closes; a third that joins then is again left out until it takes over.
func TestReusePortTakeOver(t *testing.T) {
	older, _, err := listenReusePort("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := older.Addr().String()
	newer, takeOver, err := listenReusePort(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = newer.Close() })
	var nOlder, nNewer, nThird atomic.Int64
	go countAccepts(older, &nOlder)
	go countAccepts(newer, &nNewer)

	dialN(t, addr, 20, &nOlder, &nNewer)
	if nNewer.Load() != 0 {
		t.Fatalf("before taking over, the newer listener got %d of 20 connections", nNewer.Load())
	}
	if err := takeOver(); err != nil {
		t.Fatal(err)
	}
	dialN(t, addr, 20, &nOlder, &nNewer)
	if nOlder.Load() != 20 {
		t.Fatalf("after the newer took over, the older got %d more connections", nOlder.Load()-20)
	}
	_ = older.Close()
	dialN(t, addr, 20, &nNewer)
	if nNewer.Load() != 40 {
		t.Fatalf("after the older closed, the newer has %d connections, want 40", nNewer.Load())
	}

	third, takeOverThird, err := listenReusePort(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = third.Close() })
	go countAccepts(third, &nThird)
	dialN(t, addr, 20, &nNewer, &nThird)
	if nThird.Load() != 0 {
		t.Fatalf("before taking over, the third listener got %d of 20 connections", nThird.Load())
	}
	if err := takeOverThird(); err != nil {
		t.Fatal(err)
	}
	dialN(t, addr, 20, &nNewer, &nThird)
	if nThird.Load() != 20 {
		t.Fatalf("after taking over, the third listener got %d of 20 connections", nThird.Load())
	}
}

// countAccepts accepts connections on ln until it is closed, counting them in n.
func countAccepts(ln net.Listener, n *atomic.Int64) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		n.Add(1)
		_ = c.Close()
	}
}

// dialN connects to addr n times, one after the other, and waits until the counters add up to n more.
func dialN(t *testing.T, addr string, n int, counters ...*atomic.Int64) {
	t.Helper()
	sum := func() (s int64) {
		for _, c := range counters {
			s += c.Load()
		}
		return s
	}
	want := sum() + int64(n)
	var d net.Dialer
	for range n {
		c, err := d.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	kafkatest.WaitFor(t, 5*time.Second, "every connection to be accepted", func() bool { return sum() == want })
}
