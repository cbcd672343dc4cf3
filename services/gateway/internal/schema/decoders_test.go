package schema

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
)

// memSource is an in-memory Source for the table tests of Decoders; registry_test.go runs the same lookups
// against a real registry.
type memSource struct {
	mu      sync.Mutex
	byID    map[int]sr.Schema
	subject map[string]string // "subject/version" -> schema text
	down    bool
	calls   int
	block   chan struct{} // when set, lookups wait for it
}

func (m *memSource) SchemaByID(_ context.Context, id int) (sr.Schema, error) {
	m.mu.Lock()
	m.calls++
	down, block := m.down, m.block
	s, ok := m.byID[id]
	m.mu.Unlock()
	if block != nil {
		<-block
	}
	switch {
	case down:
		return sr.Schema{}, errors.New("connection refused")
	case !ok:
		return sr.Schema{}, &sr.ResponseError{StatusCode: 404, Message: "not found"}
	}
	return s, nil
}

func (m *memSource) SchemaByVersion(_ context.Context, subject string, version int) (sr.SubjectSchema, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	text, ok := m.subject[subject]
	if !ok {
		return sr.SubjectSchema{}, &sr.ResponseError{StatusCode: 404}
	}
	return sr.SubjectSchema{Subject: subject, Version: version, Schema: sr.Schema{Schema: text}}, nil
}

// framed returns v in the wire format with schema id id (and, for Protobuf, the message index).
func framed(id int, index []int, v []byte) []byte {
	out := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	if index != nil {
		if len(index) == 1 && index[0] == 0 {
			out = append(out, 0)
		} else {
			out = protowire.AppendVarint(out, protowire.EncodeZigZag(int64(len(index))))
			for _, i := range index {
				out = protowire.AppendVarint(out, protowire.EncodeZigZag(int64(i)))
			}
		}
	}
	return append(out, v...)
}

