package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/coder/websocket"

	"github.com/ssegate/ssegate/pkg/sse"
)

// WebSocket streams (--proto=ws): GET /ws/{topic} with the query of /streams/{topic}, one TCP connection per
// stream, spoken with github.com/coder/websocket. The upgrade request goes out on the same raw connection an
// HTTP/1.1 event stream uses (roundTripH1: source address, receive buffer, closed when the stream's context
// ends); coder/websocket takes the connection over after the 101. Every message is JSON (docs/gateway.md,
// "WebSocket"): the first is "open", with the stream's starting position; then records and the gateway's own
// events. wsEvent maps each message to the event an event stream would have carried for it (the same id,
// event type and data), and it goes through the same begin and event as an SSE frame: tracker, counters,
// latency histogram.
const protoWS = "ws"

// wsReadLimit bounds one message the tool takes: a value of --size's 1 MiB maximum, escaped as a JSON string
// at worst, with its fields.
const wsReadLimit = 8 << 20

// wsKind is what a message means to the checks.
type wsKind int

const (
	wsOpen     wsKind = iota + 1 // the stream's opening position: as the opening block of an event stream
	wsFrame                      // a record, or one of the gateway's events (resync, token-expiring): as an SSE frame
	wsPosition                   // the position moves without a record: as an id-only block, which no event reports
)

// wsMessage is the part of a message the checks read; the gateway's other fields (key, partition, offset)
// are not needed: the id says where the record is.
type wsMessage struct {
	Event string          `json:"event"`
	ID    *string         `json:"id"`
	Data  json.RawMessage `json:"data"`
}

// wsEvent maps one message of the gateway's WebSocket transport to the event an event stream carries for it:
// the same id (the position vector, exactly the SSE id: of the same record), the event type ("message" for a
// record without one, resync, ...) and data: a JSON value as its JSON text, a string (a value that is not
// JSON) as the string. Values the tool produces are JSON objects, so their data is what the event stream
// sends and sendTime reads it alike. hasID is false for a message without an id (the contract gives every
// message one); an event stream's event would carry the last id then, which the caller supplies.
//
// Messages as the gateway writes them (encoding/json, no escapes in the fields read) are read by scanWS
// without decoding: encoding/json costs about 2 us a message, eight times what the checks cost, which at
// 100,000 deliveries a second is a fifth of a core the gateway would not get. Anything else goes through
// encoding/json (wsEventJSON), which gives the same answers (TestWSEvent checks both) and the errors.
func wsEvent(msg []byte) (kind wsKind, ev sse.Event, hasID bool, err error) {
	if m, ok := scanWS(msg); ok {
		return m.event()
	}
	return wsEventJSON(msg)
}

// wsEventJSON is wsEvent by encoding/json.
func wsEventJSON(msg []byte) (wsKind, sse.Event, bool, error) {
	var m wsMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return 0, sse.Event{}, false, fmt.Errorf("message is not a JSON object: %w", err)
	}
	f := wsFields{eventName: m.Event, data: m.Data}
	if m.ID != nil {
		f.id, f.hasID = *m.ID, true
	}
	return f.event()
}

// wsFields are a message's fields as read: data as raw JSON.
type wsFields struct {
	eventName string
	id        string
	hasID     bool
	data      []byte
}

func (f wsFields) event() (wsKind, sse.Event, bool, error) {
	ev := sse.Event{ID: f.id}
	switch f.eventName {
	case "":
		return 0, sse.Event{}, false, errors.New(`message without "event"`)
	case "open":
		if !f.hasID {
			return 0, sse.Event{}, false, errors.New(`"open" message without "id"`)
		}
		return wsOpen, ev, true, nil
	case "position", "drain": // drain: the stream's last message before the gateway closes it, at its position
		if !f.hasID {
			return 0, sse.Event{}, false, fmt.Errorf("%q message without \"id\"", f.eventName)
		}
		return wsPosition, ev, true, nil
	}
	ev.Type = f.eventName
	switch {
	case len(f.data) == 0:
	case f.data[0] == '"':
		if s, ok := plainString(f.data); ok {
			ev.Data = s
		} else if err := json.Unmarshal(f.data, &ev.Data); err != nil {
			return 0, sse.Event{}, false, fmt.Errorf("data: %w", err)
		}
	default:
		ev.Data = string(f.data)
	}
	return wsFrame, ev, f.hasID, nil
}

