package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// testSecret is the HMAC secret of the gateways in these tests.
var testSecret = []byte("test-secret-of-at-least-32-bytes-0123456789")

// withAuth returns a Config mutation that has the gateway verify HS256 tokens with testSecret, and then
// applies more.
func withAuth(t *testing.T, more func(c *Config)) func(c *Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hmac")
	if err := os.WriteFile(path, testSecret, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(c *Config) {
		c.Auth.Algorithms = []string{"HS256"}
		c.Auth.HMACSecretFile = path
		c.Auth.Audience = []string{"ssegate"}
		if more != nil {
			more(c)
		}
	}
}

// token returns an HS256 token for sub with this scope claim (nil for none), expiring at exp.
func token(t *testing.T, secret []byte, exp time.Time, scope map[string]any, change func(jwt.MapClaims)) string {
	t.Helper()
	c := jwt.MapClaims{"sub": "user-42", "aud": "ssegate", "exp": exp.Unix()}
	if scope != nil {
		c["ssegate"] = scope
	}
	if change != nil {
		change(c)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// request sends a GET to url with headers, and returns the response with its body read.
func request(t *testing.T, url string, h http.Header) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusOK {
		// A stream: read its opening block only.
		buf := make([]byte, 64)
		n, _ := io.ReadAtLeast(resp.Body, buf, 10)
		return resp, string(buf[:n])
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func bearerHeader(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

// TestStreamRefusals: what a stream request gets for each kind of token, on a topic that requires one, one
// where it is optional and a public one: 401 with an RFC 6750 challenge and a JSON reason, 403
// insufficient_scope, 400 invalid_request, or the stream. Each refusal is counted by reason.
func TestStreamRefusals(t *testing.T) {
	orders, prices, public := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{orders, prices, public}, withAuth(t, func(c *Config) {
		c.Auth.TopicModes = map[string]string{prices: "optional", public: "none"}
		c.CORS.Origins = []string{"https://app.example.com"}
		c.CORS.Credentials = true
	}))
	g.waitReady(t)
	hour := time.Now().Add(time.Hour)
	scope := map[string]any{"topics": []string{orders}, "keys": []string{"user-42"}}
	good := token(t, testSecret, hour, scope, nil)
	tests := []struct {
		name      string
		topic     string
		query     string
		h         http.Header
		status    int
		reason    string
		challenge string // a substring of WWW-Authenticate
	}{
		{"no token", orders, "", nil, 401, "missing", `Bearer realm="ssegate"`},
		{"good token in the header", orders, "", bearerHeader(good), 200, "", ""},
		{"good token in the cookie", orders, "", http.Header{"Cookie": {"ssegate_token=" + good}}, 200, "", ""},
		{"expired", orders, "", bearerHeader(token(t, testSecret, time.Now().Add(-time.Minute), scope, nil)), 401, "expired", `error="invalid_token"`},
		{"exp not a representable time", orders, "", bearerHeader(token(t, testSecret, hour, scope, func(c jwt.MapClaims) { c["exp"] = 1e300 })), 401, "bad_claim", `error="invalid_token"`},
		{"bad signature", orders, "", bearerHeader(token(t, []byte("another-secret-of-at-least-32-bytes-000"), hour, scope, nil)), 401, "bad_signature", `error="invalid_token"`},
		{"wrong audience", orders, "", bearerHeader(token(t, testSecret, hour, scope, func(c jwt.MapClaims) { c["aud"] = "x" })), 401, "wrong_audience", `error="invalid_token"`},
		{"alg none", orders, "", bearerHeader(none(t, scope)), 401, "algorithm", `error="invalid_token"`},
		{"not a JWT", orders, "", bearerHeader("abc"), 401, "malformed", `error="invalid_token"`},
		{"oversized", orders, "", http.Header{"Cookie": {"ssegate_token=" + strings.Repeat("a", 17<<10)}}, 401, "too_large", `error="invalid_token"`},
		{"no scope claim", orders, "", bearerHeader(token(t, testSecret, hour, nil, nil)), 403, "insufficient_scope", `error="insufficient_scope"`},
		{"another topic's token", prices + "x", "", bearerHeader(good), 404, "", ""},
		{"topic not in the scope", public, "", bearerHeader("garbage"), 200, "", ""},
		{"key outside the scope", orders, "?key=user-7", bearerHeader(good), 403, "insufficient_scope", `error="insufficient_scope"`},
		{"key inside the scope", orders, "?key=user-42", bearerHeader(good), 200, "", ""},
		{"query token not allowed", orders, "?access_token=" + good, nil, 400, "query_token_not_allowed", `error="invalid_request"`},
		{"bad Last-Event-ID is a resync, never an HTTP error", orders, "", http.Header{"Authorization": {"Bearer " + good}, "Last-Event-ID": {"garbage"}}, 200, "", ""},
		{"optional topic, no token", prices, "", nil, 200, "", ""},
		{"optional topic, a token for another topic", prices, "", bearerHeader(good), 200, "", ""},
		{"optional topic, an expired token", prices, "", bearerHeader(token(t, testSecret, time.Now().Add(-time.Minute), scope, nil)), 401, "expired", `error="invalid_token"`},
		{"optional topic, its scope applies", prices, "?key=user-7", bearerHeader(token(t, testSecret, hour, map[string]any{"topics": []string{prices}, "keys": []string{"user-42"}}, nil)), 403, "insufficient_scope", ""},
		{"public topic, a bad token is not looked at", public, "", bearerHeader("garbage"), 200, "", ""},
		{"origin not allowed", orders, "", http.Header{"Origin": {"https://evil.example"}, "Authorization": {"Bearer " + good}}, 403, "origin", ""},
		{"origin null", orders, "", http.Header{"Origin": {"null"}}, 403, "origin", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := request(t, g.url+"/streams/"+tc.topic+tc.query, tc.h)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status == 200 || tc.status == 404 {
				return
			}
			var js struct{ Error, Reason string }
			if err := json.Unmarshal([]byte(body), &js); err != nil || js.Reason != tc.reason || js.Error == "" {
				t.Errorf("body %s, want reason %q", body, tc.reason)
			}
			if ch := resp.Header.Get("WWW-Authenticate"); !strings.Contains(ch, tc.challenge) {
				t.Errorf("WWW-Authenticate %q, want %q", ch, tc.challenge)
			}
			if strings.Contains(body, good) {
				t.Error("the body repeats the token")
			}
		})
	}
	for reason, want := range map[string]float64{"missing": 1, "expired": 2, "insufficient_scope": 3, "origin": 2, "query_token_not_allowed": 1} {
		got := 0.0
		for _, topic := range []string{orders, prices} {
			got += metricValue(t, g, "ssegate_streams_refused_total", `topic="`+topic+`"`, `reason="`+reason+`"`)
		}
		if got != want {
			t.Errorf("ssegate_streams_refused_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// none returns an unsigned token (alg none) with the scope.
func none(t *testing.T, scope map[string]any) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"aud": "ssegate", "exp": time.Now().Add(time.Hour).Unix(), "ssegate": scope}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCORSAnswers: an allowed origin gets its CORS headers on streams, refusals and preflights; Vary: Origin is
// always there; another origin's preflight is refused.
func TestCORSAnswers(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, withAuth(t, func(c *Config) {
		c.CORS.Origins = []string{"https://*.example.com"}
		c.CORS.Credentials = true
	}))
	g.waitReady(t)
	const origin = "https://app.example.com"
	resp, _ := request(t, g.url+"/streams/"+topic, http.Header{"Origin": {origin}})
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
		resp.Header.Get("Access-Control-Allow-Credentials") != "true" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") ||
		!strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") {
		t.Fatalf("refusal for an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	tok := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{"topics": []string{"*"}}, nil)
	resp, _ = request(t, g.url+"/streams/"+topic, http.Header{"Origin": {origin}, "Cookie": {"ssegate_token=" + tok}})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream for an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = request(t, g.url+"/streams/"+topic, nil)
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") {
		t.Fatalf("without an Origin: %v", resp.Header)
	}
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, g.url+"/streams/"+topic, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "authorization, last-event-id, x-other")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	resp = preflight(origin)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Methods") != "GET" ||
		resp.Header.Get("Access-Control-Allow-Headers") != "authorization, last-event-id" || resp.Header.Get("Access-Control-Max-Age") == "" {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if resp = preflight("https://example.com"); resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight of another origin: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestScopedResumeAcrossGateways (real Kafka): a token for key user-42 gets user-42's records only, on one
// gateway and after resuming on another, from its own id and from an id naming every partition; its ids name
// only partitions user-42 can be in.
func TestScopedResumeAcrossGateways(t *testing.T) {
	const n = 3
	topic := kafkatest.NewTopic(t, n, nil)
	key := ""
	for i := range 100 {
		if k := fmt.Sprint("user-", i); len(plausible(topic, k, n)) < n {
			key = k
			break
		}
	}
	parts := plausible(topic, key, n)
	auth := withAuth(t, nil)
	gws := []*gateway{startGateway(t, []string{topic}, auth), startGateway(t, []string{topic}, func(c *Config) { auth(c); c.Writers = 0 })}
	for _, g := range gws {
		g.waitReady(t)
	}
	tok := token(t, testSecret, time.Now().Add(time.Hour), map[string]any{"topics": []string{topic}, "keys": []string{key}}, nil)
	// Records go where Partition says; the key's go where Kafka's default partitioner would put them.
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	home := int32(kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Key: []byte(key)}, n))
	rounds := 0
	round := func() {
		rounds++
		recs := []*kgo.Record{{Partition: home, Key: []byte(key), Value: fmt.Appendf(nil, "%s/%d", key, rounds)}}
		for p := range int32(n) {
			recs = append(recs, &kgo.Record{Partition: p, Key: []byte("other"), Value: fmt.Appendf(nil, "other/%d", rounds)})
		}
		kafkatest.Produce(t, cl, recs...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	open := func(g *gateway, lastID string) *sse.Parser {
		h := bearerHeader(tok)
		if lastID != "" {
			h.Set("Last-Event-ID", lastID)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/streams/"+topic, nil)
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("open: %v %v", resp, err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return sse.NewParser(resp.Body)
	}
	read := func(p *sse.Parser, want int, from int) string {
		t.Helper()
		id := ""
		for i := range want {
			ev, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			if ev.Data != fmt.Sprintf("%s/%d", key, from+i) {
				t.Fatalf("event %+v, want %s's record of round %d", ev, key, from+i)
			}
			v := position.MustParse(ev.ID)
			for j := range v.Len() {
				if q := v.At(j).Partition; !containsPart(parts, q) {
					t.Fatalf("id %s names partition %d; %s is only ever in %v", ev.ID, q, key, parts)
				}
			}
			id = ev.ID
		}
		return id
	}
	p := open(gws[0], "")
	for range 3 {
		round()
	}
	last := read(p, 3, 1)
	for range 2 {
		round()
	}
	r := open(gws[1], last)
	read(r, 2, 4)
	w := open(gws[1], "v1:0-0.1-0.2-0")
	round()
	read(r, 1, 6)
	// The key's first record was at offset 0 of its partition: everything after it comes again, nothing else.
	read(w, 5, 2)
}

// plausible returns the partitions key goes to under partition counts 1 to n.
func plausible(topic, key string, n int) []int32 {
	kp := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	var out []int32
	for count := 1; count <= n; count++ {
		if q := int32(kp.Partition(&kgo.Record{Key: []byte(key)}, count)); !containsPart(out, q) {
			out = append(out, q)
		}
	}
	return out
}

func containsPart(parts []int32, q int32) bool {
	for _, p := range parts {
		if p == q {
			return true
		}
	}
	return false
}

// TestTokenExpiryResumes (real Kafka): a stream whose token expires gets token-expiring, then token-expired with
// its position, and ends cleanly; the client reconnects to another gateway with a new token and that id and
// gets every record after it, those produced meanwhile included, each once.
func TestTokenExpiryResumes(t *testing.T) {
	topic := kafkatest.NewTopic(t, 3, nil)
	auth := withAuth(t, func(c *Config) { c.Auth.ExpiryNotice = 1500 * time.Millisecond })
	g1, g2 := startGateway(t, []string{topic}, auth), startGateway(t, []string{topic}, func(c *Config) { auth(c); c.Writers = 0 })
	g1.waitReady(t)
	g2.waitReady(t)
	scope := map[string]any{"topics": []string{topic}}
	exp := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second) // exp is in whole seconds
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g1.url+"/streams/"+topic, nil)
	req.Header.Set("Authorization", "Bearer "+token(t, testSecret, exp, scope, nil))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("open: %v %v", resp, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body) // until the stream ends
	if err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	if time.Now().Before(exp) {
		t.Errorf("the stream ended %v before exp", time.Until(exp))
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	evs, _ := parseAll(t, string(body))
	if len(evs) != 2 || evs[0].Type != stream.EventTokenExpiring || evs[1].Type != stream.EventTokenExpired || evs[0].ID != evs[1].ID {
		t.Fatalf("events %+v, want token-expiring then token-expired with the same id", evs)
	}
	endID := evs[1].ID
	if v := metricValue(t, g1, "ssegate_connections_closed_total", `topic="`+topic+`"`, `reason="token_expired"`); v != 1 {
		t.Errorf("closed token_expired = %v", v)
	}
	if v := metricValue(t, g1, "ssegate_tokens_expiring_total", `topic="`+topic+`"`); v != 1 {
		t.Errorf("tokens expiring = %v", v)
	}
	produceN(t, cl, 0, 30, 0) // while the client fetches a new token
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, g2.url+"/streams/"+topic, nil)
	req.Header.Set("Authorization", "Bearer "+token(t, testSecret, time.Now().Add(time.Hour), scope, nil))
	req.Header.Set("Last-Event-ID", endID)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil || resp2.StatusCode != 200 {
		t.Fatalf("resume: %v %v", resp2, err)
	}
	defer func() { _ = resp2.Body.Close() }()
	p := sse.NewParser(resp2.Body)
	produceN(t, cl, 30, 10, 0)
	checkEvents(t, endID, readN(t, p, 40), byOffset(kafkatest.ReadAll(t, topic)))
}

// parseAll parses a whole stream.
func parseAll(t *testing.T, s string) ([]sse.Event, error) {
	t.Helper()
	p := sse.NewParser(strings.NewReader(s))
	var evs []sse.Event
	for {
		ev, err := p.Next()
		if err != nil {
			return evs, nil //nolint:nilerr // the end of the stream
		}
		evs = append(evs, ev)
	}
}