const (
	orderAvro  = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"sym","type":"string"}]}`
	orderJSON  = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
	moneyProto = "syntax = \"proto3\";\npackage shop;\nmessage Money { string currency = 1; int64 units = 2; }\n"
	orderProto = "syntax = \"proto3\";\npackage shop;\nimport \"shop/money.proto\";\nimport \"google/protobuf/timestamp.proto\";\nmessage Order {\n  int64 id = 1;\n  Money total = 2;\n  google.protobuf.Timestamp at = 3;\n  message Line { string sku = 1; uint32 qty = 2; }\n  repeated Line lines = 4;\n  Status status = 5;\n}\nenum Status { UNKNOWN = 0; PAID = 1; }\nmessage Other { string x = 1; }\n"
)

func newMem() *memSource {
	return &memSource{
		byID: map[int]sr.Schema{
			1: {Schema: orderAvro, Type: sr.TypeAvro},
			2: {Schema: orderJSON, Type: sr.TypeJSON},
			3: {Schema: orderProto, Type: sr.TypeProtobuf, References: []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money", Version: 1}}},
			4: {Schema: `{"type":"record","name":"Broken","fields":[{"name":"x","type":"nosuchtype"}]}`, Type: sr.TypeAvro},
		},
		subject: map[string]string{"money": moneyProto},
	}
}

// TestDecoders: each format renders through the lookup, and each way a value can fail names its reason.
func TestDecoders(t *testing.T) {
	d := NewDecoders(newMem(), Options{ValidateJSON: true})
	avroValue := framed(1, nil, []byte{0x54, 0x06, 'A', 'B', 'C'}) // id 42, "ABC"
	cases := []struct {
		name   string
		kind   Kind
		v      []byte
		want   string
		reason Reason
	}{
		{"avro", Avro, avroValue, `{"id":42,"sym":"ABC"}`, ""},
		{"json-schema", JSONSchema, framed(2, nil, []byte("{ \"id\": 7,\r\n \"x\": [1, 2] }")), `{"id":7,"x":[1,2]}`, ""},
		{"json-schema invalid", JSONSchema, framed(2, nil, []byte(`{"x":1}`)), "", Invalid},
		{"json-schema not JSON", JSONSchema, framed(2, nil, []byte(`{"id":`)), "", Mismatch},
		{"not framed", Avro, []byte(`{"id":1}`), "", NotFramed},
		{"short header", Avro, []byte{0, 0, 0}, "", NotFramed},
		{"unknown id", Avro, framed(99, nil, []byte{0}), "", UnknownSchema},
		{"wrong kind", Protobuf, framed(1, nil, []byte{0, 0}), "", WrongKind},
		{"schema id 0", Avro, framed(0, nil, []byte{0}), "", NotFramed},
		{"schema id past 2^31-1", Avro, framed(1<<31, nil, []byte{0}), "", NotFramed},
		{"json-schema, no JSON after the header", JSONSchema, framed(2, nil, []byte{0xff}), "", NotFramed},
		{"protobuf, no message indexes", Protobuf, framed(3, nil, nil), "", NotFramed},
		{"bad schema", Avro, framed(4, nil, []byte{0}), "", BadSchema},
		{"avro mismatch", Avro, framed(1, nil, []byte{0x54}), "", Mismatch},
		{"protobuf index out of range", Protobuf, framed(3, []int{7}, nil), "", Mismatch},
	}
	for _, tc := range cases {
		out, err := d.AppendJSON([]byte("data: "), tc.kind, tc.v)
		var e *Error
		switch {
		case tc.reason == "" && (err != nil || string(out) != "data: "+tc.want):
			t.Errorf("%s: %s, %v; want %s", tc.name, out, err, tc.want)
		case tc.reason != "" && (!errors.As(err, &e) || e.Reason != tc.reason || string(out) != "data: "):
			t.Errorf("%s: %q, %v; want reason %s and dst as it was", tc.name, out, err, tc.reason)
		}
	}
}

// TestDecodersBackoff: while the source is down, ids not seen yet fail at once (no caller waits on the
// source), one lookup probes in the background after the backoff, and once the source is back ids decode;
// ids seen before keep decoding throughout.
func TestDecodersBackoff(t *testing.T) {
	src := newMem()
	d := NewDecoders(src, Options{})
	clock := time.Unix(1000, 0)
	var mu sync.Mutex
	d.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(by time.Duration) { mu.Lock(); clock = clock.Add(by); mu.Unlock() }
	// reason waits for the lookup (AppendJSON), reasonNow does not (AppendJSONNow).
	outcome := func(err error) Reason {
		var e *Error
		if errors.As(err, &e) {
			return e.Reason
		}
		return ""
	}
	reason := func(id int) Reason {
		_, err := d.AppendJSON(nil, JSONSchema, framed(id, nil, []byte(`{"id":1}`)))
		return outcome(err)
	}
	reasonNow := func(id int) Reason {
		_, err := d.AppendJSONNow(nil, JSONSchema, framed(id, nil, []byte(`{"id":1}`)))
		return outcome(err)
	}
	if r := reason(2); r != "" {
		t.Fatalf("source up: %s", r)
	}
	src.mu.Lock()
	src.down = true
	src.byID[5] = src.byID[2]
	src.byID[6] = src.byID[2]
	src.mu.Unlock()
	if r := reason(5); r != Unavailable {
		t.Fatalf("source down, first lookup: %s", r)
	}
	calls := src.calls
	for range 100 {
		if r := reason(6); r != Unavailable {
			t.Fatalf("source down, within the backoff: %s", r)
		}
	}
	if src.calls != calls {
		t.Fatalf("%d lookups within the backoff, want none", src.calls-calls)
	}
	if r := reason(2); r != "" {
		t.Fatalf("an id seen before, source down: %s", r)
	}
	// After the backoff one lookup probes, in the background: the caller does not wait for it.
	src.mu.Lock()
	src.down = false
	src.block = make(chan struct{})
	src.mu.Unlock()
	advance(backoffMin)
	start := time.Now()
	if r := reasonNow(6); r != Unavailable || time.Since(start) > time.Second {
		t.Fatalf("the probing lookup: %s after %v, want registry-unavailable at once", r, time.Since(start))
	}
	if r := reasonNow(5); r != Unavailable {
		t.Fatalf("while the probe runs: %s", r)
	}
	close(src.block)
	deadline := time.Now().Add(5 * time.Second)
	for reasonNow(6) != "" {
		if time.Now().After(deadline) {
			t.Fatal("the probe's id never decoded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := reason(5); r != "" {
		t.Fatalf("source back: %s", r)
	}
}

// TestUnknownIDBackoff: an id the source does not know is asked again only after its backoff, which doubles.
func TestUnknownIDBackoff(t *testing.T) {
	src := newMem()
	d := NewDecoders(src, Options{})
	clock := time.Unix(1000, 0)
	d.now = func() time.Time { return clock }
	lookups := func() int { src.mu.Lock(); defer src.mu.Unlock(); return src.calls }
	try := func() { _, _ = d.AppendJSON(nil, Avro, framed(77, nil, []byte{0})) }
	try()
	try()
	if lookups() != 1 {
		t.Fatalf("%d lookups of an unknown id at once, want 1", lookups())
	}
	clock = clock.Add(backoffMin)
	try()
	clock = clock.Add(backoffMin) // the backoff is 2s now
	try()
	if lookups() != 2 {
		t.Fatalf("%d lookups, want 2 (the second backoff is twice the first)", lookups())
	}
	clock = clock.Add(backoffMin)
	try()
	if lookups() != 3 {
		t.Fatalf("%d lookups, want 3", lookups())
	}
	src.mu.Lock()
	src.byID[77] = src.byID[1]
	src.mu.Unlock()
	clock = clock.Add(backoffMax)
	if _, err := d.AppendJSON(nil, Avro, framed(77, nil, []byte{0x02, 0x00})); err != nil {
		t.Fatalf("registered later: %v", err)
	}
}

// TestFiles: schemas by id from a directory, with shared definitions as references.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1.avsc", orderAvro)
	write("3.proto", strings.Replace(orderProto, "shop/money.proto", "money.proto", 1))
	write("money.proto", moneyProto)
	write("2.json", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$ref":"order.json"}`)
	write("order.json", orderJSON)
	files, err := LoadFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoders(files, Options{ValidateJSON: true})
	if out, err := d.AppendJSON(nil, Avro, framed(1, nil, []byte{0x02, 0x02, 'x'})); err != nil || string(out) != `{"id":1,"sym":"x"}` {
		t.Errorf("avro file: %s, %v", out, err)
	}
	if _, err := d.AppendJSON(nil, JSONSchema, framed(2, nil, []byte(`{"x":1}`))); !isReason(err, Invalid) {
		t.Errorf("json file through a $ref: %v, want invalid", err)
	}
	if out, err := d.AppendJSON(nil, Protobuf, framed(3, []int{1}, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "y"))); err != nil || string(out) != `{"x":"y"}` {
		t.Errorf("proto file importing a shared one: %s, %v", out, err)
	}
	if _, err := d.AppendJSON(nil, Avro, framed(9, nil, nil)); !isReason(err, UnknownSchema) {
		t.Errorf("no file of that id: %v", err)
	}
	if _, err := files.SchemaByVersion(context.Background(), "file:../etc/passwd", 1); err == nil {
		t.Error("a reference out of the directory was read")
	}
	// An edit of the directory after it was loaded changes nothing: an id keeps its meaning for the life of
	// the process (and is the same on every pod started from the same files), a new file is not read.
	write("1.avsc", `{"type":"record","name":"Order","fields":[{"name":"other","type":"string"}]}`)
	write("8.avsc", orderAvro)
	d = NewDecoders(files, Options{ValidateJSON: true})
	if out, err := d.AppendJSON(nil, Avro, framed(1, nil, []byte{0x02, 0x02, 'x'})); err != nil || string(out) != `{"id":1,"sym":"x"}` {
		t.Errorf("avro file edited after the load: %s, %v; want the schema as loaded", out, err)
	}
	if _, err := d.AppendJSON(nil, Avro, framed(8, nil, []byte{0x02, 0x02, 'x'})); !isReason(err, UnknownSchema) {
		t.Errorf("a file added after the load: %v, want unknown-schema", err)
	}
	if _, err := LoadFiles(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "schema-files") {
		t.Errorf("a directory that does not exist: %v, want an error naming schema-files", err)
	}
}

