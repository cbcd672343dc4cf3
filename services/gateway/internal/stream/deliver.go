package stream

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// The delivery core. What a client gets next from the ring, how its position moves, when it is due a
// keep-alive and when it must re-join is decided here, once, for both ways a stream is served: on a goroutine
// of its own (conn.loop) and parked in the writer pool (writer.serve). The two paths differ only in how the
// bytes reach the socket and how they wait.

// scratch is the reusable memory of one pull: the caller's (a writer's, or a stream goroutine's), so that a
// parked connection keeps none.
type scratch struct {
	spans  [][]byte
	frames []ring.Frame
}

// pull reads from the ring what the client gets next after c.cursor, at most MaxWriteBytes of frames:
//   - on the fast path (synced, no filter), the ring's frames as they are, as spans of sc;
//   - otherwise each frame goes through deliverFrame into c.buf, returned as one span, or none when the
//     filters passed over every frame (the position moved all the same).
//
// It advances the stream's position (c.last on the fast path, c.pos otherwise) and the frame counters, and
// returns the cursor after what it read (c.cursor when nothing was published since) and the ring's wake
// channel. The caller writes out, then sets c.cursor to next and calls written. It returns ring.ErrBehind
// when the cursor was evicted and errRejoin when the stream must re-join; the cursor is then unchanged.
func (c *conn) pull(sc *scratch) (out [][]byte, next uint64, wake <-chan struct{}, err error) {
	if c.t.epoch() != c.epoch {
		return nil, c.cursor, nil, errRejoin // the topic was created again: every stream
	}
	if gen := c.t.generation(); gen != c.gen {
		if c.keyParts != nil {
			return nil, c.cursor, nil, errRejoin // partitions added: a key filter's partitions change
		}
		c.gen = gen // the stream reads every partition, old and new: deliverFrame takes new ones as they come
	}
	rg, maxBytes := c.t.Ring, c.s.cfg.MaxWriteBytes
	if c.synced && !c.filtered() {
		var last []byte
		sc.spans, last, next, wake, err = rg.ReadLast(c.cursor, sc.spans[:0], maxBytes)
		if err != nil || len(sc.spans) == 0 {
			return nil, c.cursor, wake, err
		}
		// The fast path does not track the position frame by frame: the last frame's id is it. Keeping the
		// frame (not a copy) costs nothing; frames are immutable.
		c.last = last
		c.pulled = int64(next - c.cursor)
		return sc.spans, next, wake, nil
	}
	sc.frames, next, wake, err = rg.ReadFrames(c.cursor, sc.frames[:0], maxBytes)
	if err != nil {
		return nil, c.cursor, wake, err
	}
	for _, f := range sc.frames {
		c.synced = c.deliverFrame(f, &c.p) || c.synced
	}
	clear(sc.frames) // keep no references to frames the ring may evict
	if c.cf != nil {
		c.flushDue(monoNow())
	}
	if len(c.buf) == 0 {
		return nil, next, wake, nil
	}
	sc.spans = append(sc.spans[:0], c.buf)
	return sc.spans, next, wake, nil
}

// written records that out, from pull, reached the client at now (monoNow): the fast path's frames are
// counted (the slow path counts each frame as it builds it), the slow path's buffer is
// emptied (and dropped once the stream is on the fast path, which needs none), and the next keep-alive is
// due a heartbeat from now.
func (c *conn) written(sc *scratch, now int64) {
	c.frames += c.pulled
	c.stats.Frames.Add(c.pulled)
	c.pulled = 0
	clear(sc.spans)
	c.buf = c.buf[:0]
	c.releaseBuf()
	c.wroteAt(now)
}

// wroteAt pushes the stream's next keep-alive back to a heartbeat after now. Every write to the client
// (frames, resyncs, keep-alives) calls it: only a stream that wrote nothing for a heartbeat gets a
// keep-alive, and a stream whose frames are all filtered out gets them too.
func (c *conn) wroteAt(now int64) {
	if c.p.Heartbeat > 0 {
		c.hbDue = now + int64(c.p.Heartbeat)
	}
}

// keepAliveDue says the stream wrote nothing for a heartbeat.
func (c *conn) keepAliveDue(now int64) bool { return c.p.Heartbeat > 0 && c.hbDue <= now }

