package feed

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
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

// Format is how a topic's records become frame data: the value format of its values and of its keys (a
// tombstone's data), and the schema decoders of the schema formats. A Format is shared, read-only, by the
// feed and the streams of the topic.
type Format struct {
	Value, Key ValueFormat
	// Schemas decodes the schema formats; nil when neither format is one.
	Schemas *schema.Decoders
	// Undecodable, when set, is told of every value (or key) a schema format could not decode.
	Undecodable func(schema.Reason)
}

// Plain is the Format of a topic whose values and keys are both written in vf, one that is not a schema
// format.
func Plain(vf ValueFormat) *Format { return &Format{Value: vf, Key: vf} }

// UndecodableField is the SSE field of a frame whose value a schema format could not decode, written before
// its data (base64 as ValueAuto writes it): its value is the schema.Reason. EventSource ignores fields it does
// not know; other clients, and the gateway's WebSocket transport, read it.
const UndecodableField = "undecodable"

// AppendFrame appends to dst the SSE frame for rec with the given id: "event:" from the record's event type
// (omitted when it has none; a reserved type, one of the gateway's own, with RenamedPrefix before it), the
// value as "data:" in f.Value. A tombstone becomes an "event: delete" frame
// whose data is the key, in f.Key.
//
// The event type is written as a client reads it back (see RecordType), so the bytes of the "event:" line
// are the type a browser, and the gateway's own event filter, see. The frame depends only on id, rec and f,
// so a record framed live into the ring and read back from Kafka for a resume gives the same bytes; with a
// schema format, only while the schema's lookup has the same outcome (a value framed while the registry was
// down, or while its schema was being looked up, undecodable, decodes when read again once it is known).
//
// AppendFrame waits for the lookup of a schema not known yet, up to the lookup timeout: it frames records read
// back from Kafka. The feed frames live records without waiting (see Topic.publish).
func AppendFrame(dst, id []byte, rec *kgo.Record, f *Format) []byte {
	return f.appendFrame(dst, id, rec, true)
}

// appendFrame is AppendFrame; without wait a value whose schema is not known yet is framed undecodable at
// once (schema.Pending) while its lookup runs in the background.
func (f *Format) appendFrame(dst, id []byte, rec *kgo.Record, wait bool) []byte {
	typ, v, vf := deleteType, rec.Key, f.Key
	if rec.Value != nil {
		typ, v, vf = recordType(EventType(rec.Headers)), rec.Value, f.Value
	}
	if k := vf.Schema(); k != 0 {
		return f.appendDecoded(dst, id, typ, v, k, wait)
	}
	if vf.encodes(v) {
		return appendBase64Event(dst, id, typ, v)
	}
	return sse.AppendEventBytes(dst, id, typ, v)
}

// FilterValue returns rec's value as a value filter sees it in rec's frame (the frame's data, decoded from
// base64 when the frame encodes it): under a schema format the JSON it decodes to, appended to scratch, which
// is returned grown, with decoded true; else (and for a value it cannot decode) the value itself, or, when its
// frame carries it as lines of text, with each line end (CR, LF, CRLF) an LF, as the frame's data lines give it
// back. So a filter sees one value whether the record comes from the ring or is read back from Kafka. Nil for
// a tombstone. A decoded value is what AppendDecodedFrame takes, so that the frame does not decode it again.
func (f *Format) FilterValue(scratch []byte, rec *kgo.Record) (value, grown []byte, decoded bool) {
	if rec.Value == nil {
		return nil, scratch, false
	}
	vf := f.Value
	if k := vf.Schema(); k != 0 {
		out, err := f.Schemas.AppendJSON(scratch[:0], k, rec.Value)
		if err == nil {
			return out, out, true
		}
		vf = ValueAuto // an undecodable value is framed as ValueAuto frames it
	}
	v := rec.Value
	if vf.encodes(v) || bytes.IndexByte(v, '\r') < 0 {
		return v, scratch, false
	}
	out := scratch[:0]
	for i := 0; i < len(v); i++ {
		if v[i] != '\r' {
			out = append(out, v[i])
			continue
		}
		out = append(out, '\n')
		if i+1 < len(v) && v[i+1] == '\n' {
			i++
		}
	}
	return out, out, false
}

// AppendDecodedFrame is AppendFrame for a record whose value FilterValue decoded to json (decoded true): the
// same bytes, without decoding the value a second time. With decoded false it is AppendFrame.
func AppendDecodedFrame(dst, id []byte, rec *kgo.Record, f *Format, json []byte, decoded bool) []byte {
	if !decoded || rec.Value == nil || f.Value.Schema() == 0 {
		return AppendFrame(dst, id, rec, f)
	}
	out, _ := appendJSONFrame(dst, id, clientType(EventType(rec.Headers)), func(dst []byte) ([]byte, error) {
		return append(dst, json...), nil
	})
	return out
}

// appendJSONFrame appends the frame of a decoded value: the event's lines, then the JSON render appends as
// one data line (JSON has no line ends). On an error it returns dst with the event's lines up to its data
// (dataAt is where they end), for the caller to complete.
func appendJSONFrame(dst, id, typ []byte, render func(dst []byte) ([]byte, error)) (out []byte, err error) {
	// The event's lines up to its data: what the writer writes for empty data, less "data:\n\n".
	dst = sse.AppendEventBytes(dst, id, typ, nil)
	dataAt := len(dst) - len("data:\n\n")
	out, err = render(append(dst[:dataAt], "data: "...))
	if err != nil {
		return dst, err
	}
	return append(out, "\n\n"...), nil
}

// appendDecoded appends the frame of a value of a schema format: its JSON as one data line (the JSON has
// no line ends), or, when it cannot be decoded, the value as ValueAuto writes it, after the undecodable field.
func (f *Format) appendDecoded(dst, id, typ, v []byte, k schema.Kind, wait bool) []byte {
	start := len(dst)
	render := f.Schemas.AppendJSONNow
	if wait {
		render = f.Schemas.AppendJSON
	}
	dst, err := appendJSONFrame(dst, id, typ, func(dst []byte) ([]byte, error) { return render(dst, k, v) })
	if err == nil {
		return dst
	}
	dataAt := len(dst) - len("data:\n\n")
	reason := schema.Mismatch
	var e *schema.Error
	if errors.As(err, &e) {
		reason = e.Reason
	}
	if f.Undecodable != nil {
		f.Undecodable(reason)
	}
	if SafeText(v) {
		dst = sse.AppendEventBytes(dst[:start], id, typ, v)
	} else {
		dst = appendBase64Event(dst[:start], id, typ, v)
	}
	return slices.Insert(dst, dataAt, []byte(UndecodableField+": "+string(reason)+"\n")...)
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
// per maximal ill-formed subsequence), and with RenamedPrefix before it when that is a reserved type (see
// Reserved). The frame's "event:" line holds these bytes, so reading the type back from a frame gives the same
// string.
func RecordType(rec *kgo.Record) string {
	if rec.Value == nil {
		return DeleteEvent
	}
	if t := recordType(EventType(rec.Headers)); len(t) > 0 {
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
