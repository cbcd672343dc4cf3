package stream

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// BenchmarkPoolFanout measures the writer pool's side of fan-out: publish one 200-byte frame and wait until
// the writers have written it to every parked connection. Reported per published frame. The connections
// write to /dev/null (one file for all: a process cannot hold 10,000 socket pairs under the usual file
// limit), so the figure is the gateway's own work plus a cheap system call per connection, without the
// loopback TCP stack the load tool measures. Allocations must not grow with the number of subscribers.
func BenchmarkPoolFanout(b *testing.B) {
	for _, subs := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			rg, _ := ring.New(64<<20, 0)
			// With the delivery lag measured, as the gateway runs: every write looks whether it reached the
			// latest publish, and one per publish records it.
			obs := new(tallyObserver)
			srv := NewServer(Config{Writers: 2, Logger: discardLog, Observer: obs})
			defer srv.Close()
			st := new(Stats)
			var published atomic.Uint64
			topic := &Topic{Ring: rg, Newest: func() (uint64, int64) { return published.Load(), 1 }}
			parkDevNull(b, srv, topic, st, subs)

			frame := make([]byte, 200)
			var batch ring.Batch
			id := []byte("v1:0-123456.1-123456.2-123456")
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)) * int64(subs))
			want := int64(0)
			for i := 0; b.Loop(); i++ {
				batch.Reset()
				batch.Add(append(batch.Buf(), frame...), int32(i%3), int64(i), nil)
				published.Store(uint64(i + 1))
				rg.Publish(&batch, id)
				want += int64(subs)
				for st.Frames.Load() < want {
					runtime.Gosched()
				}
			}
			b.ReportMetric(float64(obs.delivered.Load())/float64(b.N), "lag-samples/op")
		})
	}
}

// parkDevNull parks n connections on srv's writer pool, reading topic from its head, whose writes all go to
// /dev/null (one file for all of them: a process cannot hold 10,000 socket pairs under the usual file limit).
func parkDevNull(tb testing.TB, srv *Server, topic *Topic, st *Stats, n int) {
	tb.Helper()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = devnull.Close() })
	rc, err := devnull.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	pipe, _ := net.Pipe() // a net.Conn to close at the end; the bytes go to rc
	for range n {
		cur, _ := topic.Ring.Start(nil)
		c := &conn{s: srv, t: topic, stats: st, pool: srv.pool, raw: &rawSink{nc: pipe, rc: rc}, synced: true, cursor: cur}
		srv.pool.mu.Lock()
		srv.pool.conns[c] = struct{}{}
		srv.pool.mu.Unlock()
		srv.pool.park(c)
	}
	for st.Parked.Load() != int64(n) {
		runtime.Gosched()
	}
}

// BenchmarkLoopbackWrite measures what this machine charges for one delivery at the least: one 230-byte
// write on a loopback TCP connection, read by a goroutine of the same process (as the load tool's readers
// read). cpu-ns/op is the process's user and system CPU per write, the writer's and the reader's side
// together; the kernel's receive path runs in the writer's system call on loopback. Every write to a parked
// connection costs at least this, which is what sets the floor of a fan-out on a given machine.
func BenchmarkLoopbackWrite(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 32<<10)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 230)
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	_ = c.Close()
	<-done
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
