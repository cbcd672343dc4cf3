package feed

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
)

// ValueFormat says how a record's value (a tombstone's key) becomes the data of its frame. The zero value is
// ValueAuto.
//
// SSE data is UTF-8 text in which every CR, LF and CR LF ends a line, and a client decodes ill-formed UTF-8
// to U+FFFD: a value with a CR, or bytes that are not UTF-8 (Avro, Protobuf, compressed JSON), cannot reach a
// browser as it is. ValueAuto and ValueBase64 write such values as Base64Prefix followed by their standard
// base64, which a page decodes back to the exact bytes (see docs/gateway.md, "Values").
type ValueFormat uint8

const (
	// ValueAuto writes a value that is safe text (see SafeText) as it is and any other value base64-encoded
	// after Base64Prefix. Every value round-trips exactly; text values read as text.
	ValueAuto ValueFormat = iota
	// ValueText writes every value as it is, as data lines: CR and CR LF reach the client as LF and
	// ill-formed UTF-8 as U+FFFD. Lossy for such values; the format before value formats existed.
	ValueText
	// ValueBase64 writes every value base64-encoded after Base64Prefix, text or not.
	ValueBase64
	// ValueAvro decodes values of a schema registry's wire format with their Avro schema and writes them as
	// JSON (package schema); a value that cannot be decoded is written as ValueAuto writes it, with an
	// "undecodable:" field that says why (see Format).
	ValueAvro
	// ValueProtobuf is ValueAvro for Protobuf schemas (canonical JSON).
	ValueProtobuf
	// ValueJSONSchema is ValueAvro for JSON Schema (validated, or passed through).
	ValueJSONSchema
)

// formatNames are the formats' names, as ParseValueFormat takes them.
var formatNames = [...]string{
	ValueAuto: "auto", ValueText: "text", ValueBase64: "base64",
	ValueAvro: "avro", ValueProtobuf: "protobuf", ValueJSONSchema: "json-schema",
}

// Base64Prefix starts the data of a frame whose value is base64-encoded: the rest of the data is the value
// in standard base64 (RFC 4648 section 4, with padding), on one line. Under ValueAuto and ValueBase64 a
// frame's data starts with it exactly when the value is encoded: ValueAuto encodes a text value that itself
// starts with it, so data that starts with it is never a value as it is.
const Base64Prefix = "base64:"

// ParseValueFormat returns the format named by s: "auto", "text", "base64", "avro", "protobuf" or
// "json-schema".
func ParseValueFormat(s string) (ValueFormat, error) {
	for f, name := range formatNames {
		if s == name {
			return ValueFormat(f), nil
		}
	}
	return ValueAuto, fmt.Errorf("%w: want auto, text, base64, avro, protobuf or json-schema, got %q", ErrValueFormat, s)
}

// String returns the format's name, as ParseValueFormat takes it.
func (f ValueFormat) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("ValueFormat(%d)", uint8(f))
}

// Schema returns the schema format f decodes, or 0 for the formats that write values as they are.
func (f ValueFormat) Schema() schema.Kind {
	switch f {
	case ValueAvro:
		return schema.Avro
	case ValueProtobuf:
		return schema.Protobuf
	case ValueJSONSchema:
		return schema.JSONSchema
	}
	return 0
}

// Data returns how a client reads the data of f's frames, as the browser client's decodeValue takes it:
// "text" for ValueText, else "base64" for ValueBase64, else "auto" (a decoded value is JSON text, and one
// that could not be decoded comes base64-encoded after Base64Prefix, as under ValueAuto).
func (f ValueFormat) Data() string {
	switch f {
	case ValueText, ValueBase64:
		return f.String()
	}
	return ValueAuto.String()
}

// SafeText reports whether ValueAuto writes v as it is: v is valid UTF-8 without NUL and without CR (which a
// client cannot tell from LF), and does not start with Base64Prefix. Such a value reaches a client as exactly
// its text; LF, empty lines, leading spaces and an empty value all survive the data lines.
//
// NUL would survive a browser's EventSource, but it is where text handling in other clients and tools (C
// strings, terminals, log pipelines) is least reliable, and a value that holds one is almost always binary.
func SafeText(v []byte) bool {
	return !bytes.HasPrefix(v, []byte(Base64Prefix)) &&
		bytes.IndexByte(v, '\r') < 0 && bytes.IndexByte(v, 0) < 0 && utf8.Valid(v)
}

// encodes reports whether f writes v base64-encoded.
func (f ValueFormat) encodes(v []byte) bool {
	switch f {
	case ValueText:
		return false
	case ValueBase64:
		return true
	}
	return !SafeText(v) // ValueAuto, and the schema formats' undecodable values
}

// appendBase64Event appends an event like sse.AppendEventBytes whose data is Base64Prefix and the base64 of
// v, without an intermediate buffer.
func appendBase64Event(dst, id, typ, v []byte) []byte {
	// With empty data the writer ends the event with "data:\n\n", an empty data line and the blank line;
	// the data line is completed in place.
	dst = sse.AppendEventBytes(dst, id, typ, nil)
	dst = append(dst[:len(dst)-len("\n\n")], ' ')
	dst = append(dst, Base64Prefix...)
	dst = base64.StdEncoding.AppendEncode(dst, v)
	return append(dst, "\n\n"...)
}
