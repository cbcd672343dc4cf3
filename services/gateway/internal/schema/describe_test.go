package schema

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ssegate/ssegate/pkg/registrytest"
)

var testNamer = Namer{Namespace: "t", Prefix: "#/components/schemas/"}

// validator compiles a description the way an AsyncAPI document holds it: definitions under
// components.schemas, the root referring to them.
func validator(t *testing.T, d *Description) *jsonschema.Schema {
	t.Helper()
	doc := map[string]any{
		"$schema":    "http://json-schema.org/draft-07/schema#",
		"components": map[string]any{"schemas": d.Defs},
		"allOf":      []any{d.Root},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem:///doc.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///doc.json")
	if err != nil {
		t.Fatalf("the description does not compile: %v\n%s", err, b)
	}
	return s
}

func valid(s *jsonschema.Schema, value []byte) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(value)))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// TestDescribeAvroFixtures: every datum Apache Avro wrote, rendered as the gateway renders it, is valid under
// the description of its schema; and a description is not a blanket yes: an object of a field no schema has is
// refused by every description of a record.
func TestDescribeAvroFixtures(t *testing.T) {
	for _, tc := range avroCases(t) {
		d, err := Describe(context.Background(), registrytest.Latest{"x-value": {Schema: tc.schema, Type: sr.TypeAvro}}, "x-value", testNamer)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d.Kind != Avro || d.Version != 1 || d.ID != 1 {
			t.Errorf("%s: kind %v version %d id %d", tc.name, d.Kind, d.Version, d.ID)
		}
		s := validator(t, d)
		n, err := compileAvro(tc.schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		rendered, err := renderAvroBudget(nil, n, tc.bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := valid(s, rendered); err != nil {
			t.Errorf("%s: %s is not valid under its description: %v", tc.name, rendered, err)
		}
		if strings.HasPrefix(strings.TrimSpace(tc.schema), `{"type":"record"`) {
			if valid(s, []byte(`{"ssegate-no-such-field":1}`)) == nil {
				t.Errorf("%s: the description accepts an object no record has", tc.name)
			}
		}
	}
}

func TestDescribeAvroTypes(t *testing.T) {
	const text = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"day","type":{"type":"int","logicalType":"date"}},
		{"name":"next","type":["null","Order"]},
		{"name":"tag","type":{"type":"enum","name":"Tag","symbols":["A","B"]}}]}`
	d, err := Describe(context.Background(), registrytest.Latest{"o": {Schema: text, Type: sr.TypeAvro}}, "o", testNamer)
	if err != nil {
		t.Fatal(err)
	}
	s := validator(t, d)
	for value, want := range map[string]bool{
		`{"amount":"12.30","at":"2026-12-04T17:30:00.123Z","day":"2026-12-04","next":null,"tag":"A"}`:                                                                                        true,
		`{"amount":"12.30","at":"2026-12-04T17:30:00.123Z","day":"2026-12-04","next":{"amount":"-0.05","at":"2026-12-04T17:30:00.000Z","day":"2026-01-01","next":null,"tag":"B"},"tag":"A"}`: true,
		`{"amount":"12.3","at":"2026-12-04T17:30:00.123Z","day":"2026-12-04","next":null,"tag":"A"}`:                                                                                         false, // scale 2
		`{"amount":"12.30","at":"2026-12-04T17:30:00.123Z","day":"2026-12-04","next":null,"tag":"C"}`:                                                                                        false, // no such symbol
		`{"amount":"12.30","at":"yesterday","day":"2026-12-04","next":null,"tag":"A"}`:                                                                                                       false,
		`{"amount":"12.30","at":"2026-12-04T17:30:00.123Z","day":"2026-12-04","tag":"A"}`:                                                                                                    false, // every field is written
	} {
		if err := valid(s, []byte(value)); (err == nil) != want {
			t.Errorf("%s: valid %v, want %v (%v)", value, err == nil, want, err)
		}
	}
	if _, ok := d.Defs["t.shop.Order"]; !ok {
		t.Errorf("definitions %v: want t.shop.Order", d.Defs)
	}
}

// TestDescribeProtobuf: a message rendered by the gateway is valid under the description of its schema, and
// values protojson would never write are not.
func TestDescribeProtobuf(t *testing.T) {
	src := registrytest.Latest{
		"orders-value": {Schema: orderProto, Type: sr.TypeProtobuf, References: []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money", Version: 1}}},
		"money":        {Schema: moneyProto, Type: sr.TypeProtobuf},
	}
	d, err := Describe(context.Background(), src, "orders-value", testNamer)
	if err != nil {
		t.Fatal(err)
	}
	s := validator(t, d)
	p, err := compileProto(context.Background(), orderProto, map[string]string{"shop/money.proto": moneyProto})
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := p.render(nil, append([]byte{0}, protoOrderBytes(t)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := valid(s, rendered); err != nil {
		t.Errorf("%s is not valid under its description: %v", rendered, err)
	}
	for _, bad := range []string{
		`{"id":5}`,                // 64-bit integers are strings
		`{"total":{"units":"x"}}`, // nor any string
		`{"status":"SHIPPED"}`,    // no such enum value
		`{"at":"12:00"}`,          // a Timestamp is RFC 3339
		`{"lines":[{"sku":1}]}`,   // a string field
		`{"ssegate_no_such_field":1}`,
	} {
		if valid(s, []byte(bad)) == nil {
			t.Errorf("%s: valid, want refused", bad)
		}
	}
}

// TestDescribeJSONSchema: a JSON Schema describes its values as it is, with its own and its references'
// "$ref"s pointed at their definitions.
func TestDescribeJSONSchema(t *testing.T) {
	src := registrytest.Latest{
		"orders-value": {
			Type: sr.TypeJSON, Schema: `{"$schema":"http://json-schema.org/draft-07/schema#","$id":"https://example.com/order.json",
			"type":"object","properties":{"total":{"$ref":"money.json"},"lines":{"type":"array","items":{"$ref":"#/definitions/line"}}},
			"required":["total"],"definitions":{"line":{"type":"object","required":["sku"]}}}`,
			References: []sr.SchemaReference{{Name: "money.json", Subject: "money", Version: 1}},
		},
		"money": {Type: sr.TypeJSON, Schema: `{"type":"object","properties":{"units":{"$ref":"#/definitions/units"}},"definitions":{"units":{"type":"integer"}}}`},
	}
	d, err := Describe(context.Background(), src, "orders-value", testNamer)
	if err != nil {
		t.Fatal(err)
	}
	s := validator(t, d)
	for value, want := range map[string]bool{
		`{"total":{"units":5},"lines":[{"sku":"a"}]}`: true,
		`{"total":{"units":"5"}}`:                     false, // the reference's own $ref
		`{"total":{},"lines":[{}]}`:                   false, // the document's own $ref
		`{"lines":[]}`:                                false,
	} {
		if err := valid(s, []byte(value)); (err == nil) != want {
			t.Errorf("%s: valid %v, want %v (%v)", value, err == nil, want, err)
		}
	}
}

func TestDescribeUnknownSubject(t *testing.T) {
	_, err := Describe(context.Background(), registrytest.Latest{}, "nope-value", testNamer)
	if err == nil || !strings.Contains(err.Error(), "nope-value") {
		t.Fatalf("err %v: want one naming the subject", err)
	}
}
