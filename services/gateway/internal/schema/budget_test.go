package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// nestedRecords is an Avro schema of depth levels in which each record holds two fields of the record one
// level down: a value of zero bytes renders to JSON twice as long at each level.
func nestedRecords(depth int) string {
	s := `{"type":"record","name":"L0","fields":[{"name":"x","type":"null"}]}`
	for i := 1; i <= depth; i++ {
		s = fmt.Sprintf(`{"type":"record","name":"L%d","fields":[{"name":"a","type":%s},{"name":"b","type":"L%d"}]}`, i, s, i-1)
	}
	return s
}

// TestRenderBudget: a value whose JSON would outgrow its budget fails with too-large, having written no more
// than the budget, however its schema multiplies it; a value within it renders.
func TestRenderBudget(t *testing.T) {
	for _, depth := range []int{4, 20} {
		src := newMem()
		src.byID[10] = sr.Schema{Schema: nestedRecords(depth), Type: sr.TypeAvro}
		d := NewDecoders(src, Options{})
		out, err := d.AppendJSON([]byte("x"), Avro, framed(10, nil, nil))
		switch {
		case depth == 4 && (err != nil || !json.Valid(out[1:])):
			t.Errorf("depth 4: %v", err)
		case depth == 20 && (!isReason(err, TooLarge) || string(out) != "x"):
			t.Errorf("depth 20 (2^20 records of an empty value): %d bytes, %v; want too-large", len(out), err)
		}
	}
	n, err := compileAvro(nestedRecords(20), nil)
	if err != nil {
		t.Fatal(err)
	}
	limit := renderBudget(0)
	out, err := renderAvro(nil, n, nil, limit)
	if !errors.Is(err, errTooLarge) || len(out) > limit+64 {
		t.Errorf("rendered %d bytes before stopping (%v), want about the budget, %d", len(out), err, limit)
	}
}

// TestDecimalBounds: a decimal's precision is bounded when its schema compiles, and a value of more digits
// than its precision is refused before the work its length would cost; an invalid decimal logical type
// renders its underlying bytes.
func TestDecimalBounds(t *testing.T) {
	if _, err := compileAvro(`{"type":"bytes","logicalType":"decimal","precision":10000000,"scale":10000000}`, nil); err == nil {
		t.Error("a decimal of scale 10^7 compiled")
	}
	n, err := compileAvro(`{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		b    []byte
		want string // "" for an error
	}{
		{"9999", []byte{0x27, 0x0f}, `"99.99"`},
		{"-9999", []byte{0xd8, 0xf1}, `"-99.99"`},
		{"10000: five digits", []byte{0x27, 0x10}, ""},
		{"sign extension is no digit", []byte{0x00, 0x00, 0x00, 0x27, 0x0f}, `"99.99"`},
		{"a mebibyte", append([]byte{0x01}, make([]byte, 1<<20)...), ""},
	}
	for _, tc := range cases {
		v := appendLong(nil, int64(len(tc.b)))
		out, err := renderAvro(nil, n, append(v, tc.b...), 1<<30)
		if tc.want == "" && !errors.Is(err, errDecimalPrecision) || tc.want != "" && (err != nil || string(out) != tc.want) {
			t.Errorf("%s: %s, %v; want %s", tc.name, out, err, cmpOr(tc.want, "more digits than the precision"))
		}
	}
	// Scale above precision: not a valid decimal, so its bytes (base64), not an unscaled integer.
	n, err = compileAvro(`{"type":"bytes","logicalType":"decimal","precision":2,"scale":3}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := renderAvro(nil, n, []byte{0x02, 0x01}, 1<<20); err != nil || string(out) != `"AQ=="` {
		t.Errorf("an invalid decimal: %s, %v; want its bytes, \"AQ==\"", out, err)
	}
}

// TestYearsOfRFC3339: dates and timestamps outside the years 0000 to 9999, which RFC 3339 cannot write, are
// refused; the years at the edges render.
func TestYearsOfRFC3339(t *testing.T) {
	ts, _ := compileAvro(`{"type":"long","logicalType":"timestamp-millis"}`, nil)
	date, _ := compileAvro(`{"type":"int","logicalType":"date"}`, nil)
	cases := []struct {
		name string
		n    *avroNode
		v    int64
		want string
	}{
		{"9999-12-31T23:59:59.999", ts, 253402300799999, `"9999-12-31T23:59:59.999Z"`},
		{"year 10000", ts, 253402300800000, ""},
		{"year 0", ts, -62167219200000, `"0000-01-01T00:00:00.000Z"`},
		{"year -1", ts, -62167219200001, ""},
		{"date 9999-12-31", date, 2932896, `"9999-12-31"`},
		{"date in year 10000", date, 2932897, ""},
		{"date in year -1", date, -719529, ""},
	}
	for _, tc := range cases {
		out, err := renderAvro(nil, tc.n, appendLong(nil, tc.v), 1<<20)
		if tc.want == "" && !errors.Is(err, errYear) || tc.want != "" && (err != nil || string(out) != tc.want) {
			t.Errorf("%s: %s, %v; want %s", tc.name, out, err, cmpOr(tc.want, "an error"))
		}
	}
}

// anyOfLevels is a JSON Schema in which each of depth definitions is anyOf the next one twice.
func anyOfLevels(depth int) string {
	var defs []string
	for i := range depth {
		defs = append(defs, fmt.Sprintf(`"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"l%d":{"type":"string"}`, depth))
	return `{"$defs":{` + strings.Join(defs, ",") + `},"$ref":"#/$defs/l0"}`
}

// TestJSONSchemaFanOut: a schema whose validation fans out exponentially does not compile; a recursive
// schema (a tree) and a reasonable one do.
func TestJSONSchemaFanOut(t *testing.T) {
	if _, err := compileJSONSchema(anyOfLevels(18), nil, true); err == nil || !strings.Contains(err.Error(), "subschemas") {
		t.Errorf("anyOf twice at 18 levels: %v, want the fan-out bound", err)
	}
	s, err := compileJSONSchema(anyOfLevels(8), nil, true)
	if err != nil {
		t.Fatalf("anyOf twice at 8 levels: %v", err)
	}
	if out, err := s.render(nil, []byte(`"x"`)); err != nil || string(out) != `"x"` {
		t.Errorf("8 levels: %s, %v", out, err)
	}
	tree := `{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"}}}}`
	s, err = compileJSONSchema(tree, nil, true)
	if err != nil {
		t.Fatalf("a recursive schema: %v", err)
	}
	if _, err := s.render(nil, []byte(`{"v":1,"kids":[{"v":2,"kids":[]}]}`)); err != nil {
		t.Errorf("a tree: %v", err)
	}
}

func appendLong(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
