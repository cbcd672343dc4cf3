package sse

import (
	"bytes"
	"io"
	"math"
	"time"
)

// Event is one event dispatched by a Parser.
type Event struct {
	// Type is the event type: the value of the event's last "event" field,
	// or "message" when it had none or an empty one. It is empty only for the
	// id-only blocks that Next returns with WithIDOnlyBlocks.
	Type string
	// Data is the event data: the values of its "data" fields joined by LF.
	// Line ends inside the stream's values arrive as separate fields, so a
	// value a server sent with CR or CR LF comes back with LF.
	Data string
	// ID is the stream's last event id after this event: the value of this
	// event's "id" field, or else the id that was current before it.
	ID string
}

// IDOnly reports whether e stands for a block that fired no event but moved
// the last event id (an "id" field and no data), which Next returns only with
// WithIDOnlyBlocks. Its Type and Data are empty; a dispatched event always has
// a Type.
func (e Event) IDOnly() bool { return e.Type == "" }

// DefaultMaxLineBytes is the longest line a Parser accepts unless
// WithMaxLineBytes says otherwise.
const DefaultMaxLineBytes = 1 << 20

// DefaultMaxEventBytes is the largest data buffer a Parser builds for one
// event unless WithMaxEventBytes says otherwise.
const DefaultMaxEventBytes = 4 << 20

// parserConfig holds the settings that Options change.
type parserConfig struct {
	maxLine  int
	maxEvent int
	lastID   string
	idBlocks bool
}

// Option configures a Parser.
type Option func(*parserConfig)

// WithMaxLineBytes sets the longest line, without its line end, that the
// Parser accepts. The default is DefaultMaxLineBytes (1 MiB); n <= 0 keeps
// the default. The read buffer grows up to this size, so it also bounds the
// Parser's memory.
//
// A longer line makes Next return ErrLineTooLong as soon as the Parser has
// seen more than n bytes of it. The Parser stays usable: the next call to Next
// skips the rest of the line without buffering it, and drops the event the
// line belongs to (its data and event fields, up to the blank line that ends
// it). The line itself is ignored whatever field it holds. "id" and "retry"
// fields elsewhere in the dropped event still take effect, so LastEventID
// moves past the dropped event at its blank line and a reconnection does not
// ask for it again. A caller that prefers to stop can simply stop calling Next.
func WithMaxLineBytes(n int) Option {
	return func(c *parserConfig) {
		if n > 0 {
			c.maxLine = n
		}
	}
}

// WithMaxEventBytes sets the largest data buffer of one event: the bytes of
// its data values plus one LF per data field. The default is
// DefaultMaxEventBytes (4 MiB); n <= 0 keeps the default.
//
// A data field that would grow the buffer past n makes Next return
// ErrEventTooLarge. The Parser stays usable: the event is dropped (its data
// and event fields are ignored up to the blank line that ends it), while its
// "id" and "retry" fields still take effect as with WithMaxLineBytes.
func WithMaxEventBytes(n int) Option {
	return func(c *parserConfig) {
		if n > 0 {
			c.maxEvent = n
		}
	}
}

// WithLastEventID starts the Parser with id as the stream's last event id, as
// if an earlier block had set it: an event without an "id" field carries it,
// and LastEventID returns it until the stream sends another id. The default is
// the empty string.
//
// A reconnecting client passes the id it sent as Last-Event-ID. The WHATWG
// last event ID string belongs to the EventSource, not to one response, so it
// outlives the connection; a Parser, which lives for one response, needs to be
// told. The id is taken as it is (it is not checked for NUL, CR or LF, which
// no stream can put in an id); bytes that are not UTF-8 are decoded as stream
// bytes are.
func WithLastEventID(id string) Option {
	return func(c *parserConfig) { c.lastID = id }
}

// WithIDOnlyBlocks makes Next also return the blocks that fire no event but
// move the last event id: an "id" field followed by a blank line, with no
// data, or an event dropped by a size limit whose "id" field took effect.
// Such an Event has an empty Type and Data (IDOnly reports true) and ID the
// new last event id. A block that leaves the id as it was is not returned. By default
// these blocks show only in LastEventID, as in a browser, where they fire
// nothing; a client that saves its position must see them to save it.
func WithIDOnlyBlocks() Option {
	return func(c *parserConfig) { c.idBlocks = true }
}