func isReason(err error, r Reason) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == r
}

// BenchmarkAppendJSON: what one value of each format costs to render as a frame's data, the schema already
// looked up (as for every record after a schema's first): the header, the lookup in the cache, the decoding.
// The Avro value is testdata/avro/order-event-1 (14 fields, 471 bytes of JSON); the others hold the same kind
// of order.
func BenchmarkAppendJSON(b *testing.B) {
	var order avroCase
	for _, c := range avroCases(b) {
		if c.name == "order-event-1" {
			order = c
		}
	}
	src := newMem()
	src.byID[10] = sr.Schema{Schema: order.schema, Type: sr.TypeAvro}
	src.byID[11] = sr.Schema{Type: sr.TypeJSON, Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{"order_id":{"type":"string"},"customer_id":{"type":"integer"},"status":{"enum":["CREATED","PAID","SHIPPED"]},
		"items":{"type":"array","items":{"type":"object","required":["sku","quantity"]}}},"required":["order_id","status","items"]}`}
	jsonValue := order.json_
	cases := []struct {
		name     string
		kind     Kind
		v        []byte
		validate bool
	}{
		{"avro", Avro, framed(10, nil, order.bin), false},
		{"protobuf", Protobuf, framed(3, []int{0}, protoOrderBytes(b)), false},
		{"json-schema-validated", JSONSchema, framed(11, nil, jsonValue), true},
		{"json-schema-passed-through", JSONSchema, framed(11, nil, jsonValue), false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			d := NewDecoders(src, Options{ValidateJSON: tc.validate})
			buf, err := d.AppendJSON(nil, tc.kind, tc.v)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(tc.v)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = d.AppendJSON(buf[:0], tc.kind, tc.v)
			}
		})
	}
}
