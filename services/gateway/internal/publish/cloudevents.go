package publish

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// A WebSocket client's message becomes a record as CloudEvents' Kafka protocol binding (binary mode) writes an
// event: the data is the value, every attribute a ce_ header (ce_type, ce_source, ...), datacontenttype the
// content-type header, and the partitionkey extension the key. A structured CloudEvent (JSON with specversion,
// id, source and type) is published as that event, its source and id (unique together, by the spec) its
// idempotency key; any other message is the data of a new event of type "message", with a new id.

// ceName is a CloudEvents attribute name.
var ceName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// FromMessage returns the record of a client's message, published through source (the stream's path).
func FromMessage(msg []byte, source string, lim Limits) (Record, error) {
	var attrs map[string]json.RawMessage
	if json.Unmarshal(msg, &attrs) == nil && attrs["specversion"] != nil {
		return fromCloudEvent(attrs, lim)
	}
	r := Record{Value: bytes.Clone(msg)}
	ct := "text/plain"
	if json.Valid(msg) {
		ct = "application/json"
	}
	r.Headers = []Header{
		{"ce_specversion", []byte("1.0")},
		{"ce_id", []byte(newID())},
		{"ce_source", []byte(source)},
		{"ce_type", []byte("message")},
		{"content-type", []byte(ct)},
	}
	return r, checkRecord(r, lim)
}

// fromCloudEvent maps a structured CloudEvent.
func fromCloudEvent(attrs map[string]json.RawMessage, lim Limits) (Record, error) {
	var r Record
	str := func(name string) (string, error) {
		var s string
		if err := json.Unmarshal(attrs[name], &s); err != nil || s == "" {
			return "", badInput("a CloudEvent's %s must be a non-empty string", name)
		}
		return s, nil
	}
	for _, name := range []string{"specversion", "id", "source", "type"} {
		if _, err := str(name); err != nil {
			return r, err
		}
	}
	if v, _ := str("specversion"); v != "1.0" {
		return r, badInput("CloudEvents specversion %q: only 1.0", v)
	}
	data, hasData := attrs["data"]
	b64, hasB64 := attrs["data_base64"]
	switch {
	case hasData && hasB64:
		return r, badInput("a CloudEvent has data or data_base64, not both")
	case hasB64:
		var s string
		if err := json.Unmarshal(b64, &s); err != nil {
			return r, badInput("data_base64 must be a string")
		}
		v, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return r, badInput("data_base64: %v", err)
		}
		r.Value = v
	case hasData && data[0] == '"':
		var s string
		_ = json.Unmarshal(data, &s) // valid: it came out of Unmarshal
		r.Value = []byte(s)
	case hasData:
		var buf bytes.Buffer
		_ = json.Compact(&buf, data)
		r.Value = buf.Bytes()
	default:
		r.Value = []byte{}
	}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "data" || name == "data_base64" {
			continue
		}
		if !ceName.MatchString(name) {
			return r, badInput("CloudEvents attribute %q: names are 1 to 20 lower-case letters or digits", name)
		}
		v, err := attrText(attrs[name])
		if err != nil {
			return r, badInput("CloudEvents attribute %s: %v", name, err)
		}
		switch name {
		case "datacontenttype":
			r.Headers = append(r.Headers, Header{"content-type", []byte(v)})
		case "partitionkey":
			r.Key = []byte(v)
		case "type":
			if err := checkType("CloudEvents type", feed.HeaderCEType, []byte(v)); err != nil {
				return r, err
			}
			r.Headers = append(r.Headers, Header{"ce_" + name, []byte(v)})
		default:
			r.Headers = append(r.Headers, Header{"ce_" + name, []byte(v)})
		}
	}
	src, _ := str("source")
	id, _ := str("id")
	r.IdemKey = src + " " + id
	if len(r.IdemKey) > lim.MaxIdemKeyBytes {
		r.IdemKey = "" // too long to remember: published as it is
	}
	return r, checkRecord(r, lim)
}

// attrText is an attribute's value as text: a string as it is, a number or boolean as JSON writes it.
func attrText(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case float64, bool:
		return strings.TrimSpace(string(raw)), nil
	}
	return "", fmt.Errorf("want a string, number or boolean")
}

// checkRecord checks a record's sizes against lim.
func checkRecord(r Record, lim Limits) error {
	hb := 0
	for _, h := range r.Headers {
		hb += len(h.Key) + len(h.Value)
	}
	switch {
	case len(r.Key) > lim.MaxKeyBytes:
		return tooLarge("the key has %d bytes; at most %d", len(r.Key), lim.MaxKeyBytes)
	case len(r.Value) > lim.MaxValueBytes:
		return tooLarge("the value has %d bytes; at most %d", len(r.Value), lim.MaxValueBytes)
	case hb > lim.MaxHeaderBytes:
		return tooLarge("the headers have %d bytes; at most %d", hb, lim.MaxHeaderBytes)
	}
	return nil
}

// newID returns a random event id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
