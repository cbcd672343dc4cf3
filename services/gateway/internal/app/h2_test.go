package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// tlsGateway starts a gateway whose clients' port speaks TLS with a throwaway certificate, and returns it
// with an HTTP/2 client trusting that certificate and a count of the connections the client opened.
func tlsGateway(t *testing.T, topics []string, mutate func(*Config)) (*gateway, *http.Client, *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	return tlsGatewayWith(t, newTestPair(t, "gateway"), certFile, keyFile, topics, mutate)
}

// tlsGatewayWith is tlsGateway with the pair given, installed at certFile and keyFile.
func tlsGatewayWith(t *testing.T, pair testPair, certFile, keyFile string, topics []string, mutate func(*Config)) (*gateway, *http.Client, *atomic.Int64) {
	t.Helper()
	pair.install(t, certFile, keyFile)
	g := startGateway(t, topics, func(c *Config) {
		c.TLS = TLSConfig{CertFile: certFile, KeyFile: keyFile}
		if mutate != nil {
			mutate(c)
		}
	})
	conns := new(atomic.Int64)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pair.pool(), VerifyConnection: func(tls.ConnectionState) error {
			conns.Add(1)
			return nil
		}},
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return g, &http.Client{Transport: tr}, conns
}

// TestShutdownDrainsHTTP2: streams that share one HTTP/2 connection behave at shutdown as HTTP/1.1 ones do
// (they get every record through the propagation window, then end cleanly in the drain, their ids exact),
// and the connection is told to go away as the drain starts: the first request after it, a reconnect, opens
// a new connection (which the Service can send to another pod) and gets a short retry and its position.
func TestShutdownDrainsHTTP2(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g, hc, conns := tlsGateway(t, []string{topic}, func(c *Config) {
		c.Propagation = time.Second
		c.Drain = 2 * time.Second
	})
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var olds []*sseClient
	for range 5 {
		c := connectVia(t, ctx, hc, g.url+"/streams/"+topic)
		if c.resp.ProtoMajor != 2 {
			t.Fatalf("the stream came over %s, want HTTP/2", c.resp.Proto)
		}
		olds = append(olds, c)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 streams took %d connections, want 1", n)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("before")})
	for _, old := range olds {
		if ev := old.next(t); ev.Data != "before" || ev.ID != "v1:0-0" {
			t.Fatalf("event = %+v", ev)
		}
	}
	start := time.Now()
	g.stop()
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("during")})
	for _, old := range olds {
		if ev := old.next(t); ev.Data != "during" || ev.ID != "v1:0-1" {
			t.Fatalf("a stream open before the shutdown, in the propagation window: %+v", ev)
		}
	}
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Fatalf("the checks of the propagation window took %v; the test cannot tell the window from the drain", took)
	}
	time.Sleep(time.Until(start.Add(1200 * time.Millisecond)))
	code, body := getVia(t, hc, g.url+"/streams/"+topic)
	var retry int
	var id string
	if _, err := fmt.Sscanf(body, "retry: %d\nid: %s\n\n", &retry, &id); err != nil || code != http.StatusOK || id != "v1:0-1" {
		t.Fatalf("a reconnect in the drain: %d %q (%v), want 200, a retry and id v1:0-1, then the end", code, body, err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("the reconnect in the drain was the client's connection number %d, want 2: no GOAWAY as the drain began", n)
	}
	for i, old := range olds {
		if _, err := old.p.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("stream %d, open before the shutdown, ended with %v, want a clean end in the drain", i, err)
		}
	}
	g.waitStopped(t)
}

// TestH2CBesideHTTP1: with h2c, the clients' port serves a stream over cleartext HTTP/2 (prior knowledge)
// and one over HTTP/1.1 side by side, both exact; the HTTP/1.1 one is still taken over by the writer pool,
// and net/http's early errors on HTTP/1.1 are still JSON.
func TestH2CBesideHTTP1(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, func(c *Config) { c.TLS.H2C = true })
	g.waitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: p}}
	c2 := connectVia(t, ctx, h2c, g.url+"/streams/"+topic)
	c1 := connect(t, ctx, g.url+"/streams/"+topic)
	if c2.resp.ProtoMajor != 2 || c1.resp.ProtoMajor != 1 {
		t.Fatalf("streams came over %s and %s, want HTTP/2 and HTTP/1.1", c2.resp.Proto, c1.resp.Proto)
	}
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	kafkatest.Produce(t, cl, &kgo.Record{Value: []byte("one")}, &kgo.Record{Value: []byte("two")})
	for _, c := range []*sseClient{c2, c1} {
		for i, want := range []string{"one", "two"} {
			if ev := c.next(t); ev.Data != want || ev.ID != fmt.Sprintf("v1:0-%d", i) {
				t.Fatalf("%s: event %+v, want %s at offset %d", c.resp.Proto, ev, want, i)
			}
		}
	}
	kafkatest.WaitFor(t, 10*time.Second, "the HTTP/1.1 stream to be parked", func() bool {
		return metricValue(t, g, "ssegate_connections_parked", `topic="`+topic+`"`) == 1
	})
	// At least the 24 bytes of HTTP/2's preface: net/http waits for them before it tells the protocols apart.
	u := g.url[len("http://"):]
	resp, body, _ := rawResponse(t, u, nil, "GET /streams/x HTTP/1.1\r\n\r\n")
	checkJSONError(t, resp, body, 400, "bad request: missing required Host header")
}

// TestTLSRotationInGateway: the gateway's clients' port presents the certificate on disk after a rotation,
// without a restart, to new connections over HTTP/2, and its metrics say when the certificate in service
// expires and that it was reloaded.
func TestTLSRotationInGateway(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	a, b := newTestPair(t, "a"), newTestPairUntil(t, "b", time.Now().Add(48*time.Hour))
	g, _, _ := tlsGatewayWith(t, a, certFile, keyFile, []string{topic}, nil)
	g.waitReady(t)
	seen := func() (string, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true} //nolint:gosec // the test reads the certificate presented
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(g.url + "/")
		if err != nil {
			return "", err
		}
		_ = resp.Body.Close()
		if resp.ProtoMajor != 2 {
			return "", fmt.Errorf("came over %s", resp.Proto)
		}
		return resp.TLS.PeerCertificates[0].Subject.CommonName, nil
	}
	if cn, err := seen(); err != nil || cn != "a" {
		t.Fatalf("before the rotation: %q, %v; want a over HTTP/2", cn, err)
	}
	if got := metricValue(t, g, "ssegate_tls_certificate_expiry_seconds"); got != float64(a.Cert.NotAfter.Unix()) {
		t.Errorf("expiry metric = %v, want %d", got, a.Cert.NotAfter.Unix())
	}
	b.install(t, certFile, keyFile)
	kafkatest.WaitFor(t, 5*time.Second, "the rotated certificate", func() bool {
		cn, err := seen()
		return err == nil && cn == "b"
	})
	if got := metricValue(t, g, "ssegate_tls_certificate_expiry_seconds"); got != float64(b.Cert.NotAfter.Unix()) {
		t.Errorf("expiry metric after the rotation = %v, want %d", got, b.Cert.NotAfter.Unix())
	}
	if got := metricValue(t, g, "ssegate_tls_certificate_reloads_total", `result="loaded"`); got != 1 {
		t.Errorf("reloads loaded = %v, want 1", got)
	}
}
