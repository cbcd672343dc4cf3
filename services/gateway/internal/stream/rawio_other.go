//go:build !unix

package stream

import (
	"errors"
	"net"
	"syscall"
)

// canWriteNow says rawIO works on this platform; here it does not, so taken-over connections are never
// parked in the writer pool.
const canWriteNow = false

type rawIO struct{}

func newRawIO() *rawIO { return &rawIO{} }

func (*rawIO) writeNow(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("stream: non-blocking writes are not supported on this platform")
}

type iovec struct{}

func writeAll(_ syscall.RawConn, _ [][]byte, _ *[]iovec) (int, error) {
	return 0, errors.New("stream: raw writes are not supported on this platform")
}

func (*rawIO) writeFD(int32, []byte) (int, error) {
	return 0, errors.New("stream: non-blocking writes are not supported on this platform")
}

func (*rawIO) peerClosedFD(int32) bool { return false }

func dupConn(syscall.RawConn) (int32, error) {
	return -1, errors.New("stream: detached connections are not supported on this platform")
}

func fdConn(int32) (net.Conn, error) {
	return nil, errors.New("stream: detached connections are not supported on this platform")
}

func closeFD(int32) {}
