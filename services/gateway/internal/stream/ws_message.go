package stream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// A WebSocket's messages: each SSE frame a stream writes, parsed (parseWSFrame), becomes one JSON message
// (appendMessage), built by hand once per frame and connection.

// wsFrame is an SSE frame's fields.
type wsFrame struct {
	id, event, data []byte
	hasData         bool
	retry           int64 // -1 for none
	meta            []byte
	undecodable     []byte // the undecodable field: why a schema format sent the value as it is
	topic           []byte // the topic line of a stream of several topics (multi.go); nil for none
	comment         bool   // comments alone: a keep-alive
}

func parseWSFrame(frame []byte) wsFrame {
	f := wsFrame{retry: -1}
	var data [][]byte
	for line := range bytes.Lines(frame) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		switch {
		case bytes.HasPrefix(line, metaPrefix[:len(metaPrefix)-1]):
			f.meta = line[len(metaPrefix):]
		case len(line) > 0 && line[0] == ':':
			f.comment = true
		case bytes.HasPrefix(line, []byte("id: ")):
			f.id = line[len("id: "):]
		case bytes.HasPrefix(line, []byte("event: ")):
			f.event = line[len("event: "):]
		case bytes.HasPrefix(line, []byte("data: ")) || bytes.Equal(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
			f.hasData = true
		case bytes.HasPrefix(line, topicLinePrefix):
			f.topic = line[len(topicLinePrefix):]
		case bytes.HasPrefix(line, undecodablePrefix):
			f.undecodable = line[len(undecodablePrefix):]
		case bytes.HasPrefix(line, []byte("retry: ")):
			f.retry, _ = strconv.ParseInt(string(line[len("retry: "):]), 10, 64)
		}
	}
	f.data = bytes.Join(data, []byte("\n"))
	return f
}

// appendMessage appends the JSON message of f, its fields in name order (as encoding/json writes a map). It is
// built by hand: one is built per frame and per connection, and a map through encoding/json cost most of a
// WebSocket delivery.
func (s *wsSink) appendMessage(dst []byte, f wsFrame) []byte {
	event, retry := s.eventOf(f)
	s.opened = true
	m := parseMeta(f.meta)
	isJSON := f.hasData && json.Valid(f.data)
	field := func(dst []byte, name string) []byte {
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, name...)
		return append(dst, '"', ':')
	}
	dst = append(dst, '{')
	if f.hasData {
		dst = appendData(field(dst, "data"), f.data, isJSON)
	}
	if s.o.Format == "cloudevents" {
		if f.hasData {
			ct := "text/plain"
			if isJSON {
				ct = "application/json"
			}
			dst = appendJSONString(field(dst, "datacontenttype"), []byte(ct))
		}
		dst = appendJSONString(field(dst, "id"), f.id)
		if m.ok {
			dst = strconv.AppendInt(field(dst, "kafkaoffset"), m.offset, 10)
			dst = strconv.AppendInt(field(dst, "kafkapartition"), int64(m.partition), 10)
		}
		if retry >= 0 {
			dst = strconv.AppendInt(field(dst, "retry"), retry, 10)
		}
		topic := f.topic
		if topic == nil {
			topic = []byte(s.topic)
		}
		dst = appendJSONString(field(dst, "source"), append([]byte("/topics/"), topic...))
		dst = appendJSONString(field(dst, "specversion"), []byte("1.0"))
		if m.key != nil {
			dst = appendJSONString(field(dst, "subject"), m.key)
		}
		dst = appendJSONString(field(dst, "type"), event)
		if f.undecodable != nil {
			dst = appendJSONString(field(dst, "undecodable"), f.undecodable)
		}
		return append(dst, '}')
	}
	dst = appendJSONString(field(dst, "event"), event)
	dst = appendJSONString(field(dst, "id"), f.id)
	if m.key != nil {
		dst = appendJSONString(field(dst, "key"), m.key)
	}
	if m.ok {
		dst = strconv.AppendInt(field(dst, "offset"), m.offset, 10)
		dst = strconv.AppendInt(field(dst, "partition"), int64(m.partition), 10)
	}
	if retry >= 0 {
		dst = strconv.AppendInt(field(dst, "retry"), retry, 10)
	}
	if f.topic != nil {
		dst = appendJSONString(field(dst, "topic"), f.topic)
	}
	if f.undecodable != nil {
		dst = appendJSONString(field(dst, "undecodable"), f.undecodable)
	}
	return append(dst, '}')
}