// plainString is the value of a JSON string without escapes ("abc"), or false.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	for _, c := range b[1 : len(b)-1] {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	return string(b[1 : len(b)-1]), true
}

// scanWS reads a message's event, id and data (raw) from a flat JSON object as encoding/json writes it: keys
// and the event and id strings without escapes, data any JSON value (its strings, objects and arrays
// skipped, not checked further). false for anything else, which wsEventJSON then reads.
func scanWS(b []byte) (wsFields, bool) {
	var f wsFields
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return f, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return f, skipWS(b, i+1) == len(b)
	}
	for {
		kEnd := skipString(b, i)
		if kEnd < 0 {
			return f, false
		}
		key, ok := plainString(b[i:kEnd])
		if !ok {
			return f, false
		}
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return f, false
		}
		i = skipWS(b, i+1)
		vEnd := skipValue(b, i)
		if vEnd < 0 {
			return f, false
		}
		v := b[i:vEnd]
		switch key {
		case "event", "id":
			if len(v) < 2 || v[0] != '"' {
				return f, false // null, a number: encoding/json says what it makes of them
			}
			switch {
			case key == "event" && string(v) == `"message"`: // the common names without a copy
				f.eventName = "message"
			case key == "event" && string(v) == `"open"`:
				f.eventName = "open"
			default:
				s, ok := plainString(v)
				if !ok {
					return f, false // escapes
				}
				if key == "event" {
					f.eventName = s
				} else {
					f.id, f.hasID = s, true
				}
			}
		case "data":
			f.data = v
		}
		i = skipWS(b, vEnd)
		if i >= len(b) {
			return f, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return f, skipWS(b, i+1) == len(b)
		default:
			return f, false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the JSON string at b[i] (past its closing quote), or -1.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			i++
		case c < 0x20:
			return -1
		}
	}
	return -1
}

// skipValue returns the end of the JSON value at b[i], or -1: strings, objects and arrays by their
// delimiters, numbers and literals up to the next delimiter.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		var st [32]byte
		stack := st[:0] // the closing delimiters expected
		for i < len(b) {
			switch c := b[i]; c {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				stack = append(stack, c+2) // '{'+2 == '}', '['+2 == ']'
			case '}', ']':
				if len(stack) == 0 || stack[len(stack)-1] != c {
					return -1
				}
				if stack = stack[:len(stack)-1]; len(stack) == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	lit := b[start:i]
	switch string(lit) {
	case "true", "false", "null":
		return i
	case "":
		return -1
	}
	// A number: its characters (their order is not checked).
	for _, c := range lit {
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			return -1
		}
	}
	return i
}

