//go:build unix

package stream

import "syscall"

// canWriteNow says writeNow and peerClosed work on this platform.
const canWriteNow = true

// writeNow writes as much of b as the connection's socket buffer takes without waiting, and returns how much
// that was. It never blocks: a full buffer returns a short count and no error.
func writeNow(rc syscall.RawConn, b []byte) (n int, err error) {
	werr := rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, e := syscall.Write(int(fd), b[n:]) //nolint:gosec // a file descriptor fits an int
			if m > 0 {
				n += m
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
				err = e
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return n, err
}

// peerClosed reports whether the peer closed or reset the connection, without waiting. Anything the peer
// sent is read and dropped: an SSE client sends nothing after its request.
func peerClosed(rc syscall.RawConn) bool {
	var buf [128]byte
	closed := false
	err := rc.Read(func(fd uintptr) bool {
		for {
			m, e := syscall.Read(int(fd), buf[:]) //nolint:gosec // a file descriptor fits an int
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
			case e != nil || m == 0:
				closed = true
			case m == len(buf):
				continue
			}
			return true
		}
	})
	return closed || err != nil
}