// eventOf returns the event of f's message, and the retry it carries (-1 for none): the first position
// without a record is the open message, whatever came before it, and the retry goes with it, also when a
// resync (invalid-id) came first.
func (s *wsSink) eventOf(f wsFrame) (event []byte, retry int64) {
	if !s.openSent && f.retry >= 0 {
		s.retry, s.hasRetry = f.retry, true
	}
	switch {
	case !f.hasData && !s.openSent:
		s.openSent = true
		if s.hasRetry {
			return eventOpen, s.retry
		}
		return eventOpen, -1
	case !f.hasData:
		return eventPosition, -1
	case len(f.event) == 0:
		return eventMessage, -1
	}
	return f.event, -1
}

var undecodablePrefix = []byte(feed.UndecodableField + ": ")

var (
	eventDrain    = []byte(feed.EventDrain)
	eventOpen     = []byte(feed.EventOpen)
	eventPosition = []byte(feed.EventPosition)
	eventMessage  = []byte(feed.MessageEvent)
)

// meta is a record's meta line, parsed.
type meta struct {
	ok        bool
	partition int32
	offset    int64
	key       []byte // as the message shows it: the text, or "base64:" and its base64; nil for none
}

// parseMeta parses "<partition> <offset> <key in base64, or ->".
func parseMeta(line []byte) meta {
	f := bytes.Fields(line)
	if len(f) != 3 {
		return meta{}
	}
	p, err1 := strconv.ParseInt(string(f[0]), 10, 32)
	o, err2 := strconv.ParseInt(string(f[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return meta{}
	}
	m := meta{ok: true, partition: int32(p), offset: o}
	if !bytes.Equal(f[2], []byte("-")) {
		m.key = keyValue(f[2])
	}
	return m
}

// cutUTF8 cuts s to at most n bytes, at a character's start: a close frame's reason must be UTF-8, and a
// client fails the connection on one that is not.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// appendData appends data as JSON when it is JSON (compacted, as encoding/json writes raw JSON), else as a
// string. JSON whose strings hold bytes that are not UTF-8 (encoding/json's Valid takes them) has each such
// byte replaced by U+FFFD, as a string's are: a text message must be UTF-8, and a browser fails the socket on
// one that is not, then resumes into the same record again.
func appendData(dst, data []byte, isJSON bool) []byte {
	if !isJSON {
		return appendJSONString(dst, data)
	}
	if !utf8.Valid(data) {
		data = replaceInvalidUTF8(data)
	}
	if !bytes.ContainsAny(data, " \t\r\n") {
		return append(dst, data...)
	}
	var b bytes.Buffer
	_ = json.Compact(&b, data) // valid: checked
	return append(dst, b.Bytes()...)
}

// appendJSONString appends s as a JSON string, escaped as encoding/json escapes it (HTML characters too,
// invalid UTF-8 replaced); plain printable ASCII, the usual case, is copied as it is.
func appendJSONString(dst, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(string(s)) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// replaceInvalidUTF8 returns b with each byte that is not part of a UTF-8 character replaced by U+FFFD.
func replaceInvalidUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return out
}

// keyValue is a key (base64 in a meta line) as text when it is UTF-8, else "base64:" and its base64, as
// value-format auto writes values.
func keyValue(b64 []byte) []byte {
	k, err := base64.StdEncoding.AppendDecode(nil, b64)
	if err != nil {
		return nil
	}
	if utf8.Valid(k) {
		return k
	}
	return append([]byte("base64:"), b64...)
}
