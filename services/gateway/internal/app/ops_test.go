package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
)

// TestPartitionAddedAtRuntime: a partition added to a served topic is read from its start, without a restart,
// and enters the ids.
func TestPartitionAddedAtRuntime(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := connect(t, ctx, g.url+"/streams/"+topic)
	if c.initialID != "v1:" {
		t.Fatalf("initial id of an empty topic = %q, want v1:", c.initialID)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, cl, &kgo.Record{Partition: 0, Value: []byte("p0")})
	if ev := c.next(t); ev.ID != "v1:0-0" || ev.Data != "p0" {
		t.Fatalf("first event = %+v", ev)
	}
	if _, err := kafkatest.Admin(t).CreatePartitions(ctx, 1, topic); err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	// The first records of the new partition may be written before the gateway sees it: they must still come.
	var lastErr error
	kafkatest.WaitFor(t, 30*time.Second, "a produce to the new partition to succeed", func() bool {
		cl.ForceMetadataRefresh()
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		lastErr = cl.ProduceSync(pctx, &kgo.Record{Partition: 1, Value: []byte("p1-first")}).FirstErr()
		if lastErr != nil {
			t.Logf("produce to the new partition: %v", lastErr)
		}
		return lastErr == nil
	})
	kafkatest.Produce(t, cl, &kgo.Record{Partition: 1, Value: []byte("p1-second")})
	if ev := c.next(t); ev.ID != "v1:0-0.1-0" || ev.Data != "p1-first" {
		t.Fatalf("first event of the new partition = %+v, want id v1:0-0.1-0 data p1-first", ev)
	}
	if ev := c.next(t); ev.ID != "v1:0-0.1-1" || ev.Data != "p1-second" {
		t.Fatalf("second event of the new partition = %+v", ev)
	}
}

// TestHTTPErrors: unknown topics and paths, bad parameters and methods get their documented JSON errors.
func TestHTTPErrors(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	missing := kafkatest.TopicName(t) // configured, but never created
	g := startGateway(t, []string{topic, missing}, nil)
	kafkatest.WaitFor(t, 30*time.Second, "topic to be assigned", func() bool {
		_, body := get(t, g.admin+"/readyz")
		return strings.Contains(body, missing)
	})
	for _, tc := range []struct {
		name, method, path string
		status             int
		errRe, param       string
	}{
		{"topic not served", "GET", "/streams/nope", 404, `not served by this gateway`, ""},
		{"heartbeat not a number", "GET", "/streams/" + topic + "?heartbeat=abc", 400, `"heartbeat".*abc`, "heartbeat"},
		{"heartbeat too small", "GET", "/streams/" + topic + "?heartbeat=5", 400, `"heartbeat"`, "heartbeat"},
		{"heartbeat twice", "GET", "/streams/" + topic + "?heartbeat=1000&heartbeat=2000", 400, `more than once`, "heartbeat"},
		{"unknown path", "GET", "/nope", 404, `no such path`, ""},
		{"wrong method", "POST", "/streams/" + topic, 405, `not allowed`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, g.url+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var body struct{ Error, Param string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if resp.StatusCode != tc.status || !regexp.MustCompile(tc.errRe).MatchString(body.Error) || body.Param != tc.param {
				t.Fatalf("%s %s = %d %+v, want %d error ~ %q param %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.errRe, tc.param)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type = %q", ct)
			}
		})
	}
}

// TestReadyz: not ready while a served topic is missing from Kafka, ready once it exists, and streams of it
// work from then on without a restart.
func TestReadyz(t *testing.T) {
	topic := kafkatest.TopicName(t)
	g := startGateway(t, []string{topic}, nil)
	if code, _ := get(t, g.admin+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}
	kafkatest.WaitFor(t, 30*time.Second, "readyz to name the missing topic", func() bool {
		code, body := get(t, g.admin+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "does not exist")
	})
	kafkatest.CreateTopic(t, topic, 2, nil)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), topic) })
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := connect(t, ctx, g.url+"/streams/"+topic)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("hello")})
	if ev := c.next(t); ev.Data != "hello" {
		t.Fatalf("event = %+v", ev)
	}
}

