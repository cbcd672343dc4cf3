// Package schema renders record values (and keys) written in a schema registry's wire format as JSON: Avro
// (as plain JSON), Protobuf (its canonical JSON mapping) and JSON Schema (validated, or passed through). A
// value in the wire format is a magic byte 0, a 4-byte big-endian schema id, for Protobuf the message
// indexes, then the payload; the schema is looked up by id in a Source (a registry's REST API, or files) and
// compiled once, then kept.
//
// A value that cannot be rendered is an *Error that names why (Reason): the caller sends such a value as it
// is (see feed.AppendFrame). Lookups never hold a caller long while the registry is down: after a failed
// lookup, schemas not seen yet fail at once for a backoff (1 s doubling to a minute) while one lookup in
// the background finds out whether the registry is back.
package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind is a schema format.
type Kind uint8

// The schema formats.
const (
	Avro Kind = iota + 1
	Protobuf
	JSONSchema
)

// String returns the kind's name as the gateway's settings spell it.
func (k Kind) String() string {
	switch k {
	case Avro:
		return "avro"
	case Protobuf:
		return "protobuf"
	case JSONSchema:
		return "json-schema"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Reason is why a value was not rendered: a short word for metrics, logs and the frame's undecodable field.
type Reason string

// The reasons. docs/gateway.md ("Values that cannot be decoded") says what each means to an operator.
const (
	// NotFramed: the value does not start with the wire format's magic byte 0 and a schema id.
	NotFramed Reason = "not-framed"
	// UnknownSchema: the source has no schema of that id.
	UnknownSchema Reason = "unknown-schema"
	// Unavailable: the registry could not be asked (down, timed out, refused the credentials).
	Unavailable Reason = "registry-unavailable"
	// BadSchema: the schema of that id (or one it references) does not compile.
	BadSchema Reason = "bad-schema"
	// WrongKind: the schema of that id is of another format than the topic's (Protobuf on an Avro topic).
	WrongKind Reason = "wrong-schema-type"
	// Mismatch: the payload is not a datum of its schema (truncated, trailing bytes, out-of-range values).
	Mismatch Reason = "mismatch"
	// Invalid: a JSON Schema value its schema does not accept (with validation on).
	Invalid Reason = "invalid"
)

// Reasons lists every reason, for metrics that start at zero.
var Reasons = [...]Reason{NotFramed, UnknownSchema, Unavailable, BadSchema, WrongKind, Mismatch, Invalid}

// Error is a value that could not be rendered.
type Error struct {
	Reason Reason
	ID     int // the schema id, when the value had one
	Err    error
}

func (e *Error) Error() string {
	if e.Reason == NotFramed {
		return fmt.Sprintf("%s: %v", e.Reason, e.Err)
	}
	return fmt.Sprintf("%s (schema id %d): %v", e.Reason, e.ID, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// errNotFramed: the value is shorter than a header, or its first byte is not the magic byte.
var errNotFramed = errors.New("no wire-format header (magic byte 0 and a 4-byte schema id)")

// header splits a wire-format value into its schema id and the rest.
func header(v []byte) (int, []byte, error) {
	if len(v) < 5 || v[0] != 0 {
		return 0, nil, errNotFramed
	}
	return int(binary.BigEndian.Uint32(v[1:5])), v[5:], nil
}

// compiled is a schema ready to render values: one of its fields is set.
type compiled struct {
	kind  Kind
	avro  *avroNode
	proto *protoSchema
	json  *jsonSchema
}

func (c *compiled) render(dst, payload []byte) ([]byte, error) {
	switch c.kind {
	case Avro:
		return renderAvro(dst, c.avro, payload)
	case Protobuf:
		return c.proto.render(dst, payload)
	}
	return c.json.render(dst, payload)
}

// AppendJSON appends to dst the JSON of the wire-format value v, whose schema must be of kind k. On an
// error dst is returned as it was, and the error is an *Error.
func (d *Decoders) AppendJSON(dst []byte, k Kind, v []byte) ([]byte, error) {
	id, payload, err := header(v)
	if err != nil {
		return dst, &Error{Reason: NotFramed, Err: err}
	}
	c, err := d.lookup(id)
	if err != nil {
		return dst, err
	}
	if c.kind != k {
		return dst, &Error{Reason: WrongKind, ID: id, Err: fmt.Errorf("a %s schema, want %s", c.kind, k)}
	}
	out, err := c.render(dst, payload)
	if err != nil {
		reason := Mismatch
		if ie := (*invalidError)(nil); errors.As(err, &ie) {
			reason = Invalid
		}
		return dst, &Error{Reason: reason, ID: id, Err: err}
	}
	return out, nil
}
