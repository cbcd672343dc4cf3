// Package schema renders record values (and keys) written in a schema registry's wire format as JSON: Avro
// (as plain JSON), Protobuf (its canonical JSON mapping) and JSON Schema (validated, or passed through). A
// value in the wire format is a magic byte 0, a 4-byte big-endian schema id, for Protobuf the message
// indexes, then the payload; the schema is looked up by id in a Source (a registry's REST API, or files) and
// compiled once, then kept.
//
// A value that cannot be rendered is an *Error that names why (Reason): the caller sends such a value as it
// is (see feed.AppendFrame).
//
// Lookups run in the background, one per id however many callers want it, at most maxFlights at once and
// lookupRate new ones a second (after a burst of lookupBurst): AppendJSONNow never waits for one (a value
// whose schema is being looked up fails with Pending), AppendJSON waits for it up to the lookup timeout.
// After a failed lookup, schemas not seen yet fail at once for a backoff (1 s doubling to a minute) while one
// lookup in the background finds out whether the registry is back; an id the registry does not know is asked
// again after a backoff of its own.
//
// Rendering is bounded: its output by a budget that grows with the value (renderBudget), its work by that
// budget and by bounds checked when a schema compiles (decimal precision, JSON Schema fan-out), so that no
// value, whatever its schema, costs more than a bounded multiple of its size.
package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
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
	// Pending: the schema of that id is being looked up (or too many lookups are under way to start one);
	// a later read of the record (a replay from Kafka) decodes it once the lookup is done.
	Pending Reason = "schema-pending"
	// TooLarge: the value's JSON would be longer than its budget (renderBudget).
	TooLarge Reason = "too-large"
)

// Reasons lists every reason, for metrics that start at zero.
var Reasons = [...]Reason{NotFramed, UnknownSchema, Unavailable, BadSchema, WrongKind, Mismatch, Invalid, Pending, TooLarge}

// renderBudget is the longest JSON a value of n bytes may render to: a mebibyte, plus 32 bytes per byte of
// the value (the most a byte of real data takes: a control character in a string is 6, a field name of a
// record of nulls is what its schema says). A schema whose JSON grows faster than its value (named records
// reused at each level, a decimal of a large scale) cannot make one record cost more than that.
func renderBudget(n int) int { return 1<<20 + 32*n }

// errTooLarge is a value whose JSON would exceed renderBudget.
var errTooLarge = errorString("its JSON would exceed the render budget (1 MiB plus 32 bytes per byte of the value)")

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

// errBadID: the 4 bytes after the magic byte are not a schema id (ids are positive 32-bit integers).
var errBadID = errors.New("a schema id out of range (ids are 1 to 2147483647)")

// header splits a wire-format value into its schema id and the rest, after checking what the format allows
// to check before a lookup: the id is a positive 32-bit integer, a Protobuf payload starts with message
// indexes, a JSON Schema payload with a JSON value. A value that fails is not framed, and asks no registry.
func header(k Kind, v []byte) (int, []byte, error) {
	if len(v) < 5 || v[0] != 0 {
		return 0, nil, errNotFramed
	}
	id := binary.BigEndian.Uint32(v[1:5])
	if id == 0 || id > math.MaxInt32 {
		return 0, nil, errBadID
	}
	payload := v[5:]
	switch k {
	case Protobuf:
		if _, _, err := messageIndex(payload); err != nil {
			return 0, nil, fmt.Errorf("no message indexes after the schema id: %w", err)
		}
	case JSONSchema:
		if !startsJSON(payload) {
			return 0, nil, errors.New("no JSON value after the schema id")
		}
	}
	return int(id), payload, nil
}

// startsJSON reports whether b's first byte other than JSON whitespace can start a JSON value.
func startsJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[', '"', '-', 't', 'f', 'n', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return true
		}
		return false
	}
	return false
}

// compiled is a schema ready to render values: one of its fields is set.
type compiled struct {
	kind  Kind
	avro  *avroNode
	proto *protoSchema
	json  *jsonSchema
}

// render appends the JSON of payload, in at most renderBudget(len(payload)) bytes.
func (c *compiled) render(dst, payload []byte) ([]byte, error) {
	limit := len(dst) + renderBudget(len(payload))
	var out []byte
	var err error
	switch c.kind {
	case Avro:
		out, err = renderAvro(dst, c.avro, payload, limit)
	case Protobuf:
		out, err = c.proto.render(dst, payload)
	default:
		out, err = c.json.render(dst, payload)
	}
	if err == nil && len(out) > limit {
		err = errTooLarge
	}
	return out, err
}

// AppendJSON appends to dst the JSON of the wire-format value v, whose schema must be of kind k. A schema
// not known yet is looked up, and AppendJSON waits for it, up to the lookup timeout. On an error dst is
// returned as it was, and the error is an *Error.
func (d *Decoders) AppendJSON(dst []byte, k Kind, v []byte) ([]byte, error) {
	return d.appendJSON(dst, k, v, true)
}

// AppendJSONNow is AppendJSON that never waits: a value whose schema is not known yet fails with Pending
// (or the reason of the schema's last failed lookup), and its lookup starts in the background. The feed
// frames live records with it.
func (d *Decoders) AppendJSONNow(dst []byte, k Kind, v []byte) ([]byte, error) {
	return d.appendJSON(dst, k, v, false)
}

// Await waits until the schema of the wire-format value v (of kind k) is looked up, or deadline: it starts
// the lookup if it has not started. It tells nothing; AppendJSONNow then renders what is known.
func (d *Decoders) Await(k Kind, v []byte, deadline time.Time) {
	if id, _, err := header(k, v); err == nil {
		_, _ = d.lookupWait(id, deadline)
	}
}

// Timeout returns the bound of one lookup (Options.Timeout).
func (d *Decoders) Timeout() time.Duration { return d.opts.Timeout }

func (d *Decoders) appendJSON(dst []byte, k Kind, v []byte, wait bool) ([]byte, error) {
	id, payload, err := header(k, v)
	if err != nil {
		return dst, &Error{Reason: NotFramed, Err: err}
	}
	var c *compiled
	if wait {
		c, err = d.lookupWait(id, time.Time{}) // a lookup ends within its timeout
	} else {
		c, err = d.lookup(id)
	}
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
		} else if errors.Is(err, errTooLarge) {
			reason = TooLarge
		}
		return dst, &Error{Reason: reason, ID: id, Err: err}
	}
	return out, nil
}