// keepAliveComment is the comment a stream writes when it has had nothing to write for a heartbeat.
var keepAliveComment = []byte(": keep-alive\n\n")

// keepAliveIfDue writes a keep-alive comment, from the stream's goroutine, when the stream wrote nothing for a
// heartbeat. Every wait of a stream on its own goroutine (the loop, a topic not there yet, a Kafka call, a
// replay read) keeps its client alive through it; a parked stream's writer decides the same with
// keepAliveDue.
func (c *conn) keepAliveIfDue() error {
	if !c.keepAliveDue(monoNow()) {
		return nil
	}
	return c.write([][]byte{keepAliveComment})
}

// keeps says the stream's filters let a record through: its key (key=), its event type (event=), which typ
// gives, and the filter expression (filter=, a token's filter) over its value, which value gives; typ and
// value are asked only when a filter needs them. Ring frames and records read back from Kafka go through it
// alike.
func (p *kept) keeps(key []byte, typ func() string, value func() []byte) bool {
	if len(p.Events) > 0 && !p.Events[typ()] {
		return false
	}
	if len(p.Keys) > 0 && !p.Keys[string(key)] {
		return false
	}
	return p.Filter == nil || p.Filter.Match(value(), key, typ())
}

// deliverFrame is deliver without the write: it appends to c.buf what the client gets of f.
func (c *conn) deliverFrame(f ring.Frame, p *kept) (synced bool) {
	if !c.ownPartition(f.Partition) {
		return false // not a partition of this stream: not even its position is tracked
	}
	if have, ok := c.pos.Offset(f.Partition); ok && f.Offset <= have {
		return false
	}
	c.seen(f.Partition, f.Offset)
	c.idBuf, _ = c.pos.AppendText(c.idBuf[:0])
	nl := bytes.IndexByte(f.Bytes, '\n')
	baked := f.Bytes[len("id: "):nl]
	synced = bytes.Equal(c.idBuf, baked)
	compact := !synced && bytes.HasPrefix(baked, []byte(position.PrefixCompact))
	if compact && (!c.filtered() || c.muxed) && c.t.Cached != nil {
		// A compact id says the same position in other bytes: the stream is level with the ring when the
		// checkpoint it names (this pod's own, at hand) gives c.pos, and then takes the fast path, or, a topic
		// of a stream of several topics, says its position compact. (A filtered stream stays on this path
		// whatever it finds, so it is not worth resolving for.)
		if v, ok := c.t.Cached(string(baked)); ok {
			synced = v.Equal(c.pos)
		}
	}
	if !c.keepsFrame(f, nl, p) {
		c.unseen(f.Partition, f.Offset, f.Key)
		return synced
	}
	if c.cf != nil {
		c.cf.hold(f.Partition, f.Offset, f.Key, f.Bytes[nl+1:], f.Own, monoNow())
		return false
	}
	if synced && !c.meta && !c.muxed && c.p.Fields == nil {
		c.buf = append(c.buf, f.Bytes...)
	} else {
		if synced && compact && c.muxed {
			// Level with the ring, whose id says the position compact: a topic of a stream of several topics
			// says it so too, and the stream's id is compact (see multi.go).
			c.idBuf = append(c.idBuf[:0], baked...)
		}
		if f.Own {
			c.buf = c.appendOwnOut(c.buf, f.Bytes[nl+1:])
		} else {
			c.buf = c.appendOut(c.buf, f.Bytes[nl+1:], f.Partition, f.Offset, f.Key)
		}
	}
	c.frames++
	c.stats.Frames.Add(1)
	return synced
}

// ownPartition says a partition is the stream's: every one, or for a key-filtered stream those its keys go to.
func (c *conn) ownPartition(partition int32) bool {
	if c.keyParts == nil {
		return true
	}
	_, ok := slices.BinarySearch(c.keyParts, partition)
	return ok
}

// keepsFrame says the stream's filters let a ring frame (whose id line ends at nl) through. A frame of the
// gateway's own (a resync the feed published: ring.Frame.Own) always passes: like the resyncs of a resume, it
// tells a client of its own partitions what it will never get. It is known by that flag alone: a record
// whose event type reads "resync" is a record (and reaches clients renamed, see feed.RenamedPrefix).
func (c *conn) keepsFrame(f ring.Frame, nl int, p *kept) bool {
	return f.Own || p.keeps(f.Key, func() string { return frameType(f.Bytes[nl+1:]) },
		func() []byte { return frameValue(f.Bytes[nl+1:], c.t.format().Value) })
}

