//go:build unix

package stream

import (
	"net"
	"os"
	"syscall"
	"unsafe"
)

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

// iovec is the system's scatter-gather entry, for writeAll's scratch.
type iovec = syscall.Iovec

// maxIOV is the most buffers one writev takes (IOV_MAX on Linux and the BSDs).
const maxIOV = 1024

// writeAll writes every byte of iov, waiting while the socket is full under the connection's write deadline:
// the blocking write of a connection on its own goroutine. vec is the iovec scratch; iov is consumed.
func writeAll(rc syscall.RawConn, iov [][]byte, vec *[]iovec) (int, error) {
	n := 0
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for {
			v := (*vec)[:0]
			for _, b := range iov {
				if len(v) == maxIOV {
					break
				}
				if len(b) > 0 {
					iv := syscall.Iovec{Base: &b[0]}
					iv.SetLen(len(b))
					v = append(v, iv)
				}
			}
			*vec = v
			if len(v) == 0 {
				return true
			}
			m, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&v[0])), uintptr(len(v))) //nolint:gosec // the iovecs point at iov's buffers, alive for the call
			clear(v)                                                                                            // keep no references to the buffers
			switch e {
			case 0:
				n += int(m)
				iov = consume(iov, int(m))
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until the socket takes more, or the deadline
			default:
				werr = e
				return true
			}
		}
	})
	if werr != nil {
		return n, werr
	}
	return n, err
}

// consume drops the first n bytes of iov.
func consume(iov [][]byte, n int) [][]byte {
	for len(iov) > 0 && n >= len(iov[0]) {
		n -= len(iov[0])
		iov[0] = nil
		iov = iov[1:]
	}
	if len(iov) > 0 {
		iov[0] = iov[0][n:]
	}
	return iov
}

// writeFD is writeNow on the descriptor of a detached connection (see pool.detach).
func (r *rawIO) writeFD(fd int32, b []byte) (int, error) {
	r.b, r.n, r.err = b, 0, nil
	r.write(uintptr(fd))
	n, err := r.n, r.err
	r.b, r.err = nil, nil
	return n, err
}

// peerClosedFD reports whether the peer closed or reset the connection, without waiting. What the peer sent is
// read and dropped (an SSE client sends nothing after its request), at most 4 KiB per call, so a client that
// keeps sending cannot hold a writer.
func (r *rawIO) peerClosedFD(fd int32) bool {
	r.closed = false
	r.read(uintptr(fd))
	return r.closed
}

// dupConn returns a duplicate of rc's descriptor, closed on exec. The duplicate shares the socket and its
// flags (non-blocking, as net set it).
func dupConn(rc syscall.RawConn) (int32, error) {
	dup, derr := int32(-1), error(nil)
	err := rc.Control(func(fd uintptr) { dup, derr = dupCloexec(int(fd)) }) //nolint:gosec // a file descriptor fits an int
	if err == nil {
		err = derr
	}
	return dup, err
}

func dupCloexec(fd int) (int32, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	dup, err := syscall.Dup(fd)
	if err != nil {
		return -1, err
	}
	syscall.CloseOnExec(dup)
	return int32(dup), nil //nolint:gosec // a file descriptor fits an int32
}

// fdConn returns a net.Conn of a duplicate of fd of its own (net registers it with its poller); fd stays the
// caller's, whatever happens.
func fdConn(fd int32) (net.Conn, error) {
	dup, err := dupCloexec(int(fd))
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "") // owns dup; net.FileConn makes its own duplicate of it
	defer func() { _ = f.Close() }()
	return net.FileConn(f)
}

// closeFD closes the descriptor of a detached connection.
func closeFD(fd int32) { _ = syscall.Close(int(fd)) }