// TestShutdownDrains: on shutdown open streams end cleanly within the drain window, then the listener closes.
func TestShutdownDrains(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.Drain = time.Second })
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var cs []*sseClient
	for range 5 {
		cs = append(cs, connect(t, ctx, g.url+"/streams/"+topic))
	}
	start := time.Now()
	g.stop()
	for i, c := range cs {
		_, err := c.p.Next()
		if !errors.Is(err, io.EOF) {
			t.Fatalf("stream %d ended with %v, want a clean end of stream", i, err)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("streams took %v to close with a 1s drain window", took)
	}
	g.waitStopped(t)
	if code, _ := get(t, g.admin+"/healthz"); code != 0 {
		t.Fatalf("a stopped gateway still answers: %d", code)
	}
}

// TestShutdownKeepsListening: a stopping gateway is unready at once but keeps its listener open through the
// endpoint-propagation window and the drain; a stream that comes meanwhile gets 200, a short retry and its
// position, and ends; streams open before carry on until the drain; only then are connections refused.
func TestShutdownKeepsListening(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) {
		c.Propagation = 1500 * time.Millisecond
		c.Drain = 3 * time.Second
	})
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Five streams, so that one of them at least is still open a moment into the drain (each ends at a random
	// moment of it).
	var olds []*sseClient
	for range 5 {
		olds = append(olds, connect(t, ctx, g.url+"/streams/"+topic))
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("before")})
	for _, old := range olds {
		if ev := old.next(t); ev.Data != "before" {
			t.Fatalf("event = %+v", ev)
		}
	}
	start := time.Now()
	g.stop()
	kafkatest.WaitFor(t, time.Second, "the gateway to be unready", func() bool {
		code, _ := get(t, g.admin+"/readyz")
		return code == http.StatusServiceUnavailable
	})
	redirected := func(when, want string) {
		t.Helper()
		code, body := get(t, g.url+"/streams/"+topic)
		var retry int
		var id string
		if _, err := fmt.Sscanf(body, "retry: %d\nid: %s\n\n", &retry, &id); err != nil || code != http.StatusOK {
			t.Fatalf("a new stream %s: %d %q (%v), want 200, a retry and an id, then the end", when, code, body, err)
		}
		if retry < 500 || retry >= 1500 || id != want {
			t.Fatalf("a new stream %s: retry %d, id %s; want 500 <= retry < 1500 and %s", when, retry, id, want)
		}
	}
	redirected("in the propagation window", "v1:0-0")
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("during")})
	for _, old := range olds {
		if ev := old.next(t); ev.Data != "during" {
			t.Fatalf("a stream open before the shutdown, in the propagation window: %+v", ev)
		}
	}
	if took := time.Since(start); took > 1400*time.Millisecond {
		t.Fatalf("the checks of the propagation window took %v; the test cannot tell the window from the drain", took)
	}
	time.Sleep(time.Until(start.Add(1600 * time.Millisecond)))
	redirected("in the drain", "v1:0-1")
	for i, old := range olds {
		if _, err := old.p.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("stream %d, open before the shutdown, ended with %v, want a clean end in the drain", i, err)
		}
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Fatalf("the streams open before the shutdown ended %v after it, before the propagation window was over", took)
	}
	g.waitStopped(t)
	if code, body := get(t, g.url+"/streams/"+topic); code != 0 {
		t.Fatalf("a stopped gateway still answers: %d %s", code, body)
	}
}