// appendOwnOut appends to dst a frame of the gateway's own from the ring (rest: after its id line) with the
// stream's position (c.idBuf) as its id: as it is, with no meta line (it carries no record) and no projection
// (its data is the gateway's).
func (c *conn) appendOwnOut(dst, rest []byte) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, c.idBuf...)
	dst = append(dst, '\n')
	return append(dst, rest...)
}

// appendOut appends to dst a record's frame as this stream sends it: the stream's position (c.idBuf) as its
// id, the meta line when the stream has one (WebSocket), then the rest of the frame (rest: after its id line)
// with the data projected to the stream's fields when it asks for some. Ring frames and records read back
// from Kafka go through it alike.
func (c *conn) appendOut(dst, rest []byte, partition int32, offset int64, key []byte) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, c.idBuf...)
	dst = append(dst, '\n')
	if c.meta {
		dst = appendMeta(dst, partition, offset, key)
	}
	if c.p.Fields == nil || bytes.HasPrefix(rest, deleteTypeLine) {
		return append(dst, rest...)
	}
	// The lines before the data (event, undecodable) as they are, then the projection as one data line.
	data := bytes.Index(rest, []byte("data:"))
	if data < 0 || (data > 0 && rest[data-1] != '\n') {
		return append(dst, rest...)
	}
	start := len(dst)
	dst = append(dst, rest[:data]...)
	dst = append(dst, "data: "...)
	out, ok := c.p.Fields.Apply(dst, frameValue(rest, c.t.format().Value))
	if !ok {
		return append(dst[:start], rest...)
	}
	return append(out, "\n\n"...)
}

// deleteTypeLine starts a tombstone's frame once its id line is cut off.
var deleteTypeLine = []byte("event: " + feed.DeleteEvent + "\n")

// frameType returns the event type of a frame whose id line was cut off.
func frameType(rest []byte) string {
	const prefix = "event: "
	if !bytes.HasPrefix(rest, []byte(prefix)) {
		return "message"
	}
	rest = rest[len(prefix):]
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	return string(rest)
}

// frameValue returns the record value of a frame whose id line was cut off: its data lines joined, decoded
// from base64 when the topic's format marks it so; nil for a tombstone (whose data is its key). A value the
// text format rewrote (CR to LF) comes back rewritten. A value of one data line, most of them, is the frame's
// own bytes, not a copy: the caller must not keep or change it.
func frameValue(rest []byte, vf feed.ValueFormat) []byte {
	if bytes.HasPrefix(rest, deleteTypeLine) {
		return nil
	}
	var out []byte
	lines := 0
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data, _ = bytes.CutPrefix(data, []byte(" "))
		switch lines {
		case 0:
			out = data
		case 1:
			out = append(append(bytes.Clone(out), '\n'), data...)
		default:
			out = append(append(out, '\n'), data...)
		}
		lines++
	}
	if vf != feed.ValueText {
		if enc, ok := bytes.CutPrefix(out, []byte(feed.Base64Prefix)); ok {
			if dec, err := base64.StdEncoding.AppendDecode([]byte{}, enc); err == nil {
				return dec
			}
		}
	}
	if out == nil {
		out = []byte{} // an empty value, not a tombstone
	}
	return out
}

// recordType returns the event type the frame of rec has.
func recordType(rec *kgo.Record) string {
	return feed.RecordType(rec)
}

// The token's moments (Params.Expires, Params.ExpiryNotice), decided here for both paths: conn.loop waits
// for them with a timer, a writer keeps them in its timer heap; both then call tokenStep and write what it
// returns.

// Token states of a stream whose token expires.
const (
	tokenLive    = iota // before the notice
	tokenNoticed        // the token-expiring frame is written
	tokenEnded          // the token-expired frame is written: the stream ends
)

// Event types of the token's moments.
const (
	// EventTokenExpiring is the type of the frame a stream gets ExpiryNotice before its token expires.
	EventTokenExpiring = feed.EventTokenExpiring
	// EventTokenExpired is the type of a stream's last frame when its token expired.
	EventTokenExpired = feed.EventTokenExpired
)

