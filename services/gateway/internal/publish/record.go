package publish

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// Record is one record a client asks to publish.
type Record struct {
	Key     []byte // nil: no key
	Value   []byte // nil: a null value (a tombstone on a compacted topic)
	Headers []Header
	// IdemKey is the record's idempotency key: the same key within the window publishes one record. Empty
	// for none.
	IdemKey string
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Limits bound what a client may publish.
type Limits struct {
	MaxKeyBytes     int // the key's bytes
	MaxValueBytes   int // the value's bytes
	MaxHeaderBytes  int // the headers' names and values together
	MaxRecords      int // records in one request
	MaxIdemKeyBytes int // an idempotency key's bytes
}

// DefaultLimits are the gateway's defaults.
var DefaultLimits = Limits{MaxKeyBytes: 4 << 10, MaxValueBytes: 1 << 20, MaxHeaderBytes: 16 << 10, MaxRecords: 500, MaxIdemKeyBytes: 255}

// InputError is a request that cannot be published as it is: nothing of it is published. Status is the HTTP
// status it is answered with (400, 413).
type InputError struct {
	Status int
	Msg    string
}

func (e *InputError) Error() string { return e.Msg }

func badInput(format string, args ...any) error {
	return &InputError{Status: 400, Msg: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) error {
	return &InputError{Status: 413, Msg: fmt.Sprintf(format, args...)}
}

// wireRecord is a record as JSON: key or key_base64, value or value_base64, headers, idempotency_key.
type wireRecord struct {
	Key         *string           `json:"key"`
	KeyBase64   *string           `json:"key_base64"`
	Value       json.RawMessage   `json:"value"`
	ValueBase64 *string           `json:"value_base64"`
	Headers     map[string]string `json:"headers"`
	IdemKey     string            `json:"idempotency_key"`
}

// ParseRecords reads a request body: one record as a JSON object, or {"records": [...]}. idemKey is the
// request's Idempotency-Key header: the key of a single record, or of a batch whose records' keys are it with
// "/<index>" appended (a record's own idempotency_key wins). Every record is checked against lim before any
// is published.
func ParseRecords(body io.Reader, idemKey string, lim Limits) ([]Record, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, badInput("the body is not a JSON object: %v", err)
	}
	var wires []wireRecord
	if batch, ok := probe["records"]; ok {
		if len(probe) != 1 {
			return nil, badInput(`a batch is {"records": [...]} and nothing else`)
		}
		if err := decodeStrict(batch, &wires); err != nil {
			return nil, badInput("records: want a list of records: %v", err)
		}
		if len(wires) == 0 {
			return nil, badInput("records: the list is empty")
		}
	} else {
		var w wireRecord
		if err := decodeStrict(raw, &w); err != nil {
			return nil, badInput("want a record {key, value, headers}: %v", err)
		}
		wires = []wireRecord{w}
	}
	if len(wires) > lim.MaxRecords {
		return nil, tooLarge("%d records in one request; at most %d", len(wires), lim.MaxRecords)
	}
	recs := make([]Record, len(wires))
	seen := map[string]int{}
	for i, w := range wires {
		r, err := w.record(lim)
		if err != nil {
			if len(wires) > 1 {
				var ie *InputError
				if errors.As(err, &ie) {
					ie.Msg = fmt.Sprintf("records[%d]: %s", i, ie.Msg)
				}
			}
			return nil, err
		}
		if r.IdemKey == "" && idemKey != "" {
			r.IdemKey = idemKey
			if len(wires) > 1 {
				r.IdemKey = fmt.Sprintf("%s/%d", idemKey, i)
			}
		}
		if err := checkIdemKey(r.IdemKey, lim); err != nil {
			return nil, err
		}
		if j, dup := seen[r.IdemKey]; dup && r.IdemKey != "" {
			return nil, badInput("records[%d] and records[%d] have the same idempotency key", j, i)
		}
		seen[r.IdemKey] = i
		recs[i] = r
	}
	return recs, nil
}

func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// CheckIdemKey checks an idempotency key from a header.
func CheckIdemKey(k string, lim Limits) error { return checkIdemKey(k, lim) }

func checkIdemKey(k string, lim Limits) error {
	if k == "" {
		return nil
	}
	if len(k) > lim.MaxIdemKeyBytes {
		return badInput("the idempotency key has %d bytes; at most %d", len(k), lim.MaxIdemKeyBytes)
	}
	if !utf8.ValidString(k) || slices.ContainsFunc([]byte(k), func(b byte) bool { return b < 0x20 || b == 0x7f }) {
		return badInput("the idempotency key must be printable UTF-8")
	}
	return nil
}

// record checks a wire record and returns it.
func (w wireRecord) record(lim Limits) (Record, error) {
	var r Record
	var err error
	if r.Key, err = either("key", w.Key, w.KeyBase64); err != nil {
		return r, err
	}
	switch {
	case w.Value != nil && w.ValueBase64 != nil:
		return r, badInput("value and value_base64: give one")
	case w.ValueBase64 != nil:
		if r.Value, err = base64.StdEncoding.DecodeString(*w.ValueBase64); err != nil {
			return r, badInput("value_base64: %v", err)
		}
	case w.Value == nil:
		return r, badInput("value is required (null for a null value)")
	case bytes.Equal(w.Value, []byte("null")):
		r.Value = nil
	case w.Value[0] == '"':
		var s string
		_ = json.Unmarshal(w.Value, &s) // the decoder checked it
		r.Value = []byte(s)
	default:
		var buf bytes.Buffer
		_ = json.Compact(&buf, w.Value) // the decoder checked it
		r.Value = buf.Bytes()
	}
	if r.Value == nil && w.ValueBase64 == nil && !bytes.Equal(w.Value, []byte("null")) {
		r.Value = []byte{}
	}
	for _, k := range sortedKeys(w.Headers) {
		if k == "" {
			return r, badInput("headers: a header has an empty name")
		}
		if k == IdemHeader {
			return r, badInput("headers: %s is the gateway's own; give idempotency_key or the Idempotency-Key header", IdemHeader)
		}
		if err := checkType("header "+k, k, []byte(w.Headers[k])); err != nil {
			return r, err
		}
		r.Headers = append(r.Headers, Header{Key: k, Value: []byte(w.Headers[k])})
	}
	r.IdemKey = w.IdemKey
	return r, checkRecord(r, lim)
}

// checkType refuses a header that names a record's event type (event, ce_type) when its value is one of the
// gateway's own types (feed.Reserved), as a client would read it: such a record would reach readers as a
// frame of the gateway's. what names where the value came from, for the answer.
func checkType(what, header string, value []byte) error {
	if header != feed.HeaderEvent && header != feed.HeaderCEType {
		return nil
	}
	if t, ok := feed.ReservedType(value); ok {
		return &InputError{Status: 400, Msg: fmt.Sprintf("%s: the event type %q is reserved: %s", what, t, feed.ReservedRule)}
	}
	return nil
}

// either returns the bytes of a text or a base64 field, nil when neither is given.
func either(name string, text, b64 *string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, badInput("%s and %s_base64: give one", name, name)
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, badInput("%s_base64: %v", name, err)
		}
		return b, nil
	}
	return nil, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Size is the bytes a record holds: what the pending bound counts.
func (r Record) Size() int {
	n := len(r.Key) + len(r.Value) + len(r.IdemKey)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
