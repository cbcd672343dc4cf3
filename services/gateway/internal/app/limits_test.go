package app

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/redistest"
)

// refusal is a stream request's answer when it is not a stream.
type refusal struct {
	status     int
	retryAfter string
	Error      string
	Limit      string
}

// tryStream requests a stream with headers; it returns the open stream, or the refusal.
func tryStream(t *testing.T, ctx context.Context, url string, headers map[string]string) (*http.Response, *refusal) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode == http.StatusOK {
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }()
	r := &refusal{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, r); err != nil {
		t.Fatalf("GET %s: %d %q is not JSON", url, resp.StatusCode, b)
	}
	return nil, r
}

// mustRefuse checks that a stream request is refused with status, naming limit, with a Retry-After.
func mustRefuse(t *testing.T, ctx context.Context, url string, headers map[string]string, status int, limit string) {
	t.Helper()
	resp, r := tryStream(t, ctx, url, headers)
	if resp != nil {
		_ = resp.Body.Close()
		t.Fatalf("GET %s %v: a stream, want %d (%s)", url, headers, status, limit)
	}
	if r.status != status || r.Limit != limit || r.Error == "" {
		t.Fatalf("GET %s %v: %+v, want %d naming limit %s", url, headers, r, status, limit)
	}
	if s, err := strconv.Atoi(r.retryAfter); err != nil || s < 1 {
		t.Fatalf("Retry-After %q, want whole seconds", r.retryAfter)
	}
}

// mustStream checks that a stream request is admitted.
func mustStream(t *testing.T, ctx context.Context, url string, headers map[string]string) *http.Response {
	t.Helper()
	resp, r := tryStream(t, ctx, url, headers)
	if r != nil {
		t.Fatalf("GET %s %v: %+v, want a stream", url, headers, r)
	}
	return resp
}

// metricValue returns the value of the first sample of name whose labels include all of labels, from the
// gateway's /metrics; -1 when there is none.
func (g *gateway) metricValue(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	_, body := get(t, g.admin+"/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return v
		}
	}
	return -1
}

// TestLimitPerIPAcrossGateways: two gateways count one client address together in Redis: the third stream
// is refused on either, with 429, Retry-After and the kind in JSON (and counted); a parked stream that ends
// gives its slot back to the other gateway, and a gateway that stops gives back all of its own.
func TestLimitPerIPAcrossGateways(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	prefix := redistest.Prefix(t)
	rdb := redistest.Client(t)
	shared := func(c *Config) {
		c.Limits.MaxPerIP = 2
		c.Limits.Redis.Addr = redistest.Addr(t)
		c.Limits.QuotaKeyPrefix = prefix
		c.Writers = 2
	}
	g1, g2 := startGateway(t, []string{topic}, shared), startGateway(t, []string{topic}, shared)
	g1.waitReady(t)
	g2.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	stream := "/streams/" + topic + "?heartbeat=200" // a client that leaves a parked stream is noticed within 200ms
	s1 := mustStream(t, ctx, g1.url+stream, nil)
	mustStream(t, ctx, g2.url+stream, nil)
	mustRefuse(t, ctx, g1.url+stream, nil, http.StatusTooManyRequests, "ip")
	mustRefuse(t, ctx, g2.url+stream, nil, http.StatusTooManyRequests, "ip")
	if v := g1.metricValue(t, "ssegate_streams_refused_total", `kind="ip"`, `reason="limit"`); v != 1 {
		t.Errorf("g1 refused streams of kind ip = %v, want 1", v)
	}
	if v := g1.metricValue(t, "ssegate_streams_refused_total", `kind="pod_streams"`); v != 0 {
		t.Errorf("g1 refused streams of kind pod_streams = %v, want 0 (every kind is there from the start)", v)
	}
	key := prefix + "ip:127.0.0.1"
	if n := rdb.ZCard(ctx, key).Val(); n != 2 {
		t.Fatalf("%s holds %d slots, want 2", key, n)
	}

	// The stream on g1 is parked (served by the writer pool): its end must still give its slot back.
	kafkatest.WaitFor(t, 10*time.Second, "g1's stream to be parked", func() bool {
		return g1.metricValue(t, "ssegate_connections_parked", `topic="`+topic+`"`) == 1
	})
	_ = s1.Body.Close()
	kafkatest.WaitFor(t, 10*time.Second, "the ended stream's slot to be free on g2", func() bool {
		resp, _ := tryStream(t, ctx, g2.url+stream, nil)
		return resp != nil
	})
	if n := rdb.ZCard(ctx, key).Val(); n != 2 {
		t.Fatalf("%s holds %d slots after one stream ended and another began, want 2", key, n)
	}

	// A gateway that stops gives its slots back at once, not after the expiry.
	g2.stop()
	if err := <-g2.done; err != nil {
		t.Fatalf("g2 Run: %v", err)
	}
	g2.done <- nil // for the cleanup
	if n := rdb.ZCard(ctx, key).Val(); n != 0 {
		t.Fatalf("%s holds %d slots after the only gateway with streams stopped, want 0", key, n)
	}
	mustStream(t, ctx, g1.url+stream, nil)
	mustStream(t, ctx, g1.url+stream, nil)
}

