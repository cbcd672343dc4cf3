package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/redistest"
)

// TestPublishKeysPerPublisher: an idempotency key is its publisher's own: two token subjects, or two anonymous
// client addresses, with the same key each get their record written; a publisher's repeat of its key with
// another record is 409 naming the key, with no Retry-After and nothing written; the same record again is the
// first's duplicate. The keys are in Redis.
func TestPublishKeysPerPublisher(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, withAuth(t, func(c *Config) {
		c.Auth.Mode = "optional"
		c.Publish.Topics = []string{topic}
		c.Publish.Anonymous = true
		c.Limits.TrustedProxies = []string{"127.0.0.1/32"}
		c.Limits.Redis.Addr = redistest.Addr(t)
		c.Publish.IdempotencyPrefix = redistest.Prefix(t)
	}))
	g.waitReady(t)
	url := g.url + "/topics/" + topic + "/records"
	exp := time.Now().Add(time.Hour)
	as := func(sub string) http.Header {
		tok := token(t, testSecret, exp, map[string]any{"topics": []string{}, "publish": []string{topic}}, func(c jwt.MapClaims) { c["sub"] = sub })
		h := bearerHeader(tok)
		h.Set("Idempotency-Key", "order-1")
		return h
	}
	from := func(addr string) http.Header {
		return http.Header{"X-Forwarded-For": {addr}, "Idempotency-Key": {"order-1"}}
	}
	offsets := map[int64]bool{}
	for _, h := range []http.Header{as("alice"), as("bob"), from("192.0.2.1"), from("192.0.2.2")} {
		code, _, body := post(t, url, `{"value":"same key, `+h.Get("X-Forwarded-For")+h.Get("Authorization")+`"}`, h)
		a := decodePublished(t, body)
		if code != http.StatusOK || a.Duplicate || offsets[a.Offset] {
			t.Fatalf("%v: %d %s; want its own record written", h, code, body)
		}
		offsets[a.Offset] = true
	}
	for _, h := range []http.Header{as("alice"), from("192.0.2.1")} {
		code, hdr, body := post(t, url, `{"value":"another record"}`, h)
		var e struct {
			Error, Reason string
			Key           string `json:"idempotency_key"`
		}
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusConflict || e.Reason != "idempotency_conflict" || e.Key != "order-1" || !strings.Contains(e.Error, `"order-1"`) || hdr.Get("Retry-After") != "" {
			t.Fatalf("a repeat of the key with another record: %d %v %s; want 409 idempotency_conflict naming order-1", code, hdr, body)
		}
	}
	code, _, body := post(t, url, `{"value":"same key, 192.0.2.1"}`, from("192.0.2.1"))
	if a := decodePublished(t, body); code != http.StatusOK || !a.Duplicate {
		t.Fatalf("the same record again: %d %s; want the duplicate", code, body)
	}
	if recs := kafkatest.ReadAll(t, topic)[0]; len(recs) != 4 {
		t.Fatalf("the topic holds %d records, want 4", len(recs))
	}
}

// rawPost sends a POST of a JSON body of length bytes of which only sent are sent, and returns the connection
// to read the answer from.
func rawPost(t *testing.T, g *gateway, topic, from string, length int, sent string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = fmt.Fprintf(conn, "POST /topics/%s/records HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nX-Forwarded-For: %s\r\nContent-Length: %d\r\n\r\n%s", topic, from, length, sent)
	return conn, bufio.NewReader(conn)
}

// answerOf reads an answer from a raw connection: its status, reason and error.
func answerOf(t *testing.T, br *bufio.Reader) (int, string, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var e struct{ Error, Reason string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Reason, e.Error
}

// TestPublishBodyBounds: a body is read only after a first look at the rate (a client over it gets 429 without
// its body read), by at most publish-max-body-reads requests at once (503 past them), within
// publish-body-timeout (408) and publish-max-body-bytes (413); a batch larger than publish-burst is 413, not a
// 429 it would get forever. Every answer is JSON with its reason.
func TestPublishBodyBounds(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) {
		c.Publish.Topics = []string{topic}
		c.Publish.Anonymous = true
		c.Limits.TrustedProxies = []string{"127.0.0.1/32"}
		c.Publish.MaxBodyBytes = 2048
		c.Publish.MaxBodyReads = 1
		c.Publish.BodyTimeout = 2 * time.Second
		c.Publish.Rate, c.Publish.Burst = 1, 2
	})
	g.waitReady(t)
	url := g.url + "/topics/" + topic + "/records"
	xff := func(a string) http.Header { return http.Header{"X-Forwarded-For": {a}} }
	check := func(name string, code int, body string, status int, reason string) {
		t.Helper()
		var e struct{ Error, Reason string }
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != status || e.Reason != reason || e.Error == "" {
			t.Errorf("%s: %d %s; want %d JSON with reason %s", name, code, body, status, reason)
		}
	}
	code, _, body := post(t, url, `{"value":"`+strings.Repeat("x", 3000)+`"}`, xff("192.0.2.1"))
	check("a body over publish-max-body-bytes", code, body, 413, "body_too_large")
	code, _, body = post(t, url, `{"records":[{"value":"a"},{"value":"b"},{"value":"c"}]}`, xff("192.0.2.2"))
	check("a batch over publish-burst", code, body, 413, "publish_burst")

	// A client over its rate is refused before its body is read: this one never sends it.
	if code, _, body = post(t, url, `{"records":[{"value":"a"},{"value":"b"}]}`, xff("192.0.2.3")); code != http.StatusOK {
		t.Fatalf("a batch of publish-burst records: %d %s", code, body)
	}
	start := time.Now()
	_, br := rawPost(t, g, topic, "192.0.2.3", 100, "")
	if code, reason, msg := answerOf(t, br); code != 429 || reason != "publish_rate" || time.Since(start) > time.Second {
		t.Errorf("a request over the rate, its body not sent: %d %s %s after %v; want 429 at once", code, reason, msg, time.Since(start))
	}

	// A body that stalls holds the only place to read one: another request gets 503 meanwhile; the stalled
	// one gets 408 after publish-body-timeout, and the place is free again.
	start = time.Now()
	_, slow := rawPost(t, g, topic, "192.0.2.4", 100, `{"value":`)
	polls := 0
	kafkatest.WaitFor(t, 2*time.Second, "a 503 while the body place is taken", func() bool {
		polls++ // each from its own address: each request takes one of its rate
		code, _, body = post(t, url, `{"value":"v"}`, xff(fmt.Sprintf("198.51.100.%d", polls)))
		return code == http.StatusServiceUnavailable
	})
	check("a body while publish-max-body-reads are being read", code, body, 503, "publish_busy")
	if code, reason, _ := answerOf(t, slow); code != 408 || reason != "body_timeout" || time.Since(start) < 2*time.Second {
		t.Errorf("a stalled body: %d %s after %v; want 408 body_timeout after 2s", code, reason, time.Since(start))
	}
	if code, _, body = post(t, url, `{"value":"v"}`, xff("192.0.2.6")); code != http.StatusOK {
		t.Errorf("a request after the stalled one: %d %s", code, body)
	}
	if recs := kafkatest.ReadAll(t, topic)[0]; len(recs) != 3+polls-1 {
		t.Errorf("the topic holds %d records, want %d", len(recs), 3+polls-1)
	}
}