// TestMetrics: /metrics reports connections, frames, bytes, lag and the ring in Prometheus text.
func TestMetrics(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := connect(t, ctx, g.url+"/streams/"+topic)
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Key: []byte("x"), Value: []byte("one")}, &kgo.Record{Key: []byte("x"), Value: []byte("two")})
	c.next(t)
	c.next(t)
	_, body := get(t, g.admin+"/metrics")
	metric := func(name string, labels ...string) float64 {
		t.Helper()
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, name+"{") {
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
		t.Fatalf("no %s%v in /metrics:\n%s", name, labels, body)
		return 0
	}
	tl := `topic="` + topic + `"`
	if v := metric("ssegate_connections_open", tl); v != 1 {
		t.Errorf("connections open = %v, want 1", v)
	}
	// The stream is idle and caught up, so the writer pool serves it (it parks right after its last write).
	kafkatest.WaitFor(t, 10*time.Second, "the stream to be parked", func() bool {
		_, body = get(t, g.admin+"/metrics")
		return metric("ssegate_connections_parked", tl) == 1
	})
	if v := metric("ssegate_frames_written_total", tl); v != 2 {
		t.Errorf("frames written = %v, want 2", v)
	}
	if v := metric("ssegate_writes_total", tl); v < 1 || v > 2 {
		t.Errorf("writes = %v, want 1 or 2 for the two frames", v)
	}
	if v := metric("ssegate_bytes_written_total", tl); v < 40 {
		t.Errorf("bytes written = %v, want at least the two frames", v)
	}
	if v := metric("ssegate_ring_frames", tl); v != 2 {
		t.Errorf("ring frames = %v, want 2", v)
	}
	fb := metric("ssegate_ring_bytes", tl)
	if mem, c := metric("ssegate_ring_memory_bytes", tl), metric("ssegate_ring_capacity_bytes", tl); mem < fb || mem > c || c != 64<<20 {
		t.Errorf("ring memory %v for %v frame bytes, capacity %v: want frame bytes <= memory <= capacity = 64MiB", mem, fb, c)
	}
	if v := metric("ssegate_ring_published_bytes_total", tl); v != fb {
		t.Errorf("ring published bytes %v, want the frame bytes held %v", v, fb)
	}
	metric("ssegate_consumer_lag", tl, `partition="0"`)
	metric("ssegate_ring_oldest_offset", tl, `partition="1"`)
	metric("ssegate_connections_closed_total", tl, `reason="behind"`)
}

// TestSASL: the gateway authenticates with SASL PLAIN, SCRAM and OAUTHBEARER (tokens from a token
// endpoint, checked by the broker against its key set) against the broker's SASL listener, and a wrong
// password or a token the broker does not trust keeps it unready.
func TestSASL(t *testing.T) {
	saslBrokers := kafkatest.SASLBrokers(t)
	adm := kafkatest.Admin(t)
	ctx := kafkatest.Context(t)
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "scram-user", Mechanism: m, Iterations: 4096, Password: "scram-secret"}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("create SCRAM user: %v", err)
		}
	}
	for _, tc := range []struct {
		name, mech, user, pass string
		ok                     bool
	}{
		{"plain", kafkaconn.MechanismPlain, "ssegate", "ssegate-secret", true},
		{"scram-sha-256", kafkaconn.MechanismScramSHA256, "scram-user", "scram-secret", true},
		{"scram-sha-512", kafkaconn.MechanismScramSHA512, "scram-user", "scram-secret", true},
		{"wrong password", kafkaconn.MechanismScramSHA256, "scram-user", "nope", false},
		{"oauthbearer", kafkaconn.MechanismOAuthBearer, "", "", true},
		{"oauthbearer with a key the broker does not trust", kafkaconn.MechanismOAuthBearer, "", "foreign", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 1, nil)
			var oauth kafkaconn.OAuthConfig
			if tc.mech == kafkaconn.MechanismOAuthBearer {
				ts := kafkatest.NewTokenServer(t, time.Minute, tc.pass == "foreign")
				oauth = kafkaconn.OAuthConfig{TokenURL: ts.URL, ClientID: ts.ClientID, ClientSecret: ts.ClientSecret}
			}
			g := startGateway(t, []string{topic}, func(c *Config) {
				c.Kafka.Brokers = saslBrokers
				// The test broker's SASL listener is SASL_PLAINTEXT: PLAIN must be allowed there, and so must the
				// test's http token endpoint; SCRAM need not be.
				c.Kafka.SASL = kafkaconn.SASLConfig{
					Mechanism: tc.mech, Username: tc.user, Password: tc.pass, OAuth: oauth,
					AllowPlaintext: tc.mech != kafkaconn.MechanismScramSHA256 && tc.mech != kafkaconn.MechanismScramSHA512,
				}
			})
			if !tc.ok {
				g.neverReady(t, 3*time.Second, "with a wrong password")
				return
			}
			g.waitReady(t)
			sctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c := connect(t, sctx, g.url+"/streams/"+topic)
			kafkatest.Produce(t, kafkatest.Client(t, kgo.DefaultProduceTopic(topic)), &kgo.Record{Value: []byte(tc.name)})
			if ev := c.next(t); ev.Data != tc.name {
				t.Fatalf("event = %+v", ev)
			}
			if _, err := position.Parse(c.initialID); err != nil {
				t.Fatalf("initial id: %v", err)
			}
		})
	}
}

