package stream

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// The writer pool serves HTTP/1.1 streams without a goroutine each. Once a stream's response head is due,
// its connection is taken over from net/http (http.Hijacker) and the stream runs on the request's goroutine
// until it has caught up with the ring; then the connection is parked: handed to one of a few writer
// goroutines and the request's goroutine ends. A parked connection is a conn struct and a socket, nothing
// more: no goroutine stack, no net/http buffers.
//
// A watcher goroutine per ring waits for publishes and tells the writers; each writer then writes, to each of
// its connections on that ring, the frames it has not had, as one chunk with one non-blocking write (the same
// chunk bytes for every connection at the same cursor, built once). A socket that does not take everything at
// once, a connection that fell behind the ring, and the end of a connection leave the writer: the connection
// gets a goroutine again (conn.resume) that writes under the ordinary write timeout and catches up, and
// parks again once it is idle. So one slow client never holds a writer. Heartbeats, the drain and the token's
// moments (its notice and its end, see deliver.go) are timers in a heap per writer; a heartbeat first looks whether the peer closed the connection, so a client that left
// is noticed within a heartbeat.

// probeEvery is how often a writer looks whether the peer of a parked connection closed it, when the stream's
// heartbeats (which look too) are further apart or off: a client that left an idle stream is noticed without
// waiting for a write to fail.
// A variable for tests.
var probeEvery = int64(30 * time.Second)

// monoBase anchors monoNow.
var monoBase = time.Now()

// monoNow is the time for heartbeat, probe and drain moments: nanoseconds on the monotonic clock, which a
// wall-clock step does not move.
func monoNow() int64 { return int64(time.Since(monoBase)) }

type pool struct {
	s       *Server
	writers []*writer
	next    atomic.Uint32 // round robin over writers
	linger  time.Duration

	ctx    context.Context
	cancel context.CancelFunc

	hang *hangups // nil where peers that leave are noticed by probes alone

	mu       sync.Mutex
	watched  map[*ring.Ring]bool
	conns    map[*conn]struct{} // every taken-over connection, parked or not
	drained  chan struct{}      // closed when conns is empty after close began; nil before
	closing  bool
	watchers sync.WaitGroup
}

func newPool(s *Server, writers int, linger time.Duration) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	pl := &pool{
		s: s, linger: linger, ctx: ctx, cancel: cancel,
		watched: map[*ring.Ring]bool{}, conns: map[*conn]struct{}{}, hang: newHangups(),
	}
	for range writers {
		w := &writer{pool: pl, kick: make(chan struct{}, 1), rings: map[*ring.Ring][]*conn{}, io: newRawIO()}
		pl.writers = append(pl.writers, w)
		pl.watchers.Go(w.run)
	}
	return pl
}

// serve runs a stream on a connection taken over from net/http, on the caller's goroutine until the stream
// ends or parks.
func (pl *pool) serve(c *conn, nc net.Conn, head []byte, p Params) CloseReason {
	_ = nc.SetDeadline(time.Time{})
	c.pool = pl
	c.raw = &rawSink{nc: nc, head: head}
	c.out = c.raw
	c.fd = -1
	if canWriteNow {
		if rc, fd, ok := rawConn(nc); ok {
			c.raw.rc, c.fd = rc, fd
		}
	}
	pl.mu.Lock()
	closing := pl.closing
	if !closing {
		pl.conns[c] = struct{}{}
	}
	pl.mu.Unlock()
	if closing {
		_ = nc.Close()
		c.end(ReasonShutdown)
		return ReasonShutdown
	}
	if c.raw.rc != nil {
		pl.hang.add(c)
	}
	reason := c.run(c.runContext(), p)
	if reason == parked {
		return reason
	}
	c.end(reason)
	return reason
}

// park hands an idle, caught-up connection to a writer. The caller must not touch c afterwards.
func (pl *pool) park(c *conn) {
	pl.watch(c.t.Ring)
	c.dropContext()
	// A parked connection keeps no buffers: a filtered stream's writer lends it its own while it writes
	// (writer.serve), and an unfiltered one writes the ring's frames as they are.
	c.buf, c.idBuf = nil, nil
	if !pl.detach(c) {
		c.end(ReasonShutdown)
		return
	}
	w := pl.writers[pl.next.Add(1)%uint32(len(pl.writers))]
	w.mu.Lock()
	closed := w.closed
	if !closed {
		c.owner.Store(w) // with the inbox, under w.mu: a hang-up seen from now on finds c adopted (writer.hangup)
		w.inbox = append(w.inbox, c)
	}
	w.mu.Unlock()
	if closed {
		c.end(ReasonShutdown) // the pool is closing: no writer takes it any more
		return
	}
	w.wake()
}

// A parked connection keeps no net.Conn: net's wrapper (its descriptor struct, both addresses, its entry in
// the runtime's poller: about 550 bytes, more than half of what a parked connection would keep) is dropped
// at park for a duplicate of the descriptor, which the writers write to directly (non-blocking, as net set
// the socket), and made again when the connection needs a goroutine of its own (a full socket, a catch-up):
// two system calls each way.

// detach drops net's wrapper of a parking connection and keeps a duplicate of its descriptor in c.fd. It
// reports false when the descriptor cannot be duplicated (out of descriptors): the stream ends.
func (pl *pool) detach(c *conn) bool {
	fd, err := dupConn(c.raw.rc)
	if err != nil {
		return false
	}
	pl.hang.rebind(c, fd) // before the old descriptor closes: its number may be reused at once
	pl.mu.Lock()
	nc := c.raw.nc
	c.raw.nc, c.raw.rc = nil, nil
	pl.mu.Unlock()
	_ = nc.Close()
	return true
}

