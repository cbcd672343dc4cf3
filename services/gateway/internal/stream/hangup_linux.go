//go:build linux

package stream

import (
	"errors"
	"sync"
	"syscall"
)

// hangups notices the moment the peer of a taken-over connection leaves, whatever the stream is doing: waiting
// for its topic, for Kafka, on its own goroutine between writes, or parked in a writer with no heartbeat
// due. One epoll instance per pool watches every taken-over connection for the peer's end (EPOLLRDHUP, and
// the hang-up and error conditions epoll always reports), edge-triggered, so each end is reported once; one
// goroutine waits on it. Without it a client that left is seen only by the next failed write or the next
// probe (heartbeat or probeEvery), and its per-address and per-subject slots stay taken until then.
//
// A reported end is checked on the socket (peerGone) before it is acted on: epoll reports by file
// descriptor, and a descriptor closed and reused by a new connection between the report and the look-up
// must not end the new one. Acting on it is safe from any goroutine: the stream's context is canceled (a
// stream on its own goroutine ends at its next select), and a parked stream is handed to its writer's
// hang-up list (writer.hangup), which ends it at its next pass.
type hangups struct {
	epfd  int
	wake  [2]int // a pipe; a byte written to wake[1] ends the goroutine
	mu    sync.Mutex
	conns map[int32]*conn // by file descriptor
	done  chan struct{}
}

// epollET is EPOLLET as the uint32 the event mask is (the syscall package spells it as a negative int).
const epollET = 1 << 31

// newHangups starts the watcher, or returns nil when the system refuses an epoll instance (the pool then
// relies on its probes).
func newHangups() *hangups {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	h := &hangups{epfd: epfd, conns: map[int32]*conn{}, done: make(chan struct{})}
	if err := syscall.Pipe2(h.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		_ = syscall.Close(epfd)
		return nil
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(h.wake[0])} //nolint:gosec // a file descriptor fits an int32
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, h.wake[0], &ev); err != nil {
		h.closeFDs()
		return nil
	}
	go h.run()
	return h
}

// add watches c's connection, whose descriptor is c.fd.
func (h *hangups) add(c *conn) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addLocked(c)
}

func (h *hangups) addLocked(c *conn) {
	c.watched = true
	h.conns[c.fd] = c // before the registration: an end already there is reported at once
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | epollET, Fd: c.fd}
	if err := syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_ADD, int(c.fd), &ev); err != nil {
		delete(h.conns, c.fd)
		c.watched = false
	}
}

// rebind moves c to the descriptor fd (see pool.detach and pool.attach): its old one is still open.
func (h *hangups) rebind(c *conn, fd int32) {
	if h == nil {
		c.fd = fd
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(c)
	c.fd = fd
	h.addLocked(c)
}

// remove stops watching c's connection; it runs before the connection is closed, so that its descriptor,
// once reused, is not reported for c.
func (h *hangups) remove(c *conn) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(c)
}

func (h *hangups) removeLocked(c *conn) {
	if !c.watched {
		return
	}
	c.watched = false
	if h.conns[c.fd] == c {
		delete(h.conns, c.fd)
		_ = syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_DEL, int(c.fd), nil)
	}
}

func (h *hangups) run() {
	defer close(h.done)
	events := make([]syscall.EpollEvent, 64)
	for {
		n, err := syscall.EpollWait(h.epfd, events, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) == h.wake[0] {
				return
			}
			// Looked up and checked under the lock: c.fd changes (rebind) and closes (remove) only under it.
			h.mu.Lock()
			c := h.conns[ev.Fd]
			gone := c != nil && peerGone(c.fd)
			h.mu.Unlock()
			if gone {
				c.peerLeft()
			}
		}
	}
}

// peerGone checks on the socket that c's peer ended the connection: a peek that finds its end (no bytes) or
// an error. Bytes waiting ahead of the end are left for the writer's probe, which reads and drops them.
func peerGone(fd int32) bool {
	var b [1]byte
	n, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return (n == 0 && e == nil) || (e != nil && !errors.Is(e, syscall.EAGAIN) && !errors.Is(e, syscall.EINTR))
}

// close stops the goroutine and releases the epoll instance.
func (h *hangups) close() {
	if h == nil {
		return
	}
	_, _ = syscall.Write(h.wake[1], []byte{0})
	<-h.done
	h.closeFDs()
}

func (h *hangups) closeFDs() {
	_ = syscall.Close(h.epfd)
	_ = syscall.Close(h.wake[0])
	_ = syscall.Close(h.wake[1])
}