// wsStreamURL is the stream's URL with the id to resume from (a storm's reconnect) as last_event_id: a
// WebSocket request carries no Last-Event-ID header.
func wsStreamURL(raw, lastID string) (string, error) {
	if lastID == "" {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("last_event_id", lastID)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// wsTransport is the http.RoundTripper of one WebSocket handshake: it sends the upgrade request on a TCP
// connection of the stream's own (roundTripH1), and a 101's body is that connection, read through the
// buffer that read the response header, for coder/websocket to take over.
type wsTransport struct {
	c    *client
	o    connOpts
	done func() // closes the connection; set once the request went out
}

func (t *wsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	h, err := t.c.roundTripH1(req.Context(), req, t.o)
	if err != nil {
		return nil, err
	}
	t.done = h.done
	if h.resp.StatusCode == http.StatusSwitchingProtocols {
		h.resp.Body = &wsConn{r: h.br, Conn: h.conn}
	}
	return h.resp, nil
}

// wsConn is the upgraded connection: reads drain the response header's buffer first.
type wsConn struct {
	r *bufio.Reader
	net.Conn
}

func (c *wsConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// streamWS opens one WebSocket stream and reads it until ctx ends or the stream fails: the "open" message
// first, then every message through wsEvent into the checks an event stream's frames go through. With
// o.wsAckEvery it acknowledges every that many messages (the last one's id: acknowledgements are cumulative).
func (c *client) streamWS(ctx context.Context, sh *shared, o connOpts) error {
	c.requested = time.Time{}
	c.firstFrame = time.Time{}
	u, err := wsStreamURL(o.url, o.lastID)
	if err != nil {
		return err
	}
	tr := &wsTransport{c: c, o: o}
	//nolint:bodyclose // coder/websocket: a dial's response has no body left to close; a refusal's is read below
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if tr.done != nil {
		defer tr.done()
	}
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		}
		return fmt.Errorf("websocket: %w", err)
	}
	defer func() { _ = ws.CloseNow() }()
	ws.SetReadLimit(wsReadLimit)
	// The connection is closed when ctx ends (roundTripH1), which ends a read in progress: reading with a
	// context that never ends spares coder/websocket a timer per message.
	rctx := context.WithoutCancel(ctx)

	var (
		buf     bytes.Buffer // one message, reused
		n       int64        // message bytes read
		idBytes int64
		ack     []byte
	)
	defer func() {
		sh.bodyBytes.Add(n)
		sh.idBytes.Add(idBytes)
	}()
	next := func() ([]byte, error) {
		typ, r, err := ws.Reader(rctx)
		if err != nil {
			return nil, c.wsEnd(ctx, err)
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return nil, c.wsEnd(ctx, err)
		}
		n += int64(buf.Len())
		if typ != websocket.MessageText {
			return nil, fmt.Errorf("stream: binary message of %d bytes, want JSON text", buf.Len())
		}
		return buf.Bytes(), nil
	}

	msg, err := next()
	if err != nil {
		return err
	}
	kind, ev, _, err := wsEvent(msg)
	if err != nil {
		return fmt.Errorf("opening message: %w", err)
	}
	if kind != wsOpen {
		return fmt.Errorf("opening message: unexpected event %q before the opening id", ev.Type)
	}
	if err := c.begin(sh, ev.ID, o); err != nil {
		return err
	}
	defer sh.openConns.Add(-1)

	lastID, unacked := ev.ID, 0
	for {
		msg, err := next()
		if err != nil {
			return err
		}
		kind, ev, hasID, err := wsEvent(msg)
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		if !hasID {
			ev.ID = lastID
		}
		lastID = ev.ID
		switch kind {
		case wsOpen:
			return errors.New(`stream: a second "open" message`)
		case wsPosition:
			continue
		}
		if err := c.event(sh, ev, o.measure); err != nil {
			return err
		}
		idBytes += int64(len(ev.ID))
		if o.wsAckEvery == 0 {
			continue
		}
		// Every message with data waits for an acknowledgement, the gateway's events too.
		if unacked++; unacked < o.wsAckEvery {
			continue
		}
		ack = appendAck(ack[:0], ev.ID)
		if err := ws.Write(rctx, websocket.MessageText, ack); err != nil {
			return c.wsEnd(ctx, err)
		}
		sh.wsAcks.Add(1)
		unacked = 0
	}
}

// wsEnd is how a stream that could not be read further ended: nil for our own cancel, else the error, with
// the gateway's close code and reason when it closed the stream.
func (c *client) wsEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if code := websocket.CloseStatus(err); code != -1 {
		return fmt.Errorf("stream: closed by the gateway (%d): %w", code, err)
	}
	return fmt.Errorf("stream: %w", err)
}

// appendAck appends the acknowledgement of id, {"ack":"<id>"}. Position ids (v1 vectors, base64url compact
// ones) need no escaping; anything else is escaped by encoding/json.
func appendAck(dst []byte, id string) []byte {
	dst = append(dst, `{"ack":`...)
	plain := true
	for i := range len(id) {
		if b := id[i]; b < 0x20 || b > 0x7e || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			plain = false
			break
		}
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, id...)
		dst = append(dst, '"')
	} else {
		q, _ := json.Marshal(id) // a string always marshals
		dst = append(dst, q...)
	}
	return append(dst, '}')
}
