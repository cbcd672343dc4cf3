package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
)

// publishingPage is a page of another origin than the gateway's (an app that places orders through it): its
// publish(url, idempotencyKey, body) POSTs body as JSON with an Idempotency-Key, which makes the request one a
// browser preflights, and returns what the page could read of the answer (the response's type, "cors" for a
// cross-origin one; its status and JSON), or the error fetch rejected with.
const publishingPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>shop</title></head><body>
<script>
window.publish = async (url, key, body) => {
  try {
    const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", "Idempotency-Key": key }, body });
    return { type: r.type, status: r.status, answer: await r.json() };
  } catch (err) {
    return { error: String(err) };
  }
};
</script></body></html>`

// publishingApp serves publishingPage on an origin of its own (another port of 127.0.0.1).
func publishingApp(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(publishingPage))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// pagePublish is what publishingPage's publish returned.
type pagePublish struct {
	Type   string
	Status int
	Answer struct {
		Topic     string
		Partition int32
		Offset    int64
		ID        string
		Timestamp string
		Duplicate bool
		Error     string
	}
	Error string
}

func (p *pageDriver) publish(t *testing.T, url, key, body string) pagePublish {
	t.Helper()
	args, _ := json.Marshal([]string{url, key, body})
	var r pagePublish
	p.eval(t, "publish(..."+string(args)+")", &r)
	return r
}

// TestBrowserCrossOriginPublish: in Chromium, a page of an origin cors-origins allows POSTs a record as JSON
// with an Idempotency-Key to the gateway: the browser's preflight passes, the page reads the answer (a
// cross-origin response) with the record's place and id, and the record is in Kafka as the page sent it; the
// same request again is answered as a duplicate with the same place and produces nothing. A page of an origin
// that is not allowed gets its preflight refused: its fetch rejects, and nothing is produced.
func TestBrowserCrossOriginPublish(t *testing.T) {
	browserTools(t)
	topic := kafkatest.NewTopic(t, 3, nil)
	app, other := publishingApp(t), publishingApp(t)
	g := startGateway(t, []string{topic}, func(c *Config) {
		c.Publish.Topics = []string{topic}
		c.Publish.Anonymous = true
		c.CORS.Origins = []string{app.URL}
	})
	g.waitReady(t)
	records := g.url + "/topics/" + topic + "/records"
	responses := func(status string) float64 {
		return metricValue(t, g, "ssegate_http_responses_total", `port="clients"`, `http_route="/topics/:topic/records"`,
			`http_response_status_code="`+status+`"`)
	}
	const body = `{"key":"user-42","value":{"item":"tea","qty":2},"headers":{"source":"web"}}`

	page := drivePage(t, app.URL+"/")
	var origin string
	page.eval(t, "location.origin", &origin)
	if origin != app.URL || origin == g.url {
		t.Fatalf("the page's origin is %s, the gateway's %s: the test needs them to differ", origin, g.url)
	}
	r := page.publish(t, records, "k1", body)
	if r.Error != "" || r.Type != "cors" || r.Status != http.StatusOK || r.Answer.Topic != topic || r.Answer.Duplicate {
		t.Fatalf("the allowed page's POST: %+v, want a 200 cors response, not a duplicate", r)
	}
	if preflights := responses("204"); preflights != 1 {
		t.Errorf("the gateway answered %v preflights with 204, want 1 (the POST is not a simple request)", preflights)
	}
	all := kafkatest.ReadAll(t, topic)
	n := 0
	for _, recs := range all {
		n += len(recs)
	}
	rec := byOffset(all)[r.Answer.Partition][r.Answer.Offset]
	if n != 1 || rec == nil {
		t.Fatalf("the topic holds %d records, none at the answer's %d/%d", n, r.Answer.Partition, r.Answer.Offset)
	}
	headers := map[string]string{}
	for _, h := range rec.Headers {
		headers[h.Key] = string(h.Value)
	}
	if string(rec.Key) != "user-42" || string(rec.Value) != `{"item":"tea","qty":2}` || headers["source"] != "web" || headers["idempotency-key"] != "k1" {
		t.Errorf("the record in Kafka: key %q, value %q, headers %v", rec.Key, rec.Value, headers)
	}
	if id, err := position.Parse(r.Answer.ID); err != nil {
		t.Errorf("the answer's id %q: %v", r.Answer.ID, err)
	} else if o, ok := id.Offset(r.Answer.Partition); !ok || o != r.Answer.Offset {
		t.Errorf("the answer's id %s does not name the record's partition %d at offset %d", r.Answer.ID, r.Answer.Partition, r.Answer.Offset)
	}

	// The same key again: the first record's place, as a duplicate.
	again := page.publish(t, records, "k1", body)
	if again.Error != "" || again.Status != http.StatusOK || !again.Answer.Duplicate ||
		again.Answer.Partition != r.Answer.Partition || again.Answer.Offset != r.Answer.Offset {
		t.Errorf("the same POST again: %+v, want a duplicate at %d/%d", again, r.Answer.Partition, r.Answer.Offset)
	}

	refused := drivePage(t, other.URL+"/").publish(t, records, "k2", body)
	if refused.Error == "" || refused.Status != 0 {
		t.Errorf("the page of an origin not allowed: %+v, want its fetch rejected", refused)
	}
	if v := responses("403"); v != 1 {
		t.Errorf("the gateway refused %v requests of the route, want 1 (the preflight)", v)
	}
	if v := responses("200"); v != 2 {
		t.Errorf("the gateway answered %v POSTs, want 2 (the allowed page's)", v)
	}
	n = 0
	for _, recs := range kafkatest.ReadAll(t, topic) {
		n += len(recs)
	}
	if n != 1 {
		t.Errorf("the topic holds %d records, want 1", n)
	}
}
