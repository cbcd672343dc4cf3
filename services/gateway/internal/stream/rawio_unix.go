//go:build unix

package stream

import "syscall"

// canWriteNow says rawIO works on this platform.
const canWriteNow = true

// rawIO does non-blocking writes and peer checks on connections through syscall.RawConn. Its callbacks are
// bound once, so a call allocates nothing. It is not safe for concurrent use: each writer has its own.
type rawIO struct {
	b      []byte
	n      int
	err    error
	closed bool
	buf    [128]byte
	wfn    func(fd uintptr) bool
	rfn    func(fd uintptr) bool
}

func newRawIO() *rawIO {
	r := &rawIO{}
	r.wfn, r.rfn = r.write, r.read
	return r
}

// writeNow writes as much of b as the connection's socket buffer takes without waiting, and returns how much
// that was. It never blocks: a full buffer returns a short count and no error.
func (r *rawIO) writeNow(rc syscall.RawConn, b []byte) (int, error) {
	r.b, r.n, r.err = b, 0, nil
	werr := rc.Write(r.wfn)
	n, err := r.n, r.err
	r.b, r.err = nil, nil
	if err == nil {
		err = werr
	}
	return n, err
}

func (r *rawIO) write(fd uintptr) bool {
	for r.n < len(r.b) {
		m, e := syscall.Write(int(fd), r.b[r.n:]) //nolint:gosec // a file descriptor fits an int
		if m > 0 {
			r.n += m
		}
		switch e {
		case nil:
			if m <= 0 {
				return true
			}
		case syscall.EINTR:
		case syscall.EAGAIN:
			return true
		default:
			r.err = e
			return true
		}
	}
	return true
}

// peerClosed reports whether the peer closed or reset the connection, without waiting. What the peer sent is
// read and dropped (an SSE client sends nothing after its request), at most 4 KiB per call, so a client that
// keeps sending cannot hold a writer.
func (r *rawIO) peerClosed(rc syscall.RawConn) bool {
	r.closed = false
	err := rc.Read(r.rfn)
	return r.closed || err != nil
}

func (r *rawIO) read(fd uintptr) bool {
	for range 32 {
		m, e := syscall.Read(int(fd), r.buf[:]) //nolint:gosec // a file descriptor fits an int
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
		case e != nil || m == 0:
			r.closed = true
		case m == len(r.buf):
			continue
		}
		return true
	}
	return true
}
