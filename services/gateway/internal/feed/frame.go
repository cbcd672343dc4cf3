package feed

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
)

// Record headers that name a record's SSE event type, in order of preference: ssegate's own, then the
// CloudEvents Kafka binding's binary-mode type.
const (
	HeaderEvent  = "event"
	HeaderCEType = "ce_type"
)

// DeleteEvent is the event type of the frame for a tombstone (a record with a null value); its data is the key.
const DeleteEvent = "delete"

// MessageEvent is the event type of a frame without an "event:" line, SSE's default type.
const MessageEvent = "message"

var deleteType = []byte(DeleteEvent)

// AppendFrame appends to dst the SSE frame for rec with the given id: "event:" from the record's event type
// (omitted when it has none), the value as "data:" in the value format vf. A tombstone becomes an
// "event: delete" frame whose data is the key, in the same format.
//
// The event type is written as a client reads it back (see RecordType), so the bytes of the "event:" line
// are the type a browser, and the gateway's own event filter, see. The frame depends only on id, rec and vf,
// so a record framed live into the ring and read back from Kafka for a resume gives the same bytes.
func AppendFrame(dst, id []byte, rec *kgo.Record, vf ValueFormat) []byte {
	typ, v := deleteType, rec.Key
	if rec.Value != nil {
		typ, v = clientType(EventType(rec.Headers)), rec.Value
	}
	if vf.encodes(v) {
		return appendBase64Event(dst, id, typ, v)
	}
	return sse.AppendEventBytes(dst, id, typ, v)
}

// EventType returns the record's SSE event type: the value of its first "event" header, else of its first
// "ce_type" header, else nil (the default type, "message"). The value is returned as the header holds it;
// RecordType says what a client sees of it.
func EventType(headers []kgo.RecordHeader) []byte {
	var ce []byte
	for i := range headers {
		switch headers[i].Key {
		case HeaderEvent:
			return headers[i].Value
		case HeaderCEType:
			if ce == nil {
				ce = headers[i].Value
			}
		}
	}
	return ce
}

// RecordType returns the event type of rec's frame exactly as a client sees it, the type the event filter
// (the event query parameter) matches: DeleteEvent for a tombstone, MessageEvent when the record has no
// event type (or an empty one), else its event type with CR and LF each replaced by U+FFFD (the writer does
// that so that a header cannot end the line) and ill-formed UTF-8 decoded as a browser decodes it (one U+FFFD
// per maximal ill-formed subsequence). The frame's "event:" line holds these bytes, so reading the type back
// from a frame gives the same string.
func RecordType(rec *kgo.Record) string {
	if rec.Value == nil {
		return DeleteEvent
	}
	if t := clientType(EventType(rec.Headers)); len(t) > 0 {
		return string(t)
	}
	return MessageEvent
}

// lineEnds replaces what the SSE writer replaces in an event type.
var lineEnds = strings.NewReplacer("\r", "\uFFFD", "\n", "\uFFFD")

// clientType returns the event type t as a client reads it back from an "event:" line: CR and LF replaced by
// U+FFFD and ill-formed UTF-8 decoded as the WHATWG decoder does. It returns t itself, without allocating,
// when t is already that (valid UTF-8 without line ends, every type in practice).
func clientType(t []byte) []byte {
	if utf8.Valid(t) && bytes.IndexByte(t, '\r') < 0 && bytes.IndexByte(t, '\n') < 0 {
		return t
	}
	return []byte(lineEnds.Replace(sse.DecodeUTF8(t)))
}