// Parser reads a text/event-stream and returns its events as a browser's
// EventSource would dispatch them (WHATWG HTML, "Interpreting an event
// stream"). Create one with NewParser for each connection.
//
// A Parser is not safe for concurrent use.
type Parser struct {
	rd  io.Reader
	cfg parserConfig

	// buf[r:w] holds the bytes read but not consumed yet. buf grows up to
	// maxLine+1 bytes, enough for a whole line and the byte after it.
	buf  []byte
	r, w int
	// There is no CR in buf[r:crMark] and no LF in buf[r:lfMark]; a mark
	// below w that points at its byte is the next one. Keeping them means
	// each byte is searched once per kind however the lines end and however
	// the stream is cut into reads.
	crMark, lfMark int
	// err is the reader's error (io.EOF included). It is sticky: the bytes
	// read before it are still parsed, then every Next returns it.
	err error

	bomDone  bool // the start of the stream was checked for a BOM
	skipLF   bool // the last line ended with CR, so an LF next is part of that line end
	skipLine bool // the rest of an over-long line is being thrown away
	discard  bool // the event being built is dropped because it overflowed a limit

	// The buffers of the WHATWG algorithm, as raw bytes. They are decoded
	// from UTF-8 only when an event is dispatched.
	data []byte // data buffer
	typ  []byte // event type buffer
	id   []byte // last event ID buffer

	// lastID is the last event ID string, decoded from lastIDRaw. Keeping
	// the raw bytes lets dispatch allocate only when the id changes.
	lastIDRaw []byte
	lastID    string
	// lastTyp caches the decoded event type, which rarely changes.
	lastTypRaw []byte
	lastTyp    string

	retry    time.Duration
	hasRetry bool
}

// initialBufSize is the size of a Parser's first read buffer, the same as
// bufio's default. It grows when a line does not fit.
const initialBufSize = 4096

// maxEmptyReads is how many reads returning 0 bytes and no error in a row the
// Parser accepts before it gives up with io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// NewParser returns a Parser that reads the stream from r.
func NewParser(r io.Reader, opts ...Option) *Parser {
	cfg := parserConfig{maxLine: DefaultMaxLineBytes, maxEvent: DefaultMaxEventBytes}
	for _, o := range opts {
		o(&cfg)
	}
	// At least 4 bytes so the BOM check can look at 3.
	size := max(min(initialBufSize, cfg.maxLine+1), 4)
	p := &Parser{rd: r, cfg: cfg, buf: make([]byte, size)}
	if cfg.lastID != "" {
		// The last event ID buffer and string both start at the id, so that
		// the first dispatch keeps it unless the stream sends another.
		p.id = []byte(cfg.lastID)
		p.lastIDRaw = append([]byte(nil), p.id...)
		p.lastID = decodeUTF8(p.id)
	}
	return p
}

// Next returns the next dispatched event.
//
// At the end of the stream it returns io.EOF; an event that was not
// terminated by a blank line is dropped, and an id inside it never becomes
// the LastEventID. A line or an event over the configured limits gives
// ErrLineTooLong or ErrEventTooLarge, after which Next can be called again
// (see WithMaxLineBytes). Any other error is the reader's; it and io.EOF are
// sticky, and every later call returns them again.
//
// Next allocates only the strings of the Event it returns: the Data, and the
// Type and ID when they differ from the previous ones.
func (p *Parser) Next() (Event, error) {
	for {
		line, err := p.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if ev, ok := p.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if err := p.field(line); err != nil {
			return Event{}, err
		}
	}
}

// LastEventID returns the stream's last event id: the id of the last event
// block dispatched, which moves on id-only blocks too (blocks with an "id"
// field and no data). It is the value to send as Last-Event-ID when
// reconnecting. It is the WithLastEventID id (empty by default) until the
// stream sends an id.
func (p *Parser) LastEventID() string {
	return p.lastID
}

// Retry returns the reconnection time from the last valid "retry" field of
// the stream, and whether there was one. A value too large for a
// time.Duration is ignored like any other invalid value.
func (p *Parser) Retry() (time.Duration, bool) {
	return p.retry, p.hasRetry
}

// field processes one non-empty line.
func (p *Parser) field(line []byte) error {
	if line[0] == ':' {
		return nil // a comment
	}
	name, value := line, line[len(line):]
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	// Comparing raw bytes is comparing decoded text here: a name with
	// ill-formed bytes decodes to something with U+FFFD in it, which matches
	// none of these names either.
	switch string(name) {
	case "event":
		if !p.discard {
			p.typ = append(p.typ[:0], value...)
		}
	case "data":
		if p.discard {
			return nil
		}
		if len(value)+1 > p.cfg.maxEvent-len(p.data) {
			p.dropEvent()
			return ErrEventTooLarge
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			p.id = append(p.id[:0], value...)
		}
	case "retry":
		if d, ok := parseRetry(value); ok {
			p.retry, p.hasRetry = d, true
		}
	}
	return nil
}

// maxRetryMillis is the largest retry value that fits a time.Duration.
const maxRetryMillis = math.MaxInt64 / int64(time.Millisecond)

// parseRetry interprets a retry value: ASCII digits only, base ten, in
// milliseconds. Anything else ("", "10s", "-1", "1.5", " 5") is rejected, and
// so is a value too large for a time.Duration.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var ms int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
		if ms > maxRetryMillis {
			return 0, false
		}
	}
	return time.Duration(ms) * time.Millisecond, true
}

