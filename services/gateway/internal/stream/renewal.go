package stream

import (
	"sync/atomic"
	"time"
)

// Renewal is a stream's expiry that may move later while the stream runs: an authorization hook's answer,
// which the gateway asks again before it runs out. Params.Expires is where the stream's end starts; when that
// moment comes, a stream whose Renewal says a later time goes on to it, and ends (token-expired) only when the
// Renewal has not moved. Safe for concurrent use: the gateway extends it on its own goroutine while streams
// read it on theirs (or a writer's).
type Renewal struct{ until atomic.Int64 } // Unix nanoseconds

// NewRenewal returns a Renewal that runs until until.
func NewRenewal(until time.Time) *Renewal {
	r := &Renewal{}
	r.until.Store(until.UnixNano())
	return r
}

// Extend moves the Renewal to until, if that is later than where it is; it never moves it earlier (an answer
// that arrives late must not shorten a newer one).
func (r *Renewal) Extend(until time.Time) {
	t := until.UnixNano()
	for {
		cur := r.until.Load()
		if t <= cur || r.until.CompareAndSwap(cur, t) {
			return
		}
	}
}

// Until returns when the Renewal runs out.
func (r *Renewal) Until() time.Time { return time.Unix(0, r.until.Load()) }

// renewed moves the stream's end to its Renewal's, when that is later than the end the stream has (which has
// come: now >= c.tokEnd), and says whether the stream goes on. The notice, if the stream has one, moves with it.
func (c *conn) renewed(now int64) bool {
	r := c.p.renewal
	if r == nil {
		return false
	}
	until := r.Until()
	if !until.After(c.tokUntil) {
		return false
	}
	moved := int64(until.Sub(c.tokUntil))
	c.tokEnd = nonZero(c.tokEnd + moved)
	if c.tokNotice != 0 {
		c.tokNotice = nonZero(c.tokNotice + moved)
	}
	c.tokUntil, c.p.expires, c.tokState = until, until.Unix(), tokenLive
	return now < c.tokEnd
}
