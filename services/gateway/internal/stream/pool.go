package stream

import (
	"container/heap"
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

// maxWritesPerPass bounds the writes one connection gets in one pass of its writer before the others have
// their turn.
const maxWritesPerPass = 4

// A writer whose passes run back to back (new frames arrived while it wrote the last ones) is the bottleneck:
// each of its connections gets a write per pass whatever the rate, so its system calls, most of a write's
// cost, grow with its speed rather than with the traffic. Then it rests before the next pass for as long as
// the last pass took (at least minBusyPass, at most maxBusyRest): each connection gets the frames of twice the
// time in one write, half the writes for the same frames, at the cost of at most maxBusyRest of latency, and
// the CPU it leaves goes to whatever else the machine runs (the clients' side of loopback, other pods). A
// writer that is not kept busy (every pass ends with nothing new: low rates) never rests, so low rates get
// no added latency.
const (
	minBusyPass = int64(500 * time.Microsecond)
	maxBusyRest = int64(5 * time.Millisecond)
)

// busyRest returns how long a writer rests before its next pass: the length of its last pass when that
// pass was busy (new frames already waiting when it ended) and long enough to matter, capped; else 0.
func busyRest(pass int64, waiting bool) time.Duration {
	if !waiting || pass < minBusyPass {
		return 0
	}
	return time.Duration(min(pass, maxBusyRest))
}

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
func (pl *pool) serve(c *conn, nc net.Conn, head []byte) CloseReason {
	_ = nc.SetDeadline(time.Time{})
	c.pool = pl
	c.raw = &rawSink{nc: nc, head: head}
	c.out = c.raw
	c.fd = -1
	c.ctx, c.cancel = context.WithCancel(pl.ctx)
	if sc, ok := nc.(syscall.Conn); ok && canWriteNow {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc = rc
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
	if c.rc != nil {
		pl.hang.add(c)
	}
	reason := c.run(c.ctx)
	if reason == parked {
		return reason
	}
	c.end(reason)
	return reason
}

// park hands an idle, caught-up connection to a writer. The caller must not touch c afterwards.
func (pl *pool) park(c *conn) {
	pl.watch(c.t.Ring)
	c.raw.iov = nil
	if cap(c.buf) > 1<<10 {
		c.buf = nil // a filtered stream's buffer: the writer lends it one while it writes
	}
	// Writers write without waiting; a deadline left from the last write would fail them once it passed.
	_ = c.raw.nc.SetWriteDeadline(time.Time{})
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
		_ = c.raw.nc.Close() // streams on their own goroutines fail their next write
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
	c.cancel()
	if w := c.owner.Load(); w != nil {
		w.hangup(c)
	}
}

// hangup queues c, whose peer left, to be ended at the writer's next pass, if c is still parked here.
func (w *writer) hangup(c *conn) {
	w.mu.Lock()
	if c.owner.Load() == w {
		w.hungup = append(w.hungup, c)
	}
	w.mu.Unlock()
	w.wake()
}

// writer serves parked connections. Its fields below mu are its goroutine's own.
type writer struct {
	pool *pool
	kick chan struct{} // has a token when inbox or dirty changed

	mu     sync.Mutex
	closed bool         // the writer stopped: park ends connections itself
	inbox  []*conn      // connections to adopt
	hungup []*conn      // parked connections whose peer left (hangups), to end
	dirty  []*ring.Ring // rings published since the last pass
	spare  []*ring.Ring // the other dirty slice, swapped in each pass

	io       *rawIO
	rings    map[*ring.Ring][]*conn // parked connections, by ring
	timers   connHeap               // parked connections with a heartbeat or drain time
	sc       scratch
	body     []byte // a filtered stream's frames, before they become a chunk
	out      []byte // the chunk last built, for outKey
	outKey   chunkKey
	draining bool

	lastPass  int64        // nanoseconds the last pass took
	restTimer *time.Timer  // for rest
	rests     atomic.Int64 // rests taken (tests)
}

// chunkKey identifies chunk bytes: a ring's frames [from, next) are immutable, so the chunk built for one
// connection serves every other connection at the same cursor.
type chunkKey struct {
	rg         *ring.Ring
	from, next uint64
}

func (w *writer) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// mark records that rg was published to.
func (w *writer) mark(rg *ring.Ring) {
	w.mu.Lock()
	found := false
	for _, d := range w.dirty {
		found = found || d == rg
	}
	if !found {
		w.dirty = append(w.dirty, rg)
	}
	w.mu.Unlock()
	w.wake()
}

func (w *writer) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	draining := w.pool.s.draining
	for {
		select {
		case <-w.kick:
		case <-timer.C:
		case <-draining:
			draining = nil
			w.startDrain()
		case <-w.pool.ctx.Done():
			w.mu.Lock()
			w.closed = true
			inbox := w.inbox
			w.inbox = nil
			w.mu.Unlock()
			for _, c := range inbox {
				c.end(ReasonShutdown)
			}
			w.endAll(ReasonShutdown)
			return
		}
		if w.pass() {
			if rest := busyRest(w.lastPass, w.pending()); rest > 0 {
				w.rests.Add(1)
				if !w.rest(rest) {
					continue // the pool is closing: the loop's next select ends the writer
				}
			}
		}
		if len(w.timers) > 0 {
			timer.Reset(time.Duration(w.timers[0].due - monoNow()))
		}
	}
}

// pass adopts the inbox and writes to the connections of every ring published to since the last pass, then
// handles due timers. It records the time its writes took in lastPass and reports whether it wrote anything.
func (w *writer) pass() bool {
	w.mu.Lock()
	inbox, dirty, hungup := w.inbox, w.dirty, w.hungup
	w.inbox, w.dirty, w.spare, w.hungup = nil, w.spare[:0], dirty, nil
	w.mu.Unlock()

	now := monoNow()
	for _, c := range inbox {
		w.adopt(c, now)
	}
	for _, c := range hungup {
		// Still this writer's (adopted above at the latest: park queues c before hangup can): the writer is
		// the only one that lets c go (release).
		if c.owner.Load() == w {
			w.release(c)
			c.end(ReasonClientGone)
		}
	}
	for _, rg := range dirty {
		// Backwards: a connection that leaves is replaced by the last one, which was already served.
		for i := len(w.rings[rg]) - 1; i >= 0; i-- {
			w.serve(w.rings[rg][i], now)
		}
	}
	wrote := len(inbox) > 0 || len(dirty) > 0
	clear(dirty)
	end := monoNow()
	w.lastPass = end - now
	w.expire(end)
	return wrote
}

// pending says frames or connections are already waiting for the next pass.
func (w *writer) pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.dirty) > 0 || len(w.inbox) > 0
}

