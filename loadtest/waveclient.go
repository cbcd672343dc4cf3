package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
)

// waveRead is what one wave client saw before it hung up.
type waveRead struct {
	opened bool  // the opening block arrived before the cut
	frames int64 // events read, replayed or live
	bytes  int64 // event-stream body bytes read (after chunked decoding), the opening block included
	err    error // how the stream failed before the cut; nil when the cut ended it
}

// waveOnce is one client of a wave: it resumes from lastID on a connection of its own and reads the stream,
// counting events and bytes, until cut has passed since just before it dialed; then it closes the connection
// with a reset (SO_LINGER 0), as a client that goes away in the middle of a catch-up, with frames in flight
// and unread. Everything, the dial included, is bounded by the cut, so a wave client never outlives it by
// more than the time to close a socket. A stream that fails before the cut (an error status, a reset, an
// end, a resync event) is an error; a gateway that has not answered by the cut is not, and the read says
// whether the stream opened.
func waveOnce(ctx context.Context, url, lastID string, cut time.Duration) (w waveRead) {
	ctx, cancel := context.WithTimeout(ctx, cut)
	defer cancel()
	cutOff := func(err error) error {
		// The cut shows as the connection's deadline passing, or as the connection closed by the context's
		// end (whichever the runtime notices first): neither is the gateway's doing.
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		w.err = err
		return w
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.Set("Last-Event-ID", lastID)
	// A handful of connections a wave: the kernel picks their source address.
	conn, err := dialer(0, netip.Addr{}).DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		w.err = cutOff(fmt.Errorf("connect: %w", err))
		return w
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends a reset, whatever is unread or unsent
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer func() {
		stop()
		_ = conn.Close()
	}()
	if err := req.Write(conn); err != nil {
		w.err = cutOff(fmt.Errorf("request: %w", err))
		return w
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, busyReadBuf), req) //nolint:bodyclose // the body is the stream: closing the connection ends it
	if err != nil {
		w.err = cutOff(fmt.Errorf("response: %w", err))
		return w
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		w.err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		return w
	}
	counted := &countingReader{r: resp.Body}
	defer func() { w.bytes = counted.n }()
	body := bufio.NewReaderSize(counted, busyReadBuf)
	if _, err := readOpening(body); err != nil {
		w.err = cutOff(err)
		return w
	}
	w.opened = true
	w.frames, w.err = countFrames(sse.NewParser(body))
	w.err = cutOff(w.err)
	return w
}

// countFrames reads events until the stream fails (the cut included, which the caller tells apart) and
// returns how many it read. A resync event is an error: the wave's position is one the gateway can serve.
func countFrames(p *sse.Parser) (int64, error) {
	var n int64
	for {
		ev, err := p.Next()
		if err != nil {
			if errors.Is(err, sse.ErrEventTooLarge) || errors.Is(err, sse.ErrLineTooLong) {
				continue
			}
			return n, fmt.Errorf("stream: %w", err)
		}
		if ev.Type == "resync" {
			return n, fmt.Errorf("gateway sent event: resync: %s", ev.Data)
		}
		n++
	}
}
