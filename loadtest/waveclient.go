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
	"sync"
	"time"
)

// waveRead is what one wave client saw before it hung up.
type waveRead struct {
	opened bool  // the opening block arrived before the cut
	frames int64 // events read, replayed or live
	bytes  int64 // event-stream body bytes read (after chunked decoding), the opening block included
	err    error // how the stream failed before the cut; nil when the cut ended it
}

// waveReadBuf is a wave client's read buffer: a catch-up comes as fast as the gateway writes it, and large
// reads keep the client's system calls and chunk decoding few.
const waveReadBuf = 256 << 10

// waveBuffers are one wave client's buffers, kept in wavePool between clients: a wave's clients all start
// at once, and each wave would otherwise allocate the same again.
type waveBuffers struct {
	conn    *bufio.Reader // the connection, for the response head and the chunked body
	opening *bufio.Reader // the body, until the opening block has been read
	p       []byte        // the body's reads after the opening block
}

var wavePool = sync.Pool{New: func() any {
	return &waveBuffers{
		conn:    bufio.NewReaderSize(nil, waveReadBuf),
		opening: bufio.NewReaderSize(nil, 4096),
		p:       make([]byte, waveReadBuf),
	}
}}

// waveOnce is one client of a wave: it resumes from lastID on a connection of its own and reads the stream,
// counting frames (frameCounter, without parsing them) and bytes, until cut has passed since just before it
// dialed; then it closes the connection with a reset (SO_LINGER 0), as a client that goes away in the
// middle of a catch-up, with frames in flight and unread. Everything, the dial included, is bounded by the
// cut, so a wave client never outlives it by more than the time to close a socket. A stream that fails
// before the cut (an error status, a reset, an end, a resync event) is an error; a gateway that has not
// answered by the cut is not, and the read says whether the stream opened.
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
	bufs := wavePool.Get().(*waveBuffers) //nolint:forcetypeassert // the pool holds nothing else
	defer wavePool.Put(bufs)
	bufs.conn.Reset(conn)
	// The buffers hold on to nothing of this connection once it is done.
	defer bufs.conn.Reset(nil)
	defer bufs.opening.Reset(nil)
	if err := req.Write(conn); err != nil {
		w.err = cutOff(fmt.Errorf("request: %w", err))
		return w
	}
	resp, err := http.ReadResponse(bufs.conn, req) //nolint:bodyclose // the body is the stream: closing the connection ends it
	if err != nil {
		w.err = cutOff(fmt.Errorf("response: %w", err))
		return w
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		w.err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		return w
	}
	w.opened, w.frames, w.bytes, w.err = readWave(resp.Body, bufs)
	w.err = cutOff(w.err)
	return w
}

// readWave reads a wave client's stream body: its opening block, then frames until the stream fails (the
// cut included, which the caller tells apart). It returns whether the opening block came, the frames after
// it and every body byte read, the opening block's included.
func readWave(body io.Reader, bufs *waveBuffers) (opened bool, frames, n int64, err error) {
	counted := &countingReader{r: body}
	bufs.opening.Reset(counted)
	if _, err := readOpening(bufs.opening); err != nil {
		return false, 0, counted.n, err
	}
	// What the opening block's reader holds beyond the block comes first; once it is empty, reads into a
	// buffer as large as p go straight to the body.
	var fc frameCounter
	for {
		k, rerr := bufs.opening.Read(bufs.p)
		if err := fc.write(bufs.p[:k]); err != nil {
			return true, fc.frames, counted.n, err
		}
		if rerr != nil {
			return true, fc.frames, counted.n, fmt.Errorf("stream: %w", rerr)
		}
	}
}
