package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// options are the floor's settings.
type options struct {
	writers    int           // writer goroutines; connection i is written by writer i mod writers
	rate       float64       // records per second, more than 0
	valueBytes int           // bytes of each record's value
	drain      time.Duration // after the stop, how long the writers get to write what they hold before every connection is closed
}

// stats is what one serve did.
type stats struct {
	Last    int64 // the last record published; every connection open at the stop was written every record up to it
	Conns   int64 // connections that were written their head
	Frames  int64 // frames written, summed over connections
	Dropped int64 // connections dropped because a write to them failed
}

// The head every stream gets, written in one piece with its opening block as the gateway does: no
// Content-Length and no chunked encoding, so the body is everything until the connection closes.
const head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n" +
	"retry: 3000\n"

// notAllowed answers a request that is not a GET.
const notAllowed = "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

// handshakeTimeout bounds the reading of a request, so that a client that never sends one does not hold
// its handshake goroutine for ever.
const handshakeTimeout = 10 * time.Second

// appendOpening appends the head and the opening block of a stream whose first frame will be record last+1:
// an id-only block at record last, which the client takes as its starting position.
func appendOpening(b []byte, last int64) []byte {
	b = append(b, head...)
	b = append(b, "id: v1:0-"...)
	b = strconv.AppendInt(b, last, 10)
	return append(b, "\n\n"...)
}

// appendFrame appends record n's frame: its id (partition 0, offset n, as the gateway spells a one-partition
// position) and a value of valueBytes bytes sent at ts (unix nanoseconds).
func appendFrame(b []byte, n, ts int64, valueBytes int) []byte {
	b = append(b, "id: v1:0-"...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, "\ndata: "...)
	b = appendValue(b, ts, n, valueBytes)
	return append(b, "\n\n"...)
}

// appendValue appends the value the load tool produces to Kafka, {"ts":<unix nanos>,"seq":<n>,"pad":"xx..."}
// padded to size bytes (longer when size is below its fixed part), so that its readers parse and time the
// floor's frames exactly as they do the gateway's.
func appendValue(b []byte, ts, seq int64, size int) []byte {
	start := len(b)
	b = append(b, `{"ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"pad":"`...)
	for len(b)-start < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// record is one published record: its number and its frame, shared read-only by every writer.
type record struct {
	n     int64
	frame []byte
}

// writer writes every record to its connections, one write per frame per connection, in one goroutine. It
// takes a new connection (pending) at the next record, writing its head and opening block first, so that
// the connection's first frame is the one after its opening id.
type writer struct {
	in chan record

	mu      sync.Mutex
	pending []net.Conn // handed over by handshakes, not yet written to
	closed  bool       // the writer has ended: a connection handed over now is closed

	// The writer goroutine's own; read after it has been joined.
	conns   []net.Conn
	spare   []net.Conn // the other half of pending's double buffer
	buf     []byte
	opened  int64
	frames  int64
	dropped int64
}

// add hands c over to the writer, or reports false when the writer has ended.
func (w *writer) add(c net.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.pending = append(w.pending, c)
	return true
}

// run writes every record that comes in, until in is closed; then it closes its connections.
func (w *writer) run(s *server) {
	for rec := range w.in {
		w.adopt(s, rec.n)
		for i := 0; i < len(w.conns); {
			if _, err := w.conns[i].Write(rec.frame); err != nil {
				w.drop(s, i)
				continue
			}
			i++
		}
		w.frames += int64(len(w.conns))
	}
	w.mu.Lock()
	w.closed = true
	pending := w.pending
	w.pending = nil
	w.mu.Unlock()
	for _, c := range pending {
		s.forget(c)
	}
	for _, c := range w.conns {
		s.forget(c)
	}
}

// adopt writes the head and opening block to the connections handed over since the last record, whose first
// frame will be record n, and adds them to the writer's.
func (w *writer) adopt(s *server, n int64) {
	w.mu.Lock()
	if len(w.pending) == 0 {
		w.mu.Unlock()
		return
	}
	p := w.pending
	w.pending = w.spare[:0]
	w.mu.Unlock()
	for _, c := range p {
		w.buf = appendOpening(w.buf[:0], n-1)
		if _, err := c.Write(w.buf); err != nil {
			w.dropped++
			s.forget(c)
			continue
		}
		w.conns = append(w.conns, c)
		w.opened++
	}
	clear(p)
	w.spare = p[:0]
}

// drop closes connection i, whose write failed, and takes it out of the writer's (the order of the others
// does not matter).
func (w *writer) drop(s *server, i int) {
	s.forget(w.conns[i])
	last := len(w.conns) - 1
	w.conns[i] = w.conns[last]
	w.conns[last] = nil
	w.conns = w.conns[:last]
	w.dropped++
}

// server is one serve's state.
type server struct {
	o       options
	writers []*writer
	next    atomic.Uint64 // the writer of the next connection, mod len(writers)
	hs      sync.WaitGroup

	mu  sync.Mutex
	all map[net.Conn]struct{} // every open connection, to be closed on a forced stop
}

// track adds c to the open connections.
func (s *server) track(c net.Conn) {
	s.mu.Lock()
	s.all[c] = struct{}{}
	s.mu.Unlock()
}

// forget closes c and takes it out of the open connections.
func (s *server) forget(c net.Conn) {
	_ = c.Close()
	s.mu.Lock()
	delete(s.all, c)
	s.mu.Unlock()
}

// each calls f for every open connection.
func (s *server) each(f func(net.Conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.all {
		f(c)
	}
}

// accept takes connections until ln is closed, each read by a handshake goroutine that ends once the
// connection is handed over to its writer.
func (s *server) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors or the like: the next accept may do better.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.track(c)
		w := s.writers[int((s.next.Add(1)-1)%uint64(len(s.writers)))]
		s.hs.Go(func() { s.handshake(c, w) })
	}
}

