package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// net/http answers a request it cannot read (headers over MaxHeaderBytes, a malformed request line, an
// HTTP/1.1 request without Host, a transfer encoding it does not know) itself, before any handler runs, in
// plain text: one Write of "HTTP/1.1 <code> <text>" and the headers below, straight to the connection. No
// hook lets a handler answer instead, so the gateway's listeners wrap their connections and rewrite exactly
// that response into the JSON every other error has. Handlers' responses never match: net/http writes their
// headers sorted (Connection before Content-Type) and with a Date.

// earlyErrorResponse matches net/http's early error responses (net/http/server.go, conn.serve).
var earlyErrorResponse = regexp.MustCompile(
	"^HTTP/1\\.1 ([1-5][0-9][0-9]) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r\n]*)$")

// maxEarlyError bounds the writes looked at: net/http's early errors are short, frames are not looked at.
const maxEarlyError = 512

// jsonErrorListener wraps the connections it accepts in jsonErrorConns.
type jsonErrorListener struct {
	net.Listener
	maxHeaderBytes int
}

// Accept accepts a connection and wraps it.
func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c, maxHeaderBytes: l.maxHeaderBytes}, nil
}

// jsonErrorConn rewrites net/http's plain-text early errors into JSON.
type jsonErrorConn struct {
	net.Conn
	maxHeaderBytes int
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

// Write writes b, or its JSON form when b is one of net/http's early errors.
func (c *jsonErrorConn) Write(b []byte) (int, error) {
	if len(b) <= maxEarlyError && bytes.HasPrefix(b, []byte("HTTP/1.1 ")) {
		if out, ok := jsonEarlyError(b, c.maxHeaderBytes); ok {
			if _, err := c.Conn.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

// jsonEarlyError returns the JSON response for an early error response of net/http, or false when resp is
// none.
func jsonEarlyError(resp []byte, maxHeaderBytes int) ([]byte, bool) {
	m := earlyErrorResponse.FindSubmatch(resp)
	if m == nil {
		return nil, false
	}
	code, _ := strconv.Atoi(string(m[1]))
	text := http.StatusText(code)
	if text == "" {
		return nil, false
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
	body, _ := json.Marshal(map[string]string{"error": msg}) // a map of strings always marshals
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, text, len(body), body), true
}
