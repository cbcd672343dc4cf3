package asyncapi

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ssegate/ssegate/pkg/browsertest"
	"github.com/ssegate/ssegate/pkg/registrytest"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
)

func describe(t *testing.T, topic string, s sr.Schema) *schema.Description {
	t.Helper()
	d, err := schema.Describe(context.Background(), registrytest.Latest{topic + "-value": s}, topic+"-value", Namer(topic))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func testSpec(t *testing.T) Spec {
	const order = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},
		{"name":"next","type":["null","Order"]},{"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}]}`
	const price = "syntax = \"proto3\";\npackage shop;\nimport \"google/protobuf/timestamp.proto\";\n" +
		"message Price { string sku = 1; int64 cents = 2; google.protobuf.Timestamp at = 3; map<string, Price> related = 4; }\n"
	return Spec{
		Title: "ssegate", AppVersion: "test", Host: "gateway.example:8080", Cookie: "ssegate_token", QueryToken: true,
		Topics: []Topic{
			{Name: "orders", Auth: "required", ValueFormat: "avro", Schema: describe(t, "orders", sr.Schema{Schema: order, Type: sr.TypeAvro})},
			{Name: "prices", Auth: "optional", ValueFormat: "protobuf", Schema: describe(t, "prices", sr.Schema{Schema: price, Type: sr.TypeProtobuf})},
			{Name: "logs/app 1", Auth: "none", ValueFormat: "auto"},
			{Name: "shipments", Auth: "none", ValueFormat: "json-schema", SchemaNote: "the registry has no subject shipments-value"},
		},
	}
}

// TestDocumentParses: the AsyncAPI project's own parser reads the document without an error, and finds each
// topic's two channels with their messages.
func TestDocumentParses(t *testing.T) {
	doc, err := json.Marshal(testSpec(t).Document())
	if err != nil {
		t.Fatal(err)
	}
	res := browsertest.ParseAsyncAPI(t, doc)
	if len(res.Errors) > 0 {
		t.Fatalf("the parser found errors: %+v\n%s", res.Errors, doc)
	}
	for _, w := range res.Warnings {
		t.Logf("warning: %+v", w)
	}
	channels := map[string]browsertest.Channel{}
	for _, c := range res.Channels {
		channels[c.ID] = c
	}
	for id, address := range map[string]string{
		"orders": "/streams/orders", "ws.orders": "/ws/orders", "logs_app_1": "/streams/logs/app 1",
		"shipments": "/streams/shipments", "streams": "/streams/{topics}",
	} {
		c, ok := channels[id]
		if !ok || c.Address != address {
			t.Errorf("channel %s: %+v, want address %s (channels %+v)", id, c, address, res.Channels)
		}
	}
	if m := channels["orders"].Messages; !slices.Contains(m, "record") || !slices.Contains(m, "resync") || !slices.Contains(m, "token-expired") {
		t.Errorf("orders' messages %v: want record, resync, token-expired among them", m)
	}
}

// TestDocumentInvalid: the parser test above can fail: a document the parser must refuse is refused.
func TestDocumentInvalid(t *testing.T) {
	d := testSpec(t).Document()
	d["channels"].(obj)["orders"].(obj)["messages"].(obj)["record"] = ref("components", "messages", "no-such-message")
	doc, _ := json.Marshal(d)
	if res := browsertest.ParseAsyncAPI(t, doc); len(res.Errors) == 0 {
		t.Fatal("a reference to no message: no error")
	}
}

// TestDocumentContent: payloads, security and schemas land where a reader of the document looks for them.
func TestDocumentContent(t *testing.T) {
	s := testSpec(t)
	d := s.Document()
	comp := d["components"].(obj)
	msgs, schemas := comp["messages"].(obj), comp["schemas"].(obj)
	if p := msgs["record.orders"].(obj)["payload"]; p.(map[string]any)["$ref"] != "#/components/schemas/topic.orders.shop.Order" {
		t.Errorf("orders' payload %v", p)
	}
	for _, k := range []string{"topic.orders.shop.Order", "topic.prices.shop.Price", "ssegate.Resync", "ssegate.PositionID"} {
		if _, ok := schemas[k]; !ok {
			t.Errorf("no schema %s among %v", k, keys(schemas))
		}
	}
	ops := d["operations"].(obj)
	if sec := ops["receive.orders"].(obj)["security"].([]any); len(sec) != 3 {
		t.Errorf("a required topic's security %v: want bearer, cookie, queryToken", sec)
	}
	if sec := ops["receive.logs_app_1"].(obj)["security"].([]any); len(sec) != 0 {
		t.Errorf("a public topic's security %v: want none", sec)
	}
	note := msgs["record.shipments"].(obj)["description"].(string)
	if !strings.Contains(note, "no subject shipments-value") {
		t.Errorf("a schema topic without its schema does not say why: %s", note)
	}
	s.QueryToken = false
	if _, ok := s.Document()["components"].(obj)["securitySchemes"].(obj)["queryToken"]; ok {
		t.Error("queryToken described while the query token is off")
	}
}

func keys(m obj) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
