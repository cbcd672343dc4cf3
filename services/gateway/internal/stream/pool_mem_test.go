package stream

import (
	"net"
	"net/http"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// TestParkedConnKeepsNoContext: a parked connection keeps no context (a context, its channel and its entry
// among the pool context's children were a quarter of a parked connection's heap), and still gets its frames.
func TestParkedConnKeepsNoContext(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{Heartbeat: time.Hour}).start(t)
	cl := dialOpen(t, ps.hs.URL)
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	ps.srv.pool.mu.Lock()
	var c *conn
	for pc := range ps.srv.pool.conns {
		c = pc
	}
	ps.srv.pool.mu.Unlock()
	c.lifeMu.Lock()
	kept := c.cancel != nil
	c.lifeMu.Unlock()
	if kept {
		t.Error("a parked connection keeps the context of its last run")
	}
	f.publish("one")
	if ev, err := cl.p.Next(); err != nil || ev.Data != "one" {
		t.Fatalf("got %+v, %v; want the frame", ev, err)
	}
}

// TestPeerLeftWhileParking: a peer that leaves as its stream parks (the hang-up is seen before the writer owns
// the connection, so it cannot be handed to the writer) ends the stream when the writer adopts it, not at the
// next probe.
func TestPeerLeftWhileParking(t *testing.T) {
	rg, _ := ring.New(1<<20, 0)
	srv := NewServer(Config{Writers: 1, Logger: discardLog})
	defer srv.Close()
	st := new(Stats)
	topic := &Topic{Ring: rg}
	a, b := net.Pipe()
	defer func() { _ = b.Close() }()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = devnull.Close() }()
	rc, err := devnull.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := rg.Start(nil)
	st.Open.Add(1)
	c := &conn{s: srv, t: topic, stats: st, pool: srv.pool, raw: &rawSink{nc: a, rc: rc}, synced: true, cursor: cur, fd: -1}
	srv.pool.mu.Lock()
	srv.pool.conns[c] = struct{}{}
	srv.pool.mu.Unlock()
	c.peerLeft() // on its own goroutine still: no writer to tell
	srv.pool.park(c)
	waitUntil(t, "the stream to end", func() bool { return st.Closed[ReasonClientGone].Load() == 1 })
	if n := st.Parked.Load(); n != 0 {
		t.Errorf("Parked = %d, want 0", n)
	}
}

// BenchmarkParkedConnMemory measures what an idle stream parked in the writer pool keeps on the heap: n
// streams are opened over real loopback TCP through net/http and Server.Serve, as the gateway serves them,
// and once all are parked the live heap is compared with the heap before them. The clients are bare
// sockets (no Go objects), so the figures are the server's side alone: heap-B/conn is the live heap per
// parked connection after a collection, objects/conn the heap objects. What the app adds on top (its
// limits' lease, its metrics) and what the process keeps beyond the live heap are in the load tool's idle
// mode (docs/benchmarks.md). The time per op means nothing here.
func BenchmarkParkedConnMemory(b *testing.B) {
	const n = 2000
	rg, _ := ring.New(1<<20, 0)
	topic := &Topic{Ring: rg}
	srv := NewServer(Config{Writers: 2, Logger: discardLog})
	st := new(Stats)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.Serve(w, r, topic, Params{Heartbeat: 15 * time.Second, OnEnd: func(CloseReason) {}}, st)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer func() { _ = hs.Close(); srv.Close() }()
	addr := ln.Addr().(*net.TCPAddr)
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	req := []byte("GET /streams/t HTTP/1.1\r\nHost: gateway\r\nAccept: text/event-stream\r\n\r\n")

	// A first round grows what the runtime and net/http keep of a burst of connections for good (goroutine
	// descriptors, the server's connection set), so that the rounds measured see the streams alone.
	closeAll(b, st, openParked(b, sa, req, st, n))
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		fds := openParked(b, sa, req, st, n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/conn")
		b.ReportMetric(float64(after.HeapObjects-before.HeapObjects)/n, "objects/conn")
		closeAll(b, st, fds)
	}
}

// openParked opens n streams from bare sockets and waits until all are parked.
func openParked(b *testing.B, sa *syscall.SockaddrInet4, req []byte, st *Stats, n int) []int {
	b.Helper()
	fds := make([]int, 0, n)
	for range n {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err != nil {
			b.Fatal(err)
		}
		fds = append(fds, fd)
		if err := syscall.Connect(fd, sa); err != nil {
			b.Fatal(err)
		}
		if _, err := syscall.Write(fd, req); err != nil {
			b.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); st.Parked.Load() != int64(n); {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d streams parked", st.Parked.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	return fds
}

// closeAll closes the clients' sockets and waits until their streams ended.
func closeAll(b *testing.B, st *Stats, fds []int) {
	b.Helper()
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
	for deadline := time.Now().Add(30 * time.Second); st.Open.Load() != 0; {
		if time.Now().After(deadline) {
			b.Fatalf("%d streams still open", st.Open.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
