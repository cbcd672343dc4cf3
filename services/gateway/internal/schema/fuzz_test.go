package schema

import (
	"encoding/json"
	"testing"
)

// FuzzAvroSchema: for any schema that compiles and any value, rendering ends with an error or valid JSON, and
// never writes past the value's budget, whatever the schema makes of the value (records reused at every
// level, decimals of any scale, recursion).
func FuzzAvroSchema(f *testing.F) {
	for _, tc := range avroCases(f) {
		f.Add(tc.schema, tc.bin)
	}
	f.Add(nestedRecords(12), []byte{})
	f.Add(`{"type":"bytes","logicalType":"decimal","precision":1000,"scale":1000}`, []byte{0x04, 0x7f, 0xff})
	f.Add(`{"type":"record","name":"N","fields":[{"name":"next","type":["null","N"]}]}`, []byte{0x02, 0x02, 0x00})
	f.Add(`{"type":"array","items":{"type":"map","values":"null"}}`, []byte{0x7f, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, schema string, v []byte) {
		n, err := compileAvro(schema, nil)
		if err != nil {
			return
		}
		c := &compiled{kind: Avro, avro: n}
		out, err := c.render([]byte("x"), v)
		if len(out) > 1+renderBudget(len(v))+maxDecimalPrecision+64 {
			t.Fatalf("%d bytes rendered, budget %d", len(out), renderBudget(len(v)))
		}
		if err == nil && !json.Valid(out[1:]) {
			t.Fatalf("not JSON: %q", out)
		}
	})
}

// FuzzJSONSchema: a JSON Schema that compiles validates any value without panicking, and what it accepts
// renders as the value compacted.
func FuzzJSONSchema(f *testing.F) {
	f.Add(orderJSON, []byte(`{"id":1}`))
	f.Add(anyOfLevels(6), []byte(`"x"`))
	f.Add(`{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}}}`, []byte(`{"kids":[{"kids":[]}]}`))
	f.Add(`{"oneOf":[{"type":"integer"},{"type":"number","multipleOf":0.5}]}`, []byte(`1.5`))
	f.Fuzz(func(t *testing.T, schema string, v []byte) {
		s, err := compileJSONSchema(schema, nil, true)
		if err != nil {
			return
		}
		out, err := s.render(nil, v)
		if err == nil && (!json.Valid(out) || len(out) > len(v)) {
			t.Fatalf("rendered %q from %q", out, v)
		}
	})
}
