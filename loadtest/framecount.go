package main

import (
	"bytes"
	"errors"
)

// errResync is what a wave client's stream fails with when the gateway sends a resync: the wave's position
// is one the gateway can serve, so a resync means the gateway could not.
var errResync = errors.New("gateway sent event: resync")

// lineHeadLen is how much of a line's start frameCounter keeps: enough to tell a blank line (empty, or a
// lone "\r") and the resync event's type line from any other.
const lineHeadLen = 16

var (
	cr          = []byte{'\r'}
	eventField  = []byte("event:")
	resyncEvent = []byte("resync")
)

// frameCounter counts the frames of an event stream without parsing them, for wave clients that read a
// catch-up as fast as it comes and only need to know how much they read: a frame ends at a blank line that
// follows a line that is not blank, so further blank lines end nothing. It looks at each line end (one
// IndexByte a line) and keeps a line's first bytes only, so a frame costs a few tens of nanoseconds instead
// of a parse with its allocations. A frame or line split across reads counts as one in one piece would, and
// "\r\n" line ends count as "\n" ones (the gateway ends its lines with "\n" alone; a lone "\r" ending a line,
// which the event-stream format also allows, is not recognized). A comment block (the gateway's keep-alive)
// counts as a frame: over a wave client's short life there is at most one.
type frameCounter struct {
	frames  int64
	head    [lineHeadLen]byte // the current line's first bytes
	headLen int               // how many of head are set
	lineLen int               // the current line's length so far, capped at lineHeadLen+1
	inFrame bool              // a line that is not blank has ended since the last frame ended
}

// write counts the frames that p, the next bytes of the stream, ends. It returns errResync at the end of a
// resync event's type line, having counted the frames before it.
func (c *frameCounter) write(p []byte) error {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.extend(p)
			return nil
		}
		c.extend(p[:i])
		p = p[i+1:]
		line := bytes.TrimSuffix(c.head[:c.headLen], cr)
		blank := c.lineLen <= 1 && len(line) == 0
		switch {
		case blank && c.inFrame:
			c.frames++
			c.inFrame = false
		case !blank:
			c.inFrame = true
			if c.lineLen <= lineHeadLen && isResync(line) {
				c.headLen, c.lineLen = 0, 0
				return errResync
			}
		}
		c.headLen, c.lineLen = 0, 0
	}
	return nil
}

// isResync says whether line, whole, is the type line of a resync event.
func isResync(line []byte) bool {
	v, ok := bytes.CutPrefix(line, eventField)
	if !ok {
		return false
	}
	return bytes.Equal(bytes.TrimPrefix(v, []byte{' '}), resyncEvent)
}

// extend adds b to the current line: its first bytes to head, its length to lineLen.
func (c *frameCounter) extend(b []byte) {
	if len(b) == 0 {
		return
	}
	c.headLen += copy(c.head[c.headLen:], b)
	c.lineLen = min(c.lineLen+len(b), lineHeadLen+1)
}