// rest waits d before the next pass (see busyRest); it reports false if the pool closed meanwhile. A drain
// that begins during a rest is seen by the loop's next select.
func (w *writer) rest(d time.Duration) bool {
	if w.restTimer == nil {
		w.restTimer = time.NewTimer(d)
	} else {
		w.restTimer.Reset(d)
	}
	select {
	case <-w.restTimer.C:
		return true
	case <-w.pool.ctx.Done():
		return false
	}
}

// adopt takes a parked connection in and serves what was published since it last read.
func (w *writer) adopt(c *conn, now int64) {
	rg := c.t.Ring
	c.ri = len(w.rings[rg])
	w.rings[rg] = append(w.rings[rg], c)
	c.w = w
	c.stats.Parked.Add(1)
	c.probeDue = now + probeEvery
	if w.draining {
		c.pickDrainMoment(now)
	}
	c.hi = -1
	w.schedule(c)
	w.serve(c, now)
}

// release takes c out of the writer, to be resumed on a goroutine or ended.
func (w *writer) release(c *conn) {
	rg := c.t.Ring
	conns := w.rings[rg]
	last := conns[len(conns)-1]
	conns[c.ri], last.ri = last, c.ri
	conns[len(conns)-1] = nil
	w.rings[rg] = conns[:len(conns)-1]
	if len(w.rings[rg]) == 0 {
		delete(w.rings, rg)
	}
	if c.hi >= 0 {
		heap.Remove(&w.timers, c.hi)
	}
	c.w = nil
	c.owner.Store(nil)
	c.stats.Parked.Add(-1)
}

// serve writes to c what its ring has that c has not had, through the delivery core (pull), as the
// connection's own goroutine would.
func (w *writer) serve(c *conn, now int64) {
	for range maxWritesPerPass {
		if c.filtered() {
			c.buf = w.body[:0] // lent for this write: a parked connection keeps no buffer
		}
		from := c.cursor
		out, next, _, err := c.pull(&w.sc)
		if err != nil {
			w.reclaim(c)
			w.release(c)
			if errors.Is(err, ring.ErrBehind) && w.io.peerClosed(c.rc) {
				// A client that left is not worth a catch-up from Kafka.
				c.end(ReasonClientGone)
				return
			}
			go c.resume() // behind the ring, or a re-join: on a goroutine of its own
			return
		}
		c.cursor = next
		if len(out) == 0 {
			w.reclaim(c)
			if next == from {
				return
			}
			continue // a filter passed over everything; the position moved all the same
		}
		chunk := w.chunk(c.t.Ring, from, next, out, !c.filtered())
		n, err := w.io.writeNow(c.rc, chunk)
		c.stats.Bytes.Add(int64(n))
		c.stats.Writes.Add(1)
		if err != nil {
			w.reclaim(c)
			w.release(c)
			c.end(writeReason(err))
			return
		}
		c.written(&w.sc, now)
		c.sampleDelivery(next)
		w.reclaim(c)
		if n < len(chunk) {
			w.handOff(c, chunk[n:])
			return
		}
	}
	// Still more to write: come back after the others had their turn.
	w.mark(c.t.Ring)
}

