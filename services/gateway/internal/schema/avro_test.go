package schema

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// avroCase is a fixture of testdata/avro: a schema, one datum Apache Avro wrote in it, and the JSON the
// generator (testdata/avro/gen) says docs/gateway.md's mapping gives for it.
type avroCase struct {
	name       string
	schema     string
	bin, json_ []byte
}

func avroCases(t testing.TB) []avroCase {
	t.Helper()
	list, err := os.ReadFile(filepath.Join("testdata", "avro", "cases.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []avroCase
	for _, name := range strings.Fields(string(list)) {
		read := func(ext string) []byte {
			b, err := os.ReadFile(filepath.Join("testdata", "avro", name+ext))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		out = append(out, avroCase{name, string(read(".avsc")), read(".bin"), bytes.TrimSpace(read(".json"))})
	}
	if len(out) < 50 {
		t.Fatalf("%d Avro fixtures, want the whole set", len(out))
	}
	return out
}

// TestAvroFixtures: every datum Apache Avro wrote renders as the mapping says, byte for byte.
func TestAvroFixtures(t *testing.T) {
	for _, tc := range avroCases(t) {
		n, err := compileAvro(tc.schema, nil)
		if err != nil {
			t.Fatalf("%s: compile: %v", tc.name, err)
		}
		got, err := renderAvroBudget([]byte("prefix:"), n, tc.bin)
		if err != nil || string(got) != "prefix:"+string(tc.json_) {
			t.Errorf("%s:\n got %s (%v)\nwant prefix:%s", tc.name, got, err, tc.json_)
		}
	}
}

// TestAvroMismatch: a datum cut short, or with bytes after it, is not a datum of its schema: an error, never a
// partial rendering taken for the value.
func TestAvroMismatch(t *testing.T) {
	for _, tc := range avroCases(t) {
		n, err := compileAvro(tc.schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := renderAvroBudget(nil, n, append(bytes.Clone(tc.bin), 0x02)); err == nil {
			t.Errorf("%s with a byte after the datum: no error", tc.name)
		}
		if len(tc.bin) > 0 {
			if _, err := renderAvroBudget(nil, n, tc.bin[:len(tc.bin)-1]); err == nil {
				t.Errorf("%s cut short by a byte: no error", tc.name)
			}
		}
	}
}

// TestAvroHostile: counts and lengths that claim more than the value holds fail at once, without the work
// or the memory they claim.
func TestAvroHostile(t *testing.T) {
	cases := []struct {
		name, schema string
		v            []byte
	}{
		{"array of nulls, 2^62 of them", `{"type":"array","items":"null"}`, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
		{"string longer than the value", `"string"`, []byte{0x80, 0x08, 'a'}},
		{"negative length", `"bytes"`, []byte{0x01}},
		{"union branch out of range", `["null","string"]`, []byte{0x04}},
		{"enum symbol out of range", `{"type":"enum","name":"E","symbols":["A"]}`, []byte{0x02}},
		{"boolean of 2", `"boolean"`, []byte{0x02}},
		{"int beyond 32 bits", `"int"`, []byte{0x80, 0x80, 0x80, 0x80, 0x20}},
		{"time of day beyond the day", `{"type":"int","logicalType":"time-millis"}`, []byte{0x80, 0xd0, 0xac, 0xf3, 0x0e}},
		{"a varint of 11 bytes", `"long"`, bytes.Repeat([]byte{0x80}, 11)},
	}
	for _, tc := range cases {
		n, err := compileAvro(tc.schema, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if out, err := renderAvroBudget(nil, n, tc.v); err == nil {
			t.Errorf("%s: rendered %s, want an error", tc.name, out)
		}
	}
	// A recursive schema nests only as deep as maxAvroDepth, whatever the bytes say.
	n, err := compileAvro(`{"type":"record","name":"N","fields":[{"name":"next","type":["null","N"]}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renderAvroBudget(nil, n, append(bytes.Repeat([]byte{0x02}, 10000), 0x00)); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Errorf("10,000 levels: %v, want the depth bound", err)
	}
}

// TestAvroNamesPerSchema: two schemas of the same name with other fields (two versions of one subject) each
// render with their own fields: named types are not shared between ids.
func TestAvroNamesPerSchema(t *testing.T) {
	v1, err1 := compileAvro(`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`, nil)
	v2, err2 := compileAvro(`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string"}]}`, nil)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	a, _ := renderAvroBudget(nil, v1, []byte{0x04})
	b, _ := renderAvroBudget(nil, v2, []byte{0x04, 0x02, 'x'})
	if string(a) != `{"id":2}` || string(b) != `{"id":2,"note":"x"}` {
		t.Errorf("v1 %s, v2 %s", a, b)
	}
}

// BenchmarkRenderAvro: the cost of one realistic value (testdata/avro/order-event-1, 14 fields).
func BenchmarkRenderAvro(b *testing.B) {
	var tc avroCase
	for _, c := range avroCases(b) {
		if c.name == "order-event-1" {
			tc = c
		}
	}
	n, err := compileAvro(tc.schema, nil)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(tc.bin)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = renderAvroBudget(buf[:0], n, tc.bin)
	}
}

// renderAvroBudget is renderAvro within the budget of v, as compiled.render calls it.
func renderAvroBudget(dst []byte, n *avroNode, v []byte) ([]byte, error) {
	return renderAvro(dst, n, v, len(dst)+renderBudget(len(v)))
}
