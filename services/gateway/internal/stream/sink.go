package stream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// sink is where a stream's bytes go: the response of an ordinary handler, or a connection taken over from
// net/http.
type sink interface {
	// write writes spans as one piece of the response body, flushed, within timeout. It returns the bytes
	// it put on the connection.
	write(spans [][]byte, timeout time.Duration) (int, error)
}

// frameKind is what a frame of the gateway's own is, for a sink that treats some apart (ownSink).
type frameKind uint8

// Kinds of the gateway's own frames that a stream of several topics shapes apart from records.
const (
	kindLive          frameKind = iota + 1 // the end of a snapshot
	kindTokenExpiring                      // the token expires soon
	kindTokenExpired                       // the token expired: the stream ends with it
)

// ownSink is a sink that is told which of a stream's writes carries a frame of the gateway's own, and what it
// is (conn.writeOwn): the mux of a stream of several topics, which gives those frames their own shape. It
// knows them by that, never by their event type, which a record could carry too.
type ownSink interface {
	// writeOwn writes frame, one frame of kind, as write writes spans.
	writeOwn(kind frameKind, frame []byte, timeout time.Duration) (int, error)
}

// selfHolder is a sink that holds the bytes of its writes (Config.PendingBytes) itself, for only part of a
// write: a WebSocket, whose writes wait for its client's acknowledgements (wsSink.write). The stream does not
// hold them for it.
type selfHolder interface {
	holdsOwn() bool
}

// holdsOwn says whether out holds the bytes of its writes itself.
func holdsOwn(out sink) bool {
	h, ok := out.(selfHolder)
	return ok && h.holdsOwn()
}

// httpSink writes through net/http: HTTP/2, TLS and HTTP/1.0 streams, and every stream when the writer pool
// is off.
type httpSink struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s *httpSink) write(spans [][]byte, timeout time.Duration) (int, error) {
	if err := s.rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	n := 0
	for _, b := range spans {
		m, err := s.w.Write(b)
		n += m
		if err != nil {
			return n, err
		}
	}
	if err := s.rc.Flush(); err != nil {
		return n, err
	}
	// The deadline bounds this write only: net/http's HTTP/2 server resets a stream whose write deadline
	// passes even when nothing is being written, so an idle stream would end a write timeout after its last
	// write.
	if err := s.rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return n, err
	}
	return n, nil
}

// rawSink writes the chunked body of an HTTP/1.1 response on a connection taken over from net/http (see
// pool.serve): each write is one chunk, written with one writev. It keeps only the connection between
// writes: the scratch of a write comes from a pool, and the writev goes through the RawConn rather than
// net.Buffers, whose writev leaves an iovec array in the connection for good (up to a kilobyte after a
// catch-up of many frames), which a parked connection would carry.
type rawSink struct {
	nc   net.Conn
	rc   syscall.RawConn // for writes without net's iovec cache, and the writers' non-blocking ones; nil when the connection offers none (it is then never parked)
	head []byte          // the response head, sent with the first write; nil once sent
}

// writeScratch is what one write of a rawSink builds.
type writeScratch struct {
	iov  net.Buffers
	vec  []iovec
	size []byte
}

var writeScratches = sync.Pool{New: func() any { return new(writeScratch) }}

func (s *rawSink) write(spans [][]byte, timeout time.Duration) (int, error) {
	total := 0
	for _, b := range spans {
		total += len(b)
	}
	ws := writeScratches.Get().(*writeScratch) //nolint:forcetypeassert // the pool holds only these
	ws.size = appendChunkSize(ws.size[:0], total)
	iov := ws.iov[:0]
	if s.head != nil {
		iov = append(iov, s.head)
	}
	iov = append(iov, ws.size)
	iov = append(iov, spans...)
	iov = append(iov, crlf)
	n, err := s.writeBuffers(iov, ws, timeout)
	clear(iov[:cap(iov)]) // keep no references to ring frames
	ws.iov = iov[:0]
	writeScratches.Put(ws)
	if err == nil {
		s.head = nil
	}
	return n, err
}

// writeFramed writes bytes that are already chunk-framed (the rest of a write the writer pool began).
func (s *rawSink) writeFramed(b []byte, timeout time.Duration) (int, error) {
	ws := writeScratches.Get().(*writeScratch) //nolint:forcetypeassert // the pool holds only these
	ws.iov = append(ws.iov[:0], b)
	n, err := s.writeBuffers(ws.iov, ws, timeout)
	clear(ws.iov[:cap(ws.iov)])
	ws.iov = ws.iov[:0]
	writeScratches.Put(ws)
	return n, err
}

// writeBuffers writes all of iov within timeout; it consumes iov.
func (s *rawSink) writeBuffers(iov net.Buffers, ws *writeScratch, timeout time.Duration) (int, error) {
	if err := s.nc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	if s.rc == nil {
		n, err := iov.WriteTo(s.nc)
		return int(n), err
	}
	return writeAll(s.rc, iov, &ws.vec)
}

var (
	crlf = []byte("\r\n")
	// lastChunk ends a chunked body.
	lastChunk = []byte("0\r\n\r\n")
)

// appendChunkSize appends the size line of a chunk of n bytes.
func appendChunkSize(dst []byte, n int) []byte {
	return append(strconv.AppendInt(dst, int64(n), 16), '\r', '\n')
}

// appendChunk appends spans as one chunk.
func appendChunk(dst []byte, spans [][]byte) []byte {
	n := 0
	for _, b := range spans {
		n += len(b)
	}
	dst = appendChunkSize(dst, n)
	for _, b := range spans {
		dst = append(dst, b...)
	}
	return append(dst, crlf...)
}

// responseHead is the head of a taken-over stream's response: the headers the handler set (and the stream's
// own) and a chunked body. The connection closes when the stream ends, and says so.
func responseHead(h http.Header) []byte {
	h = h.Clone()
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	h.Del("Content-Length")
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&b) // a bytes.Buffer does not fail
	b.WriteString("\r\n")
	return b.Bytes()
}

// writeReason is the reason a stream ends after a failed write: a peer that closed or reset the connection
// (or a WebSocket whose reads found it gone, which cancels the write) is a client gone, a connection the server closed (Server.Close) a shutdown, anything else (a timeout) a
// failed write.
func writeReason(err error) CloseReason {
	switch {
	case errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.Canceled):
		return ReasonClientGone
	case errors.Is(err, net.ErrClosed):
		return ReasonShutdown
	default:
		return ReasonWriteFailed
	}
}