// setExpiry sets the stream's token moments on the monotonic clock (monoNow), from the wall-clock Expires:
// taken once, so a wall-clock step later does not move them.
func (c *conn) setExpiry(p *Params, now int64, wallNow time.Time) {
	if p.Expires.IsZero() {
		return
	}
	c.tokEnd = nonZero(now + int64(p.Expires.Sub(wallNow)))
	c.tokUntil = p.Expires
	if p.ExpiryNotice > 0 {
		c.tokNotice = nonZero(c.tokEnd - int64(p.ExpiryNotice))
	}
}

// nonZero moves a moment off 0, which means "none" (a moment may be 0 or less: monoNow counts from the
// process's start, and in tests from outside a synctest bubble).
func nonZero(t int64) int64 {
	if t == 0 {
		return 1
	}
	return t
}

// tokenDue returns when the stream next owes its client something about its token (monoNow): the notice, then
// the end; 0 when its token never expires.
func (c *conn) tokenDue() int64 {
	if c.tokState == tokenLive && c.tokNotice != 0 {
		return c.tokNotice
	}
	return c.tokEnd
}

// tokenStep returns what the stream owes its client about its token at now: nothing; the token-expiring frame;
// or the token-expired frame, after which it ends (end is true, and stays true on every later call, with no
// frame: the frame is returned once). Each frame's id is the client's position, the last id it was sent.
func (c *conn) tokenStep(now int64) (frame []byte, end bool) {
	switch {
	case c.tokEnd == 0:
		return nil, false
	case c.tokState == tokenEnded:
		return nil, true
	case c.momentDue(now) && c.renewed(now):
		return nil, false
	case now >= c.tokEnd:
		c.tokState = tokenEnded
		return c.tokenFrame(EventTokenExpired, `{"expired_at":"`+time.Unix(c.p.expires, 0).UTC().Format(time.RFC3339)+`"}`), true
	case c.tokState == tokenLive && c.tokNotice != 0 && now >= c.tokNotice:
		c.tokState = tokenNoticed
		c.stats.TokenNotices.Add(1)
		left := max(time.Duration(c.tokEnd-now), 0)
		return c.tokenFrame(EventTokenExpiring, fmt.Sprintf(`{"expires_at":"%s","expires_in_ms":%d}`,
			time.Unix(c.p.expires, 0).UTC().Format(time.RFC3339), left.Milliseconds())), false
	}
	return nil, false
}

// momentDue says whether one of the token's moments (the notice or the end) has come at now.
func (c *conn) momentDue(now int64) bool {
	return now >= c.tokEnd || c.tokState == tokenLive && c.tokNotice != 0 && now >= c.tokNotice
}

// tokenFrame returns a frame of the gateway's own with the client's position as its id.
func (c *conn) tokenFrame(typ, data string) []byte {
	var id []byte
	if c.last != nil {
		id = c.last[len("id: "):bytes.IndexByte(c.last, '\n')] // the fast path: the last frame's id
	} else {
		id, _ = c.clientPos().AppendText(nil)
	}
	return sse.AppendEventBytes(nil, id, []byte(typ), []byte(data))
}

// metaPrefix starts the comment line that carries a record frame's partition, offset and key to a transport
// that asked for them (conn.meta): "::m <partition> <offset> <key in base64, or - for none>". A comment, so the
// frame stays a valid SSE frame.
var metaPrefix = []byte("::m ")

// appendMeta appends the meta line of a record; a record without a key, or with an empty one, has "-".
func appendMeta(dst []byte, partition int32, offset int64, key []byte) []byte {
	dst = append(dst, metaPrefix...)
	dst = strconv.AppendInt(dst, int64(partition), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, offset, 10)
	dst = append(dst, ' ')
	// The ring does not tell a null key from an empty one (a keyless record's key is an empty slice once the
	// ring holds keys): both are none, on the ring's frames and the records read back from Kafka alike. An
	// empty base64 field would leave the line two fields long, which reads as no meta line: not a record.
	if len(key) == 0 {
		dst = append(dst, '-')
	} else {
		dst = base64.StdEncoding.AppendEncode(dst, key)
	}
	return append(dst, '\n')
}
