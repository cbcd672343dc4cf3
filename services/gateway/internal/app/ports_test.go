package app

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestPorts: the clients' port serves streams and the dashboard only; the admin port serves metrics, health
// and readiness (GET and HEAD), and Go's profiles only with the pprof setting.
func TestPorts(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, nil)
	g.waitReady(t)
	withPprof := startGateway(t, []string{topic}, func(c *Config) { c.Pprof = true })
	for _, tc := range []struct {
		name, method, url string
		status            int
		body              string // a substring of the body; "" for none
	}{
		{"dashboard on the clients' port", "GET", g.url + "/", 200, "EventSource"},
		{"no metrics on the clients' port", "GET", g.url + "/metrics", 404, `"no such path: /metrics"`},
		{"no healthz on the clients' port", "GET", g.url + "/healthz", 404, `"error"`},
		{"no readyz on the clients' port", "GET", g.url + "/readyz", 404, `"error"`},
		{"no pprof on the clients' port", "GET", withPprof.url + "/debug/pprof/", 404, `"error"`},
		{"metrics", "GET", g.admin + "/metrics", 200, "ssegate_connections_open"},
		{"healthz", "GET", g.admin + "/healthz", 200, `{"status":"ok"}`},
		{"healthz HEAD", "HEAD", g.admin + "/healthz", 200, ""},
		{"readyz", "GET", g.admin + "/readyz", 200, `{"ready":true}`},
		{"readyz HEAD", "HEAD", g.admin + "/readyz", 200, ""},
		{"no streams on the admin port", "GET", g.admin + "/streams/" + topic, 404, `"error"`},
		{"no dashboard on the admin port", "GET", g.admin + "/", 404, `"error"`},
		{"pprof off by default", "GET", g.admin + "/debug/pprof/", 404, `"error"`},
		{"pprof index", "GET", withPprof.admin + "/debug/pprof/", 200, "goroutine"},
		{"pprof profile by name", "GET", withPprof.admin + "/debug/pprof/heap?debug=1", 200, "heap profile"},
		{"pprof cmdline", "GET", withPprof.admin + "/debug/pprof/cmdline", 200, ""},
		{"POST on healthz", "POST", g.admin + "/healthz", 405, `"method POST not allowed"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, tc.url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
				t.Fatalf("%s %s = %d %.200q, want %d with %q", tc.method, tc.url, resp.StatusCode, b, tc.status, tc.body)
			}
			if tc.method == "HEAD" && len(b) != 0 {
				t.Fatalf("HEAD answered with a body: %q", b)
			}
			if tc.status >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("error with Content-Type %q", resp.Header.Get("Content-Type"))
			}
		})
	}
}

// rawResponse sends raw bytes on a new connection (or on c when not nil) and reads one response.
func rawResponse(t *testing.T, addr string, c net.Conn, request string) (*http.Response, string, net.Conn) {
	t.Helper()
	if c == nil {
		var err error
		if c, err = net.DialTimeout("tcp", addr, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), c
}

// TestEarlyErrorsAreJSON: what net/http answers before any handler runs (headers too large, a request it
// cannot parse) is JSON like every other error, on both ports, for a first request and for a later one on a
// kept-alive connection.
func TestEarlyErrorsAreJSON(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	g := startGateway(t, []string{topic}, nil)
	big := strings.Repeat("x", 100<<10) // net/http reads up to 4 KiB (8 KiB on a kept-alive connection) past the limit
	for _, port := range []struct{ name, base string }{{"clients", g.url}, {"admin", g.admin}} {
		u, _ := url.Parse(port.base)
		for _, tc := range []struct {
			name, request string
			status        int
			msg           string
		}{
			{"headers too large", "GET / HTTP/1.1\r\nHost: x\r\nLast-Event-ID: " + big + "\r\n\r\n", 431, "request header fields too large: the request line and headers may hold at most 65536 bytes"},
			{"request line too large", "GET /" + big + " HTTP/1.1\r\nHost: x\r\n\r\n", 431, "request header fields too large"},
			{"malformed request line", "HELLO\r\n\r\n", 400, "bad request"},
			{"no Host", "GET / HTTP/1.1\r\n\r\n", 400, "bad request: missing required Host header"},
			{"unknown transfer encoding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "unsupported transfer encoding"},
			{"unsupported version", "GET / HTTP/2.7\r\nHost: x\r\n\r\n", 505, "http version not supported"},
		} {
			t.Run(port.name+"/"+tc.name, func(t *testing.T) {
				resp, body, _ := rawResponse(t, u.Host, nil, tc.request)
				checkJSONError(t, resp, body, tc.status, tc.msg)
			})
		}
		t.Run(port.name+"/too large after a good request", func(t *testing.T) {
			path := "/healthz"
			if port.name == "clients" {
				path = "/"
			}
			resp, _, c := rawResponse(t, u.Host, nil, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp.StatusCode != 200 || resp.Close {
				t.Fatalf("first request: %d, close %v", resp.StatusCode, resp.Close)
			}
			resp, body, _ := rawResponse(t, u.Host, c, "GET "+path+" HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n")
			checkJSONError(t, resp, body, 431, "request header fields too large")
		})
	}
}

// TestHeaderTimeout: a client that does not finish its request line and headers within the header timeout is
// answered 408 in JSON (net/http alone answers 400, or nothing), on a new connection and on a kept-alive one;
// a connection on which nothing came is closed without an answer. The server and listener are the ports' own,
// with a short timeout.
func TestHeaderTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	ln, err := listen("127.0.0.1:0", timeout)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), timeout)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	const full = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name    string
		before  string // a whole request answered first on the same connection; "" for none
		partial string
		status  int // 0: the connection is closed without an answer
	}{
		{"request line cut", "", "GET / HT", 408},
		{"request line, no headers", "", "GET / HTTP/1.1\r\n", 408},
		{"headers not ended", "", "GET / HTTP/1.1\r\nHost: x\r\n", 408},
		{"header line cut", "", "GET / HTTP/1.1\r\nHost: x\r\nX-A: b", 408},
		{"kept-alive, second request cut", full, "GET / HTTP/1.1\r\nHost: x\r\n", 408},
		{"nothing sent", "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c net.Conn
			if tc.before != "" {
				resp, body, conn := rawResponse(t, ln.Addr().String(), nil, tc.before)
				if resp.StatusCode != 200 || body != "ok" {
					t.Fatalf("first request: %d %q", resp.StatusCode, body)
				}
				c = conn
			}
			if tc.status == 0 {
				got := rawRead(t, ln.Addr().String(), c, tc.partial)
				if got != "" {
					t.Fatalf("answered %q, want a close without an answer", got)
				}
				return
			}
			resp, body, _ := rawResponse(t, ln.Addr().String(), c, tc.partial)
			checkJSONError(t, resp, body, tc.status, "request timeout: the request line and headers must arrive within 200ms")
			if !resp.Close {
				t.Error("the 408 keeps the connection open")
			}
		})
	}
}

// rawRead sends raw bytes on a new connection (or on c when not nil) and reads until the server closes it.
func rawRead(t *testing.T, addr string, c net.Conn, request string) string {
	t.Helper()
	if c == nil {
		var err error
		if c, err = net.DialTimeout("tcp", addr, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatalf("write: %v", err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(b)
}

func checkJSONError(t *testing.T, resp *http.Response, body string, status int, msg string) {
	t.Helper()
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%d body %q is not JSON: %v", resp.StatusCode, body, err)
	}
	if resp.StatusCode != status || !strings.Contains(e.Error, msg) {
		t.Fatalf("got %d %q, want %d with error %q", resp.StatusCode, body, status, msg)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
}

// TestPanicIsJSON: a handler that panics answers 500 in JSON.
func TestPanicIsJSON(t *testing.T) {
	var logged strings.Builder
	r := newEngine(slog.New(slog.NewTextHandler(&logged, nil)))
	r.GET("/boom", func(*gin.Context) { panic("boom") })
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/boom", nil))
	if w.Code != 500 || w.Body.String() != `{"error":"internal error"}` {
		t.Fatalf("panic answered %d %q", w.Code, w.Body.String())
	}
	if !strings.Contains(logged.String(), "handler panicked") || !strings.Contains(logged.String(), "boom") {
		t.Fatalf("the panic is not logged: %q", logged.String())
	}
}
