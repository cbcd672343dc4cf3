package stream

import (
	"container/heap"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

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
	idBuf    []byte // a filtered stream's id scratch
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
		w.pool.s.live.passBegin()
		wrote := w.pass()
		w.pool.s.live.passEnd()
		if wrote {
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
	if c.peerGoneSeen() {
		// The peer left as the stream parked, before the hang-up could find c's writer.
		c.owner.Store(nil)
		c.end(ReasonClientGone)
		return
	}
	rg := c.t.Ring
	c.ri = int32(len(w.rings[rg])) //nolint:gosec // a writer holds fewer than 2^31 connections
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
		heap.Remove(&w.timers, int(c.hi))
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
			c.buf, c.idBuf = w.body[:0], w.idBuf[:0] // lent for this write: a parked connection keeps no buffers
		}
		from := c.cursor
		out, next, _, err := c.pull(&w.sc)
		if err != nil {
			w.reclaim(c)
			w.release(c)
			if errors.Is(err, ring.ErrBehind) && w.io.peerClosedFD(c.fd) {
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
		n, err := w.io.writeFD(c.fd, chunk)
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
		w.idBuf, c.idBuf = c.idBuf[:0], nil
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
// and carry on. The copy of rest counts against the server's PendingBytes until it is written; a connection
// whose copy would pass that bound is ended instead, mid-chunk (its client sees a cut connection and resumes
// from its last whole frame).
func (w *writer) handOff(c *conn, rest []byte) {
	w.release(c)
	if !c.s.hold(len(rest)) {
		c.end(ReasonWriteFailed)
		return
	}
	c.pending = append([]byte(nil), rest...)
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
		heap.Fix(&w.timers, int(c.hi))
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
				n, err := w.io.writeFD(c.fd, chunk)
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
			if w.io.peerClosedFD(c.fd) {
				w.release(c)
				c.end(ReasonClientGone)
				continue
			}
			n, err := w.io.writeFD(c.fd, keepAliveChunk)
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
			if w.io.peerClosedFD(c.fd) {
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

func (h connHeap) Len() int { return len(h) }

func (h connHeap) Less(i, j int) bool { return h[i].due < h[j].due }

func (h connHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hi, h[j].hi = int32(i), int32(j) //nolint:gosec // a writer holds fewer than 2^31 connections
}

func (h *connHeap) Push(x any) {
	c := x.(*conn)        //nolint:forcetypeassert // only conns are pushed
	c.hi = int32(len(*h)) //nolint:gosec // a writer holds fewer than 2^31 connections
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