// dispatch runs the WHATWG "dispatch the event" steps at a blank line and
// reports whether they fire an event.
func (p *Parser) dispatch() (Event, bool) {
	// Step 1: the last event ID string takes the buffer's value, even when
	// no event fires; the buffer itself is not reset.
	moved := !bytes.Equal(p.id, p.lastIDRaw)
	if moved {
		p.lastIDRaw = append(p.lastIDRaw[:0], p.id...)
		p.lastID = decodeUTF8(p.id)
	}
	dropped := p.discard
	p.discard = false
	// Step 2: no data, no event.
	if dropped || len(p.data) == 0 {
		p.data, p.typ = p.data[:0], p.typ[:0]
		if moved && p.cfg.idBlocks {
			return Event{ID: p.lastID}, true
		}
		return Event{}, false
	}
	// Step 3: every data field appended an LF, so there is one to remove.
	ev := Event{Type: "message", Data: decodeUTF8(p.data[:len(p.data)-1]), ID: p.lastID}
	if len(p.typ) > 0 {
		if !bytes.Equal(p.typ, p.lastTypRaw) {
			p.lastTypRaw = append(p.lastTypRaw[:0], p.typ...)
			p.lastTyp = decodeUTF8(p.typ)
		}
		ev.Type = p.lastTyp
	}
	p.data, p.typ = p.data[:0], p.typ[:0]
	return ev, true
}

// dropEvent throws away the event being built after it overflowed a limit.
// The last event ID buffer is kept: it is not part of the event.
func (p *Parser) dropEvent() {
	p.discard = true
	p.data, p.typ = p.data[:0], p.typ[:0]
}

// readLine returns the next line without its line end. The slice aliases the
// read buffer and is valid until the next call. A line ends at CR LF, CR or
// LF; a CR is acted on at once (a server may send "\r\r" and wait), and an LF
// that follows it, in this read or a later one, is skipped.
func (p *Parser) readLine() ([]byte, error) {
	if !p.bomDone {
		p.skipBOM()
	}
	for {
		if p.skipLF && p.r < p.w {
			if p.buf[p.r] == '\n' {
				p.r++
			}
			p.skipLF = false
		}
		end := min(p.find('\r', &p.crMark), p.find('\n', &p.lfMark))
		if end < p.w {
			line := p.buf[p.r:end]
			p.r = end + 1
			p.skipLF = p.buf[end] == '\r'
			if p.skipLine {
				p.skipLine = false // the end of an over-long line
				continue
			}
			if len(line) > p.cfg.maxLine {
				p.dropEvent()
				return nil, ErrLineTooLong
			}
			return line, nil
		}
		// No line end in buf[r:w]: a partial line.
		if p.skipLine {
			p.r = p.w
		} else if p.w-p.r > p.cfg.maxLine {
			p.r = p.w
			p.skipLine = true
			p.dropEvent()
			return nil, ErrLineTooLong
		}
		if p.err != nil {
			// A partial line at the end of the stream is dropped with the
			// event it belongs to.
			return nil, p.err
		}
		p.fill()
	}
}

// find returns the index in buf of the first c in buf[r:w], or w if there is
// none, using and updating the mark that remembers how far buf is known to
// hold no c.
func (p *Parser) find(c byte, mark *int) int {
	i := max(*mark, p.r)
	if i < p.w && p.buf[i] != c {
		if j := bytes.IndexByte(p.buf[i+1:p.w], c); j >= 0 {
			i += 1 + j
		} else {
			i = p.w
		}
	}
	*mark = i
	return i
}

// skipBOM drops a U+FEFF byte order mark at the very start of the stream, as
// the WHATWG "UTF-8 decode" does. It reads only as many bytes as it must to
// tell, so the BOM may arrive split across reads.
func (p *Parser) skipBOM() {
	const bom = "\xEF\xBB\xBF"
	p.bomDone = true
	for i := range len(bom) {
		for p.w-p.r <= i {
			if p.err != nil {
				return
			}
			p.fill()
		}
		if p.buf[p.r+i] != bom[i] {
			return
		}
	}
	p.r += len(bom)
}

// fill makes room in buf and reads once into it, retrying reads that return
// neither bytes nor an error. It must only be called when buf[r:w] holds no
// complete line and no error is pending.
func (p *Parser) fill() {
	switch {
	case p.r == p.w:
		p.r, p.w = 0, 0
		p.crMark, p.lfMark = 0, 0
	case p.w == len(p.buf) && p.r > 0:
		// Slide the partial line to the front; the marks move with it.
		p.w = copy(p.buf, p.buf[p.r:p.w])
		p.crMark = max(p.crMark-p.r, 0)
		p.lfMark = max(p.lfMark-p.r, 0)
		p.r = 0
	case p.w == len(p.buf):
		// The partial line fills buf. It is at most maxLine bytes long (or
		// readLine would have reported it), so buf is below its cap of
		// maxLine+1 bytes and can grow.
		nb := make([]byte, min(2*len(p.buf), p.cfg.maxLine+1))
		p.w = copy(nb, p.buf[:p.w])
		p.buf = nb
	}
	for range maxEmptyReads {
		n, err := p.rd.Read(p.buf[p.w:])
		if n < 0 || n > len(p.buf)-p.w {
			p.err = errBadReadCount
			return
		}
		p.w += n
		if err != nil {
			p.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	p.err = io.ErrNoProgress
}