// attach makes net's wrapper again for a connection a writer let go of, and closes the duplicate it kept. It
// fails when the pool is closing or net refuses the descriptor; c.fd is then still the connection's.
func (pl *pool) attach(c *conn) error {
	nc, err := fdConn(c.fd)
	if err != nil {
		return err // c.fd is still the connection's: the stream's end closes it
	}
	rc, fd, ok := rawConn(nc)
	if !ok {
		_ = nc.Close()
		return errors.New("stream: a connection made from a descriptor offers no raw access")
	}
	old := c.fd
	pl.hang.rebind(c, fd) // before the old descriptor closes: its number may be reused at once
	closeFD(old)
	pl.mu.Lock()
	closing := pl.closing
	c.raw.nc, c.raw.rc = nc, rc
	pl.mu.Unlock()
	if closing {
		return net.ErrClosed // the stream ends, which closes nc after the watcher let go of its descriptor
	}
	return nil
}

// rawConn returns nc's raw access and its descriptor, for writes without net (and parking); ok is false when
// nc offers none.
func rawConn(nc net.Conn) (rc syscall.RawConn, fd int32, ok bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, -1, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, -1, false
	}
	if err := rc.Control(func(d uintptr) { fd = int32(d) }); err != nil { //nolint:gosec // a file descriptor fits an int32
		return nil, -1, false
	}
	return rc, fd, true
}

// watch starts, once per ring, the goroutine that tells the writers about publishes.
func (pl *pool) watch(rg *ring.Ring) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.watched[rg] || pl.closing {
		return
	}
	pl.watched[rg] = true
	wake := rg.Wake() // taken now: whatever is published from here on is seen
	pl.watchers.Go(func() {
		var linger *time.Timer
		for {
			select {
			case <-wake:
			case <-pl.ctx.Done():
				return
			}
			wake = rg.Wake()
			if pl.linger > 0 {
				// Let more frames gather, so each connection gets them in fewer, larger writes.
				if linger == nil {
					linger = time.NewTimer(pl.linger)
				} else {
					linger.Reset(pl.linger)
				}
				select {
				case <-linger.C:
				case <-pl.ctx.Done():
					return
				}
			}
			for _, w := range pl.writers {
				w.mark(rg)
			}
		}
	})
}

// forget removes an ended connection.
func (pl *pool) forget(c *conn) {
	pl.mu.Lock()
	delete(pl.conns, c)
	if pl.drained != nil && len(pl.conns) == 0 {
		close(pl.drained)
		pl.drained = nil
	}
	pl.mu.Unlock()
}

// wait waits until every taken-over connection has ended, or ctx ends.
func (pl *pool) wait(ctx context.Context) error {
	pl.mu.Lock()
	if len(pl.conns) == 0 {
		pl.mu.Unlock()
		return nil
	}
	if pl.drained == nil {
		pl.drained = make(chan struct{})
	}
	ch := pl.drained
	pl.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends every taken-over connection now and stops the pool's goroutines.
func (pl *pool) close() {
	pl.mu.Lock()
	pl.closing = true
	for c := range pl.conns {
		if c.raw.nc != nil {
			_ = c.raw.nc.Close() // streams on their own goroutines fail their next write; writers end the others
		}
	}
	pl.mu.Unlock()
	pl.cancel()
	pl.watchers.Wait() // writers end their parked connections before they return
	_ = pl.wait(context.Background())
	pl.hang.close()
}

// peerLeft ends the stream of a connection whose peer left (see hangups); it runs on the hang-up watcher's
// goroutine. A stream on its own goroutine sees its context end; a parked one is ended by its writer.
func (c *conn) peerLeft() {
	c.lifeMu.Lock()
	c.gone = true
	cancel := c.cancel
	c.lifeMu.Unlock()
	if cancel != nil {
		cancel()
	}
	// A stream parking now sets its owner after this look: its writer finds gone set when it adopts it.
	if w := c.owner.Load(); w != nil {
		w.hangup(c)
	}
}

// A taken-over connection has a context only while it runs on a goroutine of its own (its start, and each
// resume after a writer let it go): the context, its channel and its place among the pool context's
// children are a quarter of what a parked connection would otherwise keep. What ends a parked connection
// reaches its writer instead: a peer that left through gone and writer.hangup, the pool's close through the
// writer's own end.

// runContext gives the connection the context of a run on its own goroutine, canceled already when the peer
// left.
func (c *conn) runContext() context.Context {
	ctx, cancel := context.WithCancel(c.pool.ctx)
	c.lifeMu.Lock()
	c.cancel = cancel
	gone := c.gone
	c.lifeMu.Unlock()
	if gone {
		cancel()
	}
	return ctx
}

// dropContext ends the context of the run that ends (the connection parks, or the stream ends).
func (c *conn) dropContext() {
	c.lifeMu.Lock()
	cancel := c.cancel
	c.cancel = nil
	c.lifeMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// prefetchContext returns the context of the block reads a resume prefetches (replay.Pool.Prefetch): they run
// on goroutines of their own and serve the read that follows, which does not wait for them, and the cache,
// so they must outlive the run that starts them (a stream that has what it needs parks, which ends its run's
// context) and end with the connection (end calls prefetchEnd), keeping ctx's values (its trace). Only a
// taken-over connection needs one: a request's context lives as long as its stream.
func (c *conn) prefetchContext(ctx context.Context) context.Context {
	if c.raw == nil {
		return ctx
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if prev := c.prefetchEnd; prev != nil {
		c.prefetchEnd = func() { prev(); cancel() }
	} else {
		c.prefetchEnd = cancel
	}
	return pctx
}

// peerGoneSeen says the hang-up watcher saw the peer leave.
func (c *conn) peerGoneSeen() bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	return c.gone
}
