package stream

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPendingBytesBound: clients that stop reading cannot make the pod hold more than PendingBytes of
// unfinished writes for them (the copies a writer hands off, the frames a blocked write keeps): once they reach
// the bound, the next write that would pass it ends its stream at once (write_failed, long before its write
// timeout), while a client that reads gets every frame.
func TestPendingBytesBound(t *testing.T) {
	const bound = 4 << 10 // less than what a write a full socket cuts short leaves, for most of them
	f := newFeeder(t, 64<<20)
	ps := startPool(t, Config{WriteTimeout: time.Minute, PendingBytes: bound}, &Topic{Ring: f.rg}, Params{}).start(t)
	const slowClients = 12
	for range slowClients {
		nc, err := net.Dial("tcp", ps.hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		_ = nc.(*net.TCPConn).SetReadBuffer(4 << 10)
		if _, err := io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	fast := dialOpen(t, ps.hs.URL)
	waitUntil(t, "every connection parked", func() bool { return ps.st.Parked.Load() == slowClients+1 })

	var peak atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if n := ps.srv.PendingBytes(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	data := strings.Repeat("y", 16<<10)
	const n = 1000 // 16 MB: far more than a socket that is not read holds
	for range n / 10 {
		f.publish(data, data, data, data, data, data, data, data, data, data)
		for range 10 {
			if ev, err := fast.p.Next(); err != nil || len(ev.Data) != len(data) {
				t.Fatalf("the reading client: %d bytes, %v", len(ev.Data), err)
			}
		}
	}
	waitUntil(t, "the clients that do not read to be cut", func() bool {
		return ps.st.Closed[ReasonWriteFailed].Load() > 0
	})
	close(stop)
	<-watched
	if p := peak.Load(); p > bound {
		t.Errorf("the pool held %d bytes for slow connections, more than its bound of %d", p, bound)
	}
}