// reclaim takes back the buffer a filtered connection was lent.
func (w *writer) reclaim(c *conn) {
	if c.filtered() && c.buf != nil {
		w.body, c.buf = c.buf[:0], nil
	}
}

// chunk returns out, the ring's frames [from, next) (shared: every connection at the same cursor gets the
// same frames) or a filtered connection's own, as one chunk of the response body. A shared chunk is built
// once per writer and reused for every connection at that cursor.
func (w *writer) chunk(rg *ring.Ring, from, next uint64, out [][]byte, shared bool) []byte {
	key := chunkKey{rg, from, next}
	if shared && key == w.outKey {
		return w.out
	}
	w.out = appendChunk(w.out[:0], out)
	w.outKey = chunkKey{}
	if shared {
		w.outKey = key
	}
	return w.out
}

// handOff gives c back a goroutine of its own to write rest (the socket is full), under the write timeout,
// and carry on.
func (w *writer) handOff(c *conn, rest []byte) {
	c.pending = append([]byte(nil), rest...)
	w.release(c)
	go c.resume()
}

// startDrain gives every parked connection its moment to close within the drain window.
func (w *writer) startDrain() {
	w.draining = true
	now := monoNow()
	for _, conns := range w.rings {
		for _, c := range conns {
			c.pickDrainMoment(now)
			w.schedule(c)
		}
	}
}

// schedule puts c in the timer heap at its next heartbeat, probe, drain or token time.
func (w *writer) schedule(c *conn) {
	due := c.probeDue
	if c.p.Heartbeat > 0 {
		due = min(due, c.hbDue)
	}
	if c.drainAt != 0 {
		due = min(due, c.drainAt)
	}
	if t := c.tokenDue(); t != 0 {
		due = min(due, t)
	}
	c.due = due
	switch {
	case c.hi >= 0:
		heap.Fix(&w.timers, c.hi)
	default:
		heap.Push(&w.timers, c)
	}
}

// expire handles the heartbeats, probes, drain and token times that are due. A heartbeat time is pushed back by every write
// without touching the heap; the heap entry is corrected when it comes up.
func (w *writer) expire(now int64) {
	for len(w.timers) > 0 && w.timers[0].due <= now {
		c := w.timers[0]
		switch {
		case c.drainAt != 0 && c.drainAt <= now:
			w.release(c)
			c.end(ReasonShutdown)
			continue
		case c.tokenDue() != 0 && c.tokenDue() <= now:
			frame, end := c.tokenStep(now)
			if frame != nil {
				chunk := appendChunk(nil, [][]byte{frame})
				n, err := w.io.writeNow(c.rc, chunk)
				c.stats.Bytes.Add(int64(n))
				if err != nil {
					w.release(c)
					c.end(writeReason(err))
					continue
				}
				c.wroteAt(now)
				if n < len(chunk) {
					w.handOff(c, chunk[n:]) // its goroutine writes the rest, then ends it (tokenStep stays at the end)
					continue
				}
			}
			if end {
				w.release(c)
				c.end(ReasonTokenExpired)
				continue
			}
		case c.keepAliveDue(now):
			if w.io.peerClosed(c.rc) {
				w.release(c)
				c.end(ReasonClientGone)
				continue
			}
			n, err := w.io.writeNow(c.rc, keepAliveChunk)
			c.stats.Bytes.Add(int64(n))
			if err != nil {
				w.release(c)
				c.end(writeReason(err))
				continue
			}
			c.wroteAt(now)
			c.probeDue = now + probeEvery
			if n < len(keepAliveChunk) {
				w.handOff(c, keepAliveChunk[n:])
				continue
			}
		case c.probeDue <= now:
			if w.io.peerClosed(c.rc) {
				w.release(c)
				c.end(ReasonClientGone)
				continue
			}
			c.probeDue = now + probeEvery
		}
		w.schedule(c)
	}
}

// endAll ends every parked connection (the pool is closing).
func (w *writer) endAll(reason CloseReason) {
	var all []*conn
	for _, conns := range w.rings {
		all = append(all, conns...)
	}
	for _, c := range all {
		w.release(c)
		c.end(reason)
	}
}

var keepAliveChunk = appendChunk(nil, [][]byte{keepAliveComment})

// connHeap orders parked connections by their next due time.
type connHeap []*conn

func (h connHeap) Len() int           { return len(h) }
func (h connHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h connHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hi, h[j].hi = i, j
}

func (h *connHeap) Push(x any) {
	c := x.(*conn) //nolint:forcetypeassert // only conns are pushed
	c.hi = len(*h)
	*h = append(*h, c)
}

func (h *connHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	c.hi = -1
	*h = old[:len(old)-1]
	return c
}
