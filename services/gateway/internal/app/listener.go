package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// net/http answers a request it cannot read (headers over MaxHeaderBytes, a malformed request line, an
// HTTP/1.1 request without Host, a transfer encoding it does not know) itself, before any handler runs, in
// plain text: one Write of "HTTP/1.1 <code> <text>" and the headers below, straight to the connection. No
// hook lets a handler answer instead, so the gateway's listeners wrap their connections and rewrite exactly
// that response into the JSON every other error has. Handlers' responses never match: net/http writes their
// headers sorted (Connection before Content-Type) and with a Date.
//
// A request whose line and headers do not arrive within ReadHeaderTimeout is answered 408 Request Timeout.
// net/http itself answers 400 when the deadline cuts the request line, and nothing at all (it closes the
// connection) when it cuts the headers, so the wrapper watches the reads: a read that ends at its deadline
// after bytes of a request came, with no answer written since, is a header timeout. The 400 is then rewritten
// as 408, and the silent close is preceded by one. A connection on which nothing came (a preconnected socket,
// a kept-alive one between requests) is still closed without a word: an answer nobody asked for would be read
// as the answer to the client's next request.

// earlyErrorResponse matches net/http's early error responses (net/http/server.go, conn.serve).
var earlyErrorResponse = regexp.MustCompile(
	"^HTTP/1\\.1 ([1-5][0-9][0-9]) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r\n]*)$")

// h2Preface begins the connection preface of HTTP/2 with prior knowledge (RFC 9113, 3.4): a client that sends
// it speaks h2c, answered in HTTP/2 frames, never in an HTTP/1.1 error.
var h2Preface = []byte("PRI * HTTP/2.0\r\n")

// maxEarlyError bounds the writes looked at: net/http's early errors are short, frames are not looked at.
const maxEarlyError = 512

// jsonErrorListener wraps the connections it accepts in jsonErrorConns.
type jsonErrorListener struct {
	net.Listener
	maxHeaderBytes int
	headerTimeout  time.Duration // the servers' ReadHeaderTimeout, for the 408's message
}

// Accept accepts a connection and wraps it.
func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c, maxHeaderBytes: l.maxHeaderBytes, headerTimeout: l.headerTimeout, accepted: time.Now()}, nil
}

// jsonErrorConn rewrites net/http's plain-text early errors into JSON, and answers a header timeout with 408.
// net/http reads (its background read among them) and writes from different goroutines: the state below is
// guarded by mu.
type jsonErrorConn struct {
	net.Conn
	maxHeaderBytes int
	headerTimeout  time.Duration
	accepted       time.Time

	mu         sync.Mutex
	began      bool // bytes were read
	h2         bool // the first bytes were HTTP/2's preface (h2c): nothing is rewritten on this connection
	aborted    bool // the read deadline is in the past: net/http aborts a read (abortPendingRead), it is no timeout
	unanswered bool // bytes were read since the last write: a request began and has no answer yet
	timedOut   bool // a read ended at its deadline while unanswered: the request's headers are late
}

// NetConn returns the connection underneath, for a stream that takes the connection over (writev,
// non-blocking writes: see stream.Server.Serve).
func (c *jsonErrorConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes a TCP connection, as net/http does after a 431 so that the client reads the answer
// before the connection is reset.
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SetDeadline sets the read and write deadlines, noting whether the read one is an abort.
func (c *jsonErrorConn) SetDeadline(t time.Time) error {
	c.noteReadDeadline(t)
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline sets the read deadline, noting whether it is an abort.
func (c *jsonErrorConn) SetReadDeadline(t time.Time) error {
	c.noteReadDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *jsonErrorConn) noteReadDeadline(t time.Time) {
	c.mu.Lock()
	c.aborted = !t.IsZero() && t.Before(c.accepted)
	c.mu.Unlock()
}

// Read reads into b, noting that a request began, or that its headers are late.
func (c *jsonErrorConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	var ne net.Error
	timeout := errors.As(err, &ne) && ne.Timeout()
	c.mu.Lock()
	if n > 0 && !c.began {
		c.began = true
		c.h2 = bytes.HasPrefix(b[:n], h2Preface)
	}
	if n > 0 && !c.h2 {
		c.unanswered = true
	}
	if timeout && c.unanswered && !c.aborted {
		c.timedOut = true
	}
	c.mu.Unlock()
	return n, err
}

// Write writes b, or its JSON form when b is one of net/http's early errors (a 408 when it is the 400 of a
// header timeout).
func (c *jsonErrorConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	timedOut, h2 := c.timedOut, c.h2
	c.unanswered, c.timedOut = false, false
	c.mu.Unlock()
	if !h2 && len(b) <= maxEarlyError && bytes.HasPrefix(b, []byte("HTTP/1.1 ")) {
		if code, msg, ok := parseEarlyError(b, c.maxHeaderBytes); ok {
			if timedOut && code == http.StatusBadRequest {
				code, msg = http.StatusRequestTimeout, c.timeoutMessage()
			}
			if _, err := c.Conn.Write(jsonErrorResponse(code, msg)); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

// Close closes the connection, after a 408 when net/http closes it for a header timeout without a word.
func (c *jsonErrorConn) Close() error {
	c.mu.Lock()
	timedOut := c.timedOut
	c.unanswered, c.timedOut = false, false
	c.mu.Unlock()
	if timedOut {
		// A client that stalls mid-request may not read either: the answer must not hold the close up.
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Conn.Write(jsonErrorResponse(http.StatusRequestTimeout, c.timeoutMessage()))
	}
	return c.Conn.Close()
}

func (c *jsonErrorConn) timeoutMessage() string {
	return fmt.Sprintf("request timeout: the request line and headers must arrive within %s", c.headerTimeout)
}

// parseEarlyError returns the status and JSON error message of an early error response of net/http, or false
// when resp is none.
func parseEarlyError(resp []byte, maxHeaderBytes int) (int, string, bool) {
	m := earlyErrorResponse.FindSubmatch(resp)
	if m == nil {
		return 0, "", false
	}
	code, _ := strconv.Atoi(string(m[1]))
	text := http.StatusText(code)
	if text == "" {
		return 0, "", false
	}
	// The body is "<code> <text>[: detail]" or a sentence of its own ("Unsupported transfer encoding").
	msg := strings.TrimPrefix(string(m[2]), string(m[1])+" ")
	switch rest, ok := strings.CutPrefix(msg, text); {
	case ok:
		msg = strings.ToLower(text) + rest
	case msg == "":
		msg = strings.ToLower(text)
	default:
		msg = strings.ToLower(msg[:1]) + msg[1:]
	}
	if code == http.StatusRequestHeaderFieldsTooLarge {
		msg += fmt.Sprintf(": the request line and headers may hold at most %d bytes", maxHeaderBytes)
	}
	return code, msg, true
}

// jsonErrorResponse returns a whole HTTP/1.1 response of status code with {"error": msg} as its body, closing
// the connection.
func jsonErrorResponse(code int, msg string) []byte {
	body, _ := json.Marshal(map[string]string{"error": msg}) // a map of strings always marshals
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}
