package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/registrytest"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
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
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
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
	// The same from the ring and read back from Kafka: the filter sees the JSON on both paths.
	filter := path + "&filter=" + url.QueryEscape(`value.status == "`+order.Status+`"`)
	for _, g := range []*gateway{ringGW, kafkaGW} {
		if filtered := rawFrames(t, ctx, g.url+filter, 1)[0]; !bytes.Equal(filtered, fromRing[3]) {
			t.Errorf("filter on the decoded status %q: %q, want the frame of record 3", order.Status, filtered)
		}
	}
}

// TestRegistryOutage: a gateway whose registry is down at start is ready and streams; records of a schema
// it could not look up arrive, in order, as they are (schema-pending, then registry-unavailable), none lost; once the registry is
// back, after the backoff, records decode again, on the same stream.
func TestRegistryOutage(t *testing.T) {
	regURL := registrytest.URL(t)
	avsc, bin, want := avroFixture(t, "order-event-1")
	id := registrytest.Register(t, registrytest.Subject(t, "outage-value"), "AVRO", avsc)
	target, err := url.Parse(regURL)
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	proxy := httputil.NewSingleHostReverseProxy(target)
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(registry.Close)

	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) {
		c.Values.Format = "avro"
		c.Values.Registry.URLs = []string{registry.URL}
	})
	g.waitReady(t) // the registry is down: readiness does not wait for it
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/streams/"+topic+"?heartbeat=0&from=earliest", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	events := sse.NewParser(resp.Body)

	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	value := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), bin...)
	undecodable, decoded := 0, 0
	for i := 0; decoded < 3; i++ {
		if i == 3 {
			down.Store(false)
		}
		if i > 60 {
			t.Fatalf("%d records undecodable, none decoded after the registry came back", undecodable)
		}
		kafkatest.Produce(t, cl, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value})
		ev, err := events.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		switch {
		case ev.Data == string(want):
			decoded++
		case ev.Data == "base64:"+base64.StdEncoding.EncodeToString(value) && decoded == 0:
			undecodable++
		default:
			t.Fatalf("record %d (%d undecodable, %d decoded before it): %q", i, undecodable, decoded, ev.Data)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if undecodable < 3 {
		t.Errorf("%d records undecodable while the registry was down, want at least 3", undecodable)
	}
	// The first record went out while its lookup was under way (schema-pending), the others while the
	// registry was known to be down.
	pending := metricValue(t, g, "ssegate_values_undecodable_total", `reason="schema-pending"`)
	unavailable := metricValue(t, g, "ssegate_values_undecodable_total", `reason="registry-unavailable"`)
	if int(pending+unavailable) != undecodable || unavailable < 1 {
		t.Errorf("counted %v schema-pending and %v registry-unavailable, the stream had %d undecodable", pending, unavailable, undecodable)
	}
	if code, _ := get(t, g.admin+"/readyz"); code != http.StatusOK {
		t.Errorf("readyz %d", code)
	}
}

// TestSchemaLookupLog: a failed lookup's log names the schema id and the registry's error.
func TestSchemaLookupLog(t *testing.T) {
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error_code":40403,"message":"Schema 4242 not found"}`))
	}))
	t.Cleanup(registry.Close)
	var logs bytes.Buffer
	cfg := Config{Topics: []string{"t"}, Values: valuesDefaults()}
	cfg.Values.Format = "avro"
	cfg.Values.Registry.URLs = []string{registry.URL}
	a := &App{cfg: cfg, log: slog.New(slog.NewJSONHandler(&logs, nil))}
	formats, err := a.formats()
	if err != nil {
		t.Fatal(err)
	}
	// AppendJSON waits for the lookup, which logs before it ends.
	if _, err := formats["t"].Schemas.AppendJSON(nil, schema.Avro, binary.BigEndian.AppendUint32([]byte{0}, 4242)); err == nil {
		t.Fatal("an id the registry does not know decoded")
	}
	var line struct {
		Msg, Reason, Err string
		ID               int `json:"schema_id"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if line.Msg != "schema lookup failed" || line.Reason != "unknown-schema" || line.ID != 4242 || !strings.Contains(line.Err, "Schema 4242 not found") {
		t.Errorf("log %q: want the reason, schema id 4242 and the registry's message", logs.String())
	}
}
