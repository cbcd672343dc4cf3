package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/redistest"
)

// published is one record's answer.
type published struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Duplicate bool   `json:"duplicate"`
	Error     string `json:"error"`
	Status    int    `json:"status"`
}

// post sends a publish request and returns its status, headers and body.
func post(t *testing.T, url, body string, h http.Header) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func decodePublished(t *testing.T, body string) published {
	t.Helper()
	var p published
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return p
}

// TestPublishReadYourWrite: a published record is in Kafka as sent (key, value, headers) and reaches the streams
// with the id the answer gave; a batch's answers are in order, and a stream resumed from one of them starts
// right after that record.
func TestPublishReadYourWrite(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) {
		c.Publish.Topics = []string{topic}
		c.Publish.Anonymous = true
	})
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	live := connect(t, ctx, g.url+"/streams/"+topic)
	url := g.url + "/topics/" + topic + "/records"
	code, _, body := post(t, url, `{"key":"user-1","value":{"total": 12},"headers":{"source":"test"}}`, nil)
	if code != http.StatusOK {
		t.Fatalf("POST: %d %s", code, body)
	}
	first := decodePublished(t, body)
	if first.Topic != topic || first.Partition != 0 || first.Offset != 0 || first.ID != "v1:0-0" || first.Duplicate {
		t.Fatalf("answer %+v, want partition 0 offset 0 id v1:0-0", first)
	}
	if ev := live.next(t); ev.Data != `{"total":12}` || ev.ID != first.ID {
		t.Fatalf("the stream got %+v, want the record with the answer's id %s", ev, first.ID)
	}
	code, _, body = post(t, url, `{"records":[{"value":"a"},{"value":"b"},{"value_base64":"/w=="}]}`, nil)
	if code != http.StatusOK {
		t.Fatalf("POST batch: %d %s", code, body)
	}
	var batch struct{ Records []published }
	if err := json.Unmarshal([]byte(body), &batch); err != nil || len(batch.Records) != 3 {
		t.Fatalf("batch answer %s: %v", body, err)
	}
	for i, r := range batch.Records {
		if r.Offset != int64(i+1) || r.ID != fmt.Sprintf("v1:0-%d", i+1) {
			t.Fatalf("batch record %d: %+v", i, r)
		}
	}
	resumed := connectVia(t, ctx, http.DefaultClient, g.url+"/streams/"+topic+"?last_event_id="+batch.Records[0].ID)
	for _, want := range []string{"b", "base64:/w=="} {
		if ev := resumed.next(t); ev.Data != want {
			t.Fatalf("the stream resumed from the first record of the batch got %+v, want %q", ev, want)
		}
	}
	recs := kafkatest.ReadAll(t, topic)[0]
	if len(recs) != 4 || string(recs[0].Key) != "user-1" || string(recs[0].Value) != `{"total":12}` ||
		len(recs[0].Headers) != 1 || recs[0].Headers[0].Key != "source" || string(recs[0].Headers[0].Value) != "test" ||
		!bytes.Equal(recs[3].Value, []byte{0xff}) {
		t.Fatalf("the topic holds %d records, first %+v", len(recs), recs[0])
	}
}

