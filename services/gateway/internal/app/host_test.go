package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHostPolicy: which Host headers an allowed-hosts list answers.
func TestHostPolicy(t *testing.T) {
	entries := []string{
		"stream.example.com", "Events.Example.com.", "local:8080", "*.svc.cluster.local", "*.apps.example.com:8443",
		"192.0.2.7", "[2001:db8::7]:8080", "10.0.0.0/8", "fd00::/8",
	}
	p, err := newHostPolicy(entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"stream.example.com", true},
		{"stream.example.com:8080", true}, // an entry without a port allows every port
		{"STREAM.example.com", true},
		{"stream.example.com.", true}, // the same name in DNS
		{"events.example.com", true},
		{"evil.example", false},
		{"stream.example.com.evil.example", false},
		{"evilstream.example.com", false},
		{"", false},
		{"local:8080", true},
		{"local", false}, // an entry with a port allows that port only
		{"local:80", false},
		{"local:08080", true},
		{"gw.ns.svc.cluster.local", true},
		{"gw-0.gw-headless.ns.svc.cluster.local:8080", true},
		{"svc.cluster.local", false}, // a pattern needs a label before its suffix
		{"x.svc.cluster.local.evil.example", false},
		{"a.apps.example.com:8443", true},
		{"a.apps.example.com", false},
		{"192.0.2.7", true},
		{"192.0.2.7:8080", true},
		{"192.0.2.8", false},
		{"10.1.2.3:80", true},
		{"[::ffff:10.1.2.3]", true}, // IPv4-mapped is IPv4
		{"[2001:db8::7]:8080", true},
		{"[2001:db8::7]", false},
		{"[fd00::1]:8080", true},
		{"[fe80::1%eth0]", false},
		{"stream.example.com:x", false},
		{"stream.example.com:", false},
		{"[::1", false},
	} {
		if got := p.allows(tc.host); got != tc.want {
			t.Errorf("allows(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
	var none *hostPolicy
	if !none.allows("anything.example") || !none.allows("") {
		t.Error("without entries, some host is refused")
	}
}

// TestHostPolicyInvalid: entries that cannot be meant are refused at start, naming the setting.
func TestHostPolicyInvalid(t *testing.T) {
	for _, e := range []string{
		"", "*", "*.com", "a.*.example.com", "ex ample.com", "example.com:0", "example.com:70000",
		"example.com:http", "10.0.0.0/33", "10.0.0.0/8:80", "[fe80::1%eth0]", "https://example.com", "exa/mple",
	} {
		if _, err := newHostPolicy([]string{e}); err == nil || !strings.Contains(err.Error(), "allowed-hosts (SSEGATE_ALLOWED_HOSTS)") {
			t.Errorf("entry %q: %v, want an allowed-hosts error", e, err)
		}
	}
	if p, err := newHostPolicy(nil); p != nil || err != nil {
		t.Errorf("no entries: %v %v, want a nil policy", p, err)
	}
}

// TestHostCheck: with allowed-hosts, the clients' port answers a Host it does not list with 421 and a JSON
// reason before anything else (streams, the dashboard, unknown paths, preflights; an allowed origin does not
// help), counted per topic; listed hosts are served; the admin port answers any Host. Without the setting every
// Host is served. Kafka is not needed: a stream answers before it reaches Kafka.
func TestHostCheck(t *testing.T) {
	const topic = "orders"
	offline := []string{"127.0.0.1:1"}
	g := startGatewayOn(t, offline, []string{topic}, func(c *Config) {
		c.AllowedHosts = []string{"stream.example.com", "*.svc.cluster.local", "127.0.0.0/8"}
		c.CORS.Origins = []string{"https://evil.example"}
	})
	open := startGatewayOn(t, offline, []string{topic}, nil)
	for _, tc := range []struct {
		name   string
		g      *gateway
		method string
		path   string
		host   string // "" sends the address the client connects to
		h      http.Header
		status int // 421 is a refusal, checked for its JSON
	}{
		{"allowed name", g, "GET", "/streams/" + topic, "stream.example.com", nil, 200},
		{"allowed name with a port", g, "GET", "/streams/" + topic, "stream.example.com:8080", nil, 200},
		{"in-cluster name", g, "GET", "/streams/" + topic, "sse-gateway.events.svc.cluster.local", nil, 200},
		{"the address connected to", g, "GET", "/streams/" + topic, "", nil, 200},
		{"a rebound name", g, "GET", "/streams/" + topic, "evil.example", nil, 421},
		{"a rebound name, same-origin page", g, "GET", "/streams/" + topic, "evil.example:8080", http.Header{"Origin": {"http://evil.example:8080"}}, 421},
		{"a rebound name, an allowed origin", g, "GET", "/streams/" + topic, "evil.example", http.Header{"Origin": {"https://evil.example"}}, 421},
		{"the dashboard", g, "GET", "/", "evil.example", nil, 421},
		{"an unknown path", g, "GET", "/nope", "evil.example", nil, 421},
		{"a topic not served", g, "GET", "/streams/nope", "evil.example", nil, 421},
		{"a preflight", g, "OPTIONS", "/streams/" + topic, "evil.example", http.Header{"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"GET"}}, 421},
		{"the suffix alone", g, "GET", "/streams/" + topic, "svc.cluster.local", nil, 421},
		{"an address outside the ranges", g, "GET", "/streams/" + topic, "192.0.2.1", nil, 421},
		{"no allowed-hosts: any host", open, "GET", "/streams/" + topic, "evil.example", nil, 200},
		{"no allowed-hosts: the dashboard", open, "GET", "/", "evil.example", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := requestHost(t, tc.method, tc.g.url+tc.path, tc.host, tc.h)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status != http.StatusMisdirectedRequest {
				return
			}
			var js struct{ Error, Reason string }
			if err := json.Unmarshal([]byte(body), &js); err != nil || js.Reason != "host" || !strings.Contains(js.Error, "allowed-hosts") {
				t.Errorf("body %s, want JSON with reason host", body)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Content-Type") == "text/event-stream" {
				t.Errorf("refusal headers %v", resp.Header)
			}
		})
	}
	// The stream refusals of a served topic are counted: the three above, the preflight, the suffix and the
	// address.
	if got := metricValue(t, g, "ssegate_streams_refused_total", `topic="`+topic+`"`, `reason="host"`); got != 6 {
		t.Errorf(`ssegate_streams_refused_total{reason="host"} = %v, want 6`, got)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp, body := requestHost(t, "GET", g.admin+path, "evil.example", nil); resp.StatusCode == http.StatusMisdirectedRequest {
			t.Errorf("admin port %s: %d %s, want it to answer any Host", path, resp.StatusCode, body)
		}
	}
}

// requestHost sends a request with this Host header ("" for the URL's) and returns the answer with its body
// read (the opening of a stream).
func requestHost(t *testing.T, method, url, host string, h http.Header) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url, nil)
	if host != "" {
		req.Host = host
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		buf := make([]byte, 64)
		n, _ := io.ReadAtLeast(resp.Body, buf, 5) // "retry: ..."
		return resp, string(buf[:n])
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
