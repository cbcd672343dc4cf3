//go:build !unix

package stream

import (
	"errors"
	"syscall"
)

// canWriteNow says writeNow and peerClosed work on this platform; here they do not, so taken-over
// connections are never parked in the writer pool.
const canWriteNow = false

func writeNow(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("stream: non-blocking writes are not supported on this platform")
}

func peerClosed(syscall.RawConn) bool { return false }
