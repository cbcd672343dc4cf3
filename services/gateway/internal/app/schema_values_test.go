package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/registrytest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// avroFixture reads a case of the schema package's Avro fixtures (values written by Apache Avro).
func avroFixture(t *testing.T, name string) (schema string, bin, want []byte) {
	t.Helper()
	dir := filepath.Join("..", "schema", "testdata", "avro")
	read := func(ext string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name+ext))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return string(read(".avsc")), read(".bin"), bytes.TrimSpace(read(".json"))
}

// TestAvroTopic: on a real broker with a real schema registry, an avro topic's records reach clients as JSON,
// the same bytes from the ring and from Kafka; records that cannot be decoded (not in the wire format, an id
// the registry does not know) arrive as they are with the undecodable field and are counted, and the
// partition goes on past them; a value filter sees the decoded JSON.
func TestAvroTopic(t *testing.T) {
	regURL := registrytest.URL(t)
	avsc, bin1, json1 := avroFixture(t, "order-event-1")
	_, bin2, json2 := avroFixture(t, "order-event-2")
	id := registrytest.Register(t, registrytest.Subject(t, "orders-value"), "AVRO", avsc)
	wire := func(id int, v []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), v...)
	}

	topic := kafkatest.NewTopic(t, 1, nil)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	recs := []*kgo.Record{
		{Key: []byte("o-1"), Value: wire(id, bin1)},
		{Key: []byte("o-2"), Value: []byte(`{"plain":"json"}`)},
		{Key: []byte("o-3"), Value: wire(1<<30, bin2)},
		{Key: []byte("o-4"), Value: wire(id, bin2)},
		{Key: []byte("o-5")},
	}
	for _, r := range recs {
		kafkatest.Produce(t, cl, r)
	}
	withAvro := func(c *Config) {
		c.Values.TopicFormats = map[string]string{topic: "avro"}
		c.Values.Registry.URLs = []string{regURL}
	}
	ringGW := startGateway(t, []string{topic}, withAvro)
	kafkaGW := startGateway(t, []string{topic}, func(c *Config) { withAvro(c); c.Prefill = 0 })
	ringGW.waitReady(t)
	kafkaGW.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	path := "/streams/" + topic + "?heartbeat=0&from=earliest"
	fromRing := rawFrames(t, ctx, ringGW.url+path, len(recs))
	fromKafka := rawFrames(t, ctx, kafkaGW.url+path, len(recs))
	want := []struct{ data, undecodable string }{
		{string(json1), ""},
		{`{"plain":"json"}`, "not-framed"},
		{"base64:" + base64.StdEncoding.EncodeToString(wire(1<<30, bin2)), "unknown-schema"},
		{string(json2), ""},
		{"o-5", ""},
	}
	for i, w := range want {
		if !bytes.Equal(fromRing[i], fromKafka[i]) {
			t.Errorf("record %d: from the ring %q, from Kafka %q", i, fromRing[i], fromKafka[i])
		}
		ev, err := sse.NewParser(bytes.NewReader(fromRing[i])).Next()
		if err != nil {
			t.Fatal(err)
		}
		undecodable := ""
		for line := range strings.SplitSeq(string(fromRing[i]), "\n") {
			if v, ok := strings.CutPrefix(line, "undecodable: "); ok {
				undecodable = v
			}
		}
		if ev.Data != w.data || undecodable != w.undecodable {
			t.Errorf("record %d: data %q undecodable %q, want %q and %q", i, ev.Data, undecodable, w.data, w.undecodable)
		}
		if w.undecodable == "" && i < 4 && !json.Valid([]byte(ev.Data)) {
			t.Errorf("record %d: data is not JSON: %q", i, ev.Data)
		}
	}
	for _, reason := range []string{"not-framed", "unknown-schema"} {
		if v := metricValue(t, ringGW, "ssegate_values_undecodable_total", `topic="`+topic+`"`, `reason="`+reason+`"`); v != 1 {
			t.Errorf("undecodable %s: %v, want 1", reason, v)
		}
	}
	if v := metricValue(t, ringGW, "ssegate_schema_lookups_total", `result="ok"`); v != 1 {
		t.Errorf("lookups ok: %v, want 1 (one schema id, looked up once)", v)
	}

	// A value filter over the decoded JSON: only order-event-2 has status SHIPPED.
	var order struct{ Status string }
	if err := json.Unmarshal(json2, &order); err != nil || order.Status == "" {
		t.Fatalf("fixture order-event-2: %v %q", err, order.Status)
	}
	filtered := rawFrames(t, ctx, ringGW.url+path+"&filter="+url.QueryEscape(`value.status == "`+order.Status+`"`), 1)[0]
	if !bytes.Equal(filtered, fromRing[3]) {
		t.Errorf("filter on the decoded status %q: %q, want the frame of record 3", order.Status, filtered)
	}
}