// handshake reads c's request and hands c over to w, or answers 405 to anything but a GET. Any path is
// served: the floor has one stream.
func (s *server) handshake(c net.Conn, w *writer) {
	_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	req, err := http.ReadRequest(bufio.NewReaderSize(c, 4096))
	if err != nil {
		s.forget(c)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if req.Method != http.MethodGet {
		_, _ = c.Write([]byte(notAllowed))
		s.forget(c)
		return
	}
	if !w.add(c) {
		s.forget(c)
	}
}

// clock publishes record 1, 2, ... at o.rate, record n at (n-1)/rate seconds from the start, to every
// writer, until ctx ends, and returns the last record it published. Behind time (a writer that cannot keep
// up fills its queue) it publishes the records that are due without waiting. Every writer gets every record:
// a record being handed out when ctx ends still goes to all of them.
func (s *server) clock(ctx context.Context) int64 {
	start := time.Now()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var n int64
	for {
		due := start.Add(time.Duration(float64(n) * float64(time.Second) / s.o.rate))
		if d := time.Until(due); d > 0 {
			t.Reset(d)
			select {
			case <-ctx.Done():
				return n
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return n
		}
		n++
		rec := record{n: n, frame: appendFrame(nil, n, time.Now().UnixNano(), s.o.valueBytes)}
		for _, w := range s.writers {
			w.in <- rec
		}
	}
}

// validate checks o.
func (o options) validate() error {
	switch {
	case o.writers < 1:
		return errors.New("writers: want at least 1")
	case !(o.rate > 0):
		return errors.New("rate: want more than 0 records per second")
	case o.valueBytes < 0 || o.valueBytes > 1<<20:
		return errors.New("value bytes: want 0 to 1MiB")
	case o.drain <= 0:
		return errors.New("drain: want more than 0")
	}
	return nil
}

// serve runs the floor on ln until ctx ends: it answers each GET with an event stream's head and writes
// every record to every connection, one write system call per frame, from o.writers goroutines. Then it
// stops publishing, closes ln, lets the writers write what they hold (for up to o.drain, after which every
// connection is closed, which ends a write to a client that stopped reading) and closes the connections, so
// that a client reads every record up to stats.Last and then the end of its stream.
func serve(ctx context.Context, ln net.Listener, o options) (stats, error) {
	if err := o.validate(); err != nil {
		return stats{}, err
	}
	s := &server{o: o, all: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	for range o.writers {
		w := &writer{in: make(chan record, 64)}
		s.writers = append(s.writers, w)
		wg.Go(func() { w.run(s) })
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		s.accept(ln)
	}()
	published := make(chan int64, 1)
	go func() { published <- s.clock(ctx) }()

	<-ctx.Done()
	_ = ln.Close()
	<-accepted
	// A handshake still reading its request gives up at once; the writers do not read.
	s.each(func(c net.Conn) { _ = c.SetReadDeadline(time.Now()) })
	s.hs.Wait()
	deadline := time.NewTimer(o.drain)
	defer deadline.Stop()
	forced := false
	force := func() {
		if !forced {
			forced = true
			s.each(func(c net.Conn) { _ = c.Close() })
		}
	}
	var last int64
	select {
	case last = <-published:
	case <-deadline.C:
		force()
		last = <-published
	}
	for _, w := range s.writers {
		close(w.in)
	}
	joined := make(chan struct{})
	go func() {
		wg.Wait()
		close(joined)
	}()
	select {
	case <-joined:
	case <-deadline.C:
		force()
		<-joined
	}
	st := stats{Last: last}
	for _, w := range s.writers {
		st.Conns += w.opened
		st.Frames += w.frames
		st.Dropped += w.dropped
	}
	if forced {
		return st, fmt.Errorf("the writers did not finish within %v of the stop: connections closed", o.drain)
	}
	return st, nil
}
