package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/browsertest"
	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/registrytest"
	"github.com/ssegate/ssegate/pkg/sse"
)

const asyncAPIOrderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"long"},{"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
	{"name":"note","type":["null","string"]}]}`

// TestAsyncAPIDocument: the gateway binary's /asyncapi.json, read by the AsyncAPI project's own parser, names
// the topics the request may read (a topic that needs a token only with a token that allows it; a bad token
// is a 401), with the registry's schema as the Avro topic's payload; a record the gateway sends is valid under
// that payload; and `gateway asyncapi` prints the document of every topic.
func TestAsyncAPIDocument(t *testing.T) {
	reg := registrytest.URL(t)
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	orders, private, logs := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	id := registrytest.Register(t, orders+"-value", "AVRO", asyncAPIOrderSchema)
	secret := filepath.Join(t.TempDir(), "secret")
	key := bytes.Repeat([]byte("k"), 32)
	if err := os.WriteFile(secret, key, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--topics", strings.Join([]string{orders, private, logs}, ","),
		"--topic-value-format", orders + "=avro", "--schema-registry-url", reg,
		"--auth", "none", "--topic-auth", private + "=required", "--auth-algorithms", "HS256", "--auth-hmac-secret-file", secret,
	}
	clients, _ := blackBoxGateway(t, brokers, args...)

	doc, status := getDoc(t, "http://"+clients+"/asyncapi.json", "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, doc)
	}
	if got := parsedChannels(t, doc); !slices.Equal(got, sorted("/streams/"+orders, "/ws/"+orders, "/streams/"+logs, "/ws/"+logs, "/streams/{topics}")) {
		t.Errorf("channels without a token: %v", got)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"exp": time.Now().Add(time.Hour).Unix(), "ssegate": map[string]any{"topics": []string{private}},
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	withToken, _ := getDoc(t, "http://"+clients+"/asyncapi.json", "Bearer "+tok)
	if got := parsedChannels(t, withToken); !slices.Contains(got, "/streams/"+private) || len(got) != 7 {
		t.Errorf("channels with a token for %s: %v", private, got)
	}
	if body, status := getDoc(t, "http://"+clients+"/asyncapi.json", "Bearer "+tok+"x"); status != http.StatusUnauthorized {
		t.Errorf("a bad token: status %d, %s", status, body)
	}

	// A record the gateway sends is valid under the document's payload for it.
	payload := payloadValidator(t, doc, orders)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(orders))
	value := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	value = append(value, 0x54, 0x04, 0x04, 0xD2, 0x02, 0x06, 'h', 'i', '!') // id 42, total 12.34, note "hi!"
	// The first live record of a schema id a pod has not looked up yet goes out undecodable (schema-pending:
	// the feed never waits on the registry); records after the lookup are decoded. So records are produced
	// until one comes decoded.
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for {
			kafkatest.Produce(t, cl, &kgo.Record{Key: []byte("o-1"), Value: value})
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	data := decodedData(t, "http://"+clients+"/streams/"+orders+"?from=earliest")
	close(stop)
	<-produced
	if data != `{"id":42,"total":"12.34","note":"hi!"}` {
		t.Fatalf("the record's data: %s", data)
	}
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatal(err)
	}
	if err := payload.Validate(v); err != nil {
		t.Errorf("the record the gateway sent is not valid under its document's payload: %v", err)
	}
	if err := payload.Validate(map[string]any{"id": 42, "total": "12.3", "note": nil}); err == nil {
		t.Error("the payload accepts a decimal of the wrong scale")
	}

	// The command line: every topic, whatever the token.
	cmd := exec.CommandContext(t.Context(), gatewayBinary(t), append([]string{"asyncapi", "--asyncapi-host", "streams.example"}, args...)...)
	cmd.Env = append(os.Environ(), "KAFKA_BROKERS="+brokers)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gateway asyncapi: %v", err)
	}
	if got := parsedChannels(t, out); len(got) != 7 {
		t.Errorf("gateway asyncapi: channels %v", got)
	}
	if !bytes.Contains(out, []byte(`"host": "streams.example"`)) {
		t.Errorf("gateway asyncapi does not name the asyncapi-host")
	}
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// getDoc GETs url with the Authorization header auth (none when empty).
func getDoc(t *testing.T, url, auth string) ([]byte, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, resp.StatusCode
}

// parsedChannels parses doc with the AsyncAPI parser, fails t on any error, and returns its channels'
// addresses, sorted.
func parsedChannels(t *testing.T, doc []byte) []string {
	t.Helper()
	res := browsertest.ParseAsyncAPI(t, doc)
	if len(res.Errors) > 0 {
		t.Fatalf("the AsyncAPI parser: %+v", res.Errors)
	}
	var out []string
	for _, c := range res.Channels {
		out = append(out, c.Address)
	}
	slices.Sort(out)
	return out
}

// payloadValidator compiles the payload of topic's record message in doc, resolving its references in doc.
func payloadValidator(t *testing.T, doc []byte, topic string) *jsonschema.Schema {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	d["$schema"] = "http://json-schema.org/draft-07/schema#"
	d["$ref"] = "#/components/messages/record." + topic + "/payload"
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem:///doc.json", d); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///doc.json")
	if err != nil {
		t.Fatalf("the payload of %s: %v", topic, err)
	}
	return s
}

// decodedData opens an event stream and returns the data of its first event that is not undecodable (the
// frame's undecodable field, and its value as auto writes it: "base64:...").
func decodedData(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	done := time.AfterFunc(30*time.Second, func() { _ = resp.Body.Close() })
	defer done.Stop()
	p := sse.NewParser(resp.Body)
	for {
		ev, err := p.Next()
		if err != nil {
			t.Fatalf("no decoded event: %v", err)
		}
		if !strings.HasPrefix(ev.Data, "base64:") {
			return ev.Data
		}
	}
}