// TestPublishRefusals: who may publish and what; every refusal is JSON with its status, and none of them
// puts anything into the topic.
func TestPublishRefusals(t *testing.T) {
	open, closed := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{open, closed}, withAuth(t, func(c *Config) {
		c.Auth.Mode = "required"
		c.Publish.Topics = []string{open}
		c.Publish.MaxValueBytes = 100
		c.Publish.Rate, c.Publish.Burst = 1, 10 // every request read costs one before its body is read
	}))
	g.waitReady(t)
	exp := time.Now().Add(time.Hour)
	reader := token(t, testSecret, exp, map[string]any{"topics": []string{"*"}}, nil)
	writer := token(t, testSecret, exp, map[string]any{"topics": []string{}, "publish": []string{open}, "publish_keys": []string{"mine"}}, nil)
	rec := `{"key":"mine","value":"v"}`
	url := g.url + "/topics/" + open + "/records"
	cases := []struct {
		name   string
		url    string
		body   string
		h      http.Header
		status int
		want   string
	}{
		{"no token", url, rec, nil, 401, "token"},
		{"a reader's token", url, rec, bearerHeader(reader), 403, "insufficient_scope"},
		{"a key the token may not write", url, `{"key":"yours","value":"v"}`, bearerHeader(writer), 403, "its key is not one the token may publish"},
		{"no key with publish_keys", url, `{"value":"v"}`, bearerHeader(writer), 403, "its key is not one"},
		{"a topic not open", g.url + "/topics/" + closed + "/records", rec, bearerHeader(writer), 403, "not open for publishing"},
		{"a topic not served", g.url + "/topics/nope/records", rec, bearerHeader(writer), 404, "not served"},
		{"not JSON", url, `key=mine`, bearerHeader(writer), 400, "not a JSON object"},
		{"a value too large", url, `{"key":"mine","value":"` + strings.Repeat("x", 101) + `"}`, bearerHeader(writer), 413, "at most 100"},
		{"text/plain", url, rec, http.Header{"Authorization": {"Bearer " + writer}, "Content-Type": {"text/plain"}}, 415, "must be JSON"},
		{"a batch over the burst", url, `{"records":[` + strings.TrimSuffix(strings.Repeat(rec+",", 11), ",") + `]}`, bearerHeader(writer), 413, "can never pass publish-burst"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := post(t, tc.url, tc.body, tc.h)
			var e struct{ Error, Reason string }
			_ = json.Unmarshal([]byte(body), &e)
			if code != tc.status || !strings.Contains(e.Error+" "+e.Reason, tc.want) {
				t.Fatalf("%d %s, want %d with %q", code, body, tc.status, tc.want)
			}
		})
	}
	if code, _, body := post(t, url, rec, bearerHeader(writer)); code != http.StatusOK {
		t.Fatalf("the writer's record: %d %s", code, body)
	}
	if recs := kafkatest.ReadAll(t, open)[0]; len(recs) != 1 {
		t.Fatalf("the topic holds %d records after the refusals and one good request, want 1", len(recs))
	}
	if n := metricValue(t, g, "ssegate_publish_records_total", `topic="`+open+`"`, `result="published"`); n != 1 {
		t.Errorf("published counted %v, want 1", n)
	}
	if n := metricValue(t, g, "ssegate_publish_records_total", `topic="`+open+`"`, `result="refused"`); n < 4 {
		t.Errorf("refused counted %v, want at least 4", n)
	}
}

// TestPublishIdempotentAcrossGateways: the same Idempotency-Key sent to two gateways sharing Redis publishes one
// record; the second answer is the first's place, marked a duplicate.
func TestPublishIdempotentAcrossGateways(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	prefix := redistest.Prefix(t)
	shared := func(c *Config) {
		c.Publish.Topics = []string{topic}
		c.Publish.Anonymous = true
		c.Limits.Redis.Addr = redistest.Addr(t)
		c.Publish.IdempotencyPrefix = prefix
	}
	g1, g2 := startGateway(t, []string{topic}, shared), startGateway(t, []string{topic}, shared)
	g1.waitReady(t)
	g2.waitReady(t)
	h := http.Header{"Idempotency-Key": {"order-7"}}
	var answers []published
	for _, g := range []*gateway{g1, g2, g1} {
		code, _, body := post(t, g.url+"/topics/"+topic+"/records", `{"value":"once"}`, h)
		if code != http.StatusOK {
			t.Fatalf("POST: %d %s", code, body)
		}
		answers = append(answers, decodePublished(t, body))
	}
	for i, a := range answers {
		if a.Partition != answers[0].Partition || a.Offset != answers[0].Offset || a.Duplicate != (i > 0) {
			t.Fatalf("answer %d %+v, first %+v: want the same place, later ones duplicates", i, a, answers[0])
		}
	}
	n := 0
	for _, recs := range kafkatest.ReadAll(t, topic) {
		n += len(recs)
	}
	if n != 1 {
		t.Fatalf("the topic holds %d records, want 1", n)
	}
}

// TestPublishPreflight: a page of an allowed origin may POST JSON with an Idempotency-Key; the preflight says
// so, and the answer lets the page read Retry-After.
func TestPublishPreflight(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) {
		c.Publish.Topics = []string{topic}
		c.Publish.Anonymous = true
		c.CORS.Origins = []string{"https://shop.example"}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodOptions, g.url+"/topics/"+topic+"/records", nil)
	req.Header.Set("Origin", "https://shop.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type, idempotency-key, x-other")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://shop.example" ||
		h.Get("Access-Control-Allow-Methods") != "POST" || h.Get("Access-Control-Allow-Headers") != "content-type, idempotency-key" {
		t.Fatalf("preflight: %d %v", resp.StatusCode, h)
	}
	g.waitReady(t)
	code, hdr, body := post(t, g.url+"/topics/"+topic+"/records", `{"value":"v"}`, http.Header{"Origin": {"https://shop.example"}})
	if code != http.StatusOK || !strings.Contains(hdr.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Fatalf("cross-origin POST: %d %v %s", code, hdr, body)
	}
	code, _, body = post(t, g.url+"/topics/"+topic+"/records", `{"value":"v"}`, http.Header{"Origin": {"https://evil.example"}})
	if code != http.StatusForbidden {
		t.Fatalf("POST from an origin not allowed: %d %s", code, body)
	}
}