// TestLimitTrustedProxies: behind a trusted proxy the client is the address X-Forwarded-For names; from any
// other peer the header is ignored.
func TestLimitTrustedProxies(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	behind := startGateway(t, []string{topic}, func(c *Config) {
		c.Limits.MaxPerIP = 1
		c.Limits.TrustedProxies = []string{"127.0.0.0/8"}
	})
	direct := startGateway(t, []string{topic}, func(c *Config) { c.Limits.MaxPerIP = 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	xff := func(v string) map[string]string { return map[string]string{"X-Forwarded-For": v} }
	stream := "/streams/" + topic
	mustStream(t, ctx, behind.url+stream, xff("203.0.113.1"))
	mustRefuse(t, ctx, behind.url+stream, xff("198.51.100.9, 203.0.113.1"), http.StatusTooManyRequests, "ip")
	mustStream(t, ctx, behind.url+stream, xff("203.0.113.2, 127.0.0.5"))
	mustStream(t, ctx, behind.url+stream, xff("not an address")) // the peer, 127.0.0.1
	mustRefuse(t, ctx, behind.url+stream, nil, http.StatusTooManyRequests, "ip")

	mustStream(t, ctx, direct.url+stream, xff("203.0.113.1"))
	mustRefuse(t, ctx, direct.url+stream, xff("203.0.113.2"), http.StatusTooManyRequests, "ip")
}

// TestLimitPod: a pod's open streams and new streams per second.
func TestLimitPod(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	streams := startGateway(t, []string{topic}, func(c *Config) { c.Limits.MaxStreams = 1 })
	rate := startGateway(t, []string{topic}, func(c *Config) { c.Limits.StreamRate, c.Limits.StreamBurst = 1, 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream := "/streams/" + topic + "?heartbeat=200"
	s := mustStream(t, ctx, streams.url+stream, nil)
	mustRefuse(t, ctx, streams.url+stream, nil, http.StatusTooManyRequests, "pod_streams")
	_ = s.Body.Close()
	kafkatest.WaitFor(t, 10*time.Second, "the stream's end to make room", func() bool {
		resp, _ := tryStream(t, ctx, streams.url+stream, nil)
		return resp != nil
	})

	mustStream(t, ctx, rate.url+stream, nil)
	mustRefuse(t, ctx, rate.url+stream, nil, http.StatusTooManyRequests, "pod_rate")
	if v := rate.metricValue(t, "ssegate_streams_refused_total", `kind="pod_rate"`); v != 1 {
		t.Errorf("refused streams of kind pod_rate = %v, want 1", v)
	}
}

// TestQuotaStoreDown: with Redis unreachable, a gateway that fails closed refuses new streams with 503 and
// Retry-After; one that fails open admits them on its own counts, and meters it. Both count the errors.
func TestQuotaStoreDown(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	start := func(failure string) *gateway {
		return startGateway(t, []string{topic}, func(c *Config) {
			c.Limits.MaxPerIP = 1
			c.Limits.Redis.Addr = down
			c.Limits.QuotaFailure = failure
			c.Limits.QuotaExpiry, c.Limits.QuotaTimeout = 3*time.Second, 500*time.Millisecond
		})
	}
	closed, open := start("closed"), start("open")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream := "/streams/" + topic
	mustRefuse(t, ctx, closed.url+stream, nil, http.StatusServiceUnavailable, "quota_store")
	if v := closed.metricValue(t, "ssegate_streams_refused_total", `kind="quota_store"`); v != 1 {
		t.Errorf("refused streams of kind quota_store = %v, want 1", v)
	}
	mustStream(t, ctx, open.url+stream, nil)
	mustRefuse(t, ctx, open.url+stream, nil, http.StatusTooManyRequests, "ip") // its own count still applies
	if v := open.metricValue(t, "ssegate_quota_fail_open_total"); v != 1 {
		t.Errorf("fail-open admissions = %v, want 1", v)
	}
	for _, g := range []*gateway{closed, open} {
		if v := g.metricValue(t, "ssegate_quota_store_errors_total", `op="acquire"`); v < 1 {
			t.Errorf("quota store errors (acquire) = %v, want at least 1", v)
		}
	}
}

// TestLimitPerSubjectAcrossGateways: the subject the limits count is the verified token's sub claim, shared
// by two gateways in Redis: a subject's second stream is refused on the other gateway, another subject and an
// anonymous stream of a public topic are not, and the refusal is on the one refused-streams counter.
func TestLimitPerSubjectAcrossGateways(t *testing.T) {
	private, public := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	prefix := redistest.Prefix(t)
	shared := withAuth(t, func(c *Config) {
		c.Limits.MaxPerSubject = 1
		c.Limits.Redis.Addr = redistest.Addr(t)
		c.Limits.QuotaKeyPrefix = prefix
		c.Auth.TopicModes = map[string]string{public: "none"}
	})
	g1, g2 := startGateway(t, []string{private, public}, shared), startGateway(t, []string{private, public}, shared)
	g1.waitReady(t)
	g2.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	scope := map[string]any{"topics": []string{private}}
	exp := time.Now().Add(time.Hour)
	alice := map[string]string{"Authorization": "Bearer " + token(t, testSecret, exp, scope, func(c jwt.MapClaims) { c["sub"] = "alice" })}
	bob := map[string]string{"Authorization": "Bearer " + token(t, testSecret, exp, scope, func(c jwt.MapClaims) { c["sub"] = "bob" })}
	stream := "/streams/" + private + "?heartbeat=200"

	mustStream(t, ctx, g1.url+stream, alice)
	mustRefuse(t, ctx, g2.url+stream, alice, http.StatusTooManyRequests, "subject")
	mustStream(t, ctx, g2.url+stream, bob)
	mustStream(t, ctx, g2.url+"/streams/"+public, nil)
	mustStream(t, ctx, g2.url+"/streams/"+public, nil)
	if v := g2.metricValue(t, "ssegate_streams_refused_total", `kind="subject"`, `reason="limit"`); v != 1 {
		t.Errorf("g2 refused streams of kind subject = %v, want 1", v)
	}
	if v := g2.metricValue(t, "ssegate_streams_refused_total", `topic="`+private+`"`, `reason="missing"`); v != 0 {
		t.Errorf("g2 refused streams for a missing token = %v, want 0 on the same counter", v)
	}
}