// TestTLS: the gateway reaches the broker's SSL listener when it trusts the CA that signed the broker's
// certificate, and stays unready when it does not.
func TestTLS(t *testing.T) {
	brokers, ca := kafkatest.TLSBrokers(t)
	for _, tc := range []struct {
		name string
		tls  kafkaconn.TLSConfig
		ok   bool
	}{
		{"trusted CA", kafkaconn.TLSConfig{CAFile: ca}, true},
		{"system roots", kafkaconn.TLSConfig{Enabled: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 1, nil)
			g := startGateway(t, []string{topic}, func(c *Config) {
				c.Kafka.Brokers = brokers
				c.Kafka.TLS = tc.tls
			})
			if !tc.ok {
				g.neverReady(t, 3*time.Second, "without the CA")
				return
			}
			g.waitReady(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c := connect(t, ctx, g.url+"/streams/"+topic)
			kafkatest.Produce(t, kafkatest.Client(t, kgo.DefaultProduceTopic(topic)), &kgo.Record{Value: []byte("over tls")})
			if ev := c.next(t); ev.Data != "over tls" {
				t.Fatalf("event = %+v", ev)
			}
		})
	}
}

// neverReady checks, over several metadata attempts, that the gateway does not turn ready.
func (g *gateway) neverReady(t *testing.T, d time.Duration, why string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		if code, body := get(t, g.admin+"/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("%s readyz = %d %s", why, code, body)
		}
		<-time.After(100 * time.Millisecond)
	}
}

// TestNewReleasesOnError: a gateway that cannot start, at any step of New, closes what New had made before
// that step (the Kafka clients of the feed, the replays and the checkpoints, the stream writers, the limiter's
// Redis goroutine, the listeners): starting it again and again leaves no goroutines behind.
func TestNewReleasesOnError(t *testing.T) {
	var lc net.ListenConfig
	busy, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	taken := func(c *Config) { c.Listen = busy.Addr().String() }
	for _, tc := range []struct {
		name   string
		mutate func(c *Config)
		want   string // in New's error
	}{
		{"clients' port taken", taken, "listen"},
		{"admin port taken", func(c *Config) { c.AdminListen = busy.Addr().String() }, "listen"},
		{"tracing does not start", func(c *Config) { c.OTLPEndpoint = "ftp://collector:4318" }, "otlp endpoint"},
		{"v2 ids, then a port taken", func(c *Config) { c.IDFormat, c.PositionTopic = "v2", "p"; taken(c) }, "listen"},
		{"a bad host entry", func(c *Config) { c.AllowedHosts = []string{"*.com"} }, "allowed-hosts"},
		{"a bad origin", func(c *Config) { c.CORS.Origins = []string{"null"} }, "cors-origins"},
		{"no key file", func(c *Config) {
			c.Auth.Algorithms, c.Auth.HMACSecretFile = []string{"HS256"}, filepath.Join(t.TempDir(), "missing")
		}, "missing"},
		{"a bad trusted proxy", func(c *Config) { c.Limits.TrustedProxies = []string{"nonsense"} }, "nonsense"},
		{"limits in Redis, then a port taken", func(c *Config) {
			c.Limits.MaxPerIP, c.Limits.Redis.Addr = 3, "127.0.0.1:1" // never contacted
			taken(c)
		}, "listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaults()
			cfg.Kafka.Brokers = []string{"127.0.0.1:1"} // never contacted: New does not reach Kafka
			cfg.Topics = []string{"t"}
			cfg.DemoTopic = "t"
			cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
			tc.mutate(&cfg)
			log := slog.New(slog.DiscardHandler)
			try := func() {
				if _, err := New(cfg, log); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("New: %v, want an error with %q", err, tc.want)
				}
			}
			try() // the first call starts what stays for the process (the HTTP and metric packages' own)
			before := runtime.NumGoroutine()
			for range 10 {
				try()
			}
			kafkatest.WaitFor(t, 5*time.Second, "the goroutines of the failed starts to end", func() bool {
				return runtime.NumGoroutine() <= before+2
			})
		})
	}
}
