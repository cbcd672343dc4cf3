package source

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstream is an httptest server that records the headers of each request it receives and answers a
// redirect to the URL its redirect function returns, or, when that is empty, an empty event stream.
type upstream struct {
	srv      *httptest.Server
	redirect func() string

	mu   sync.Mutex
	seen []http.Header
}

func newUpstream(t *testing.T, tls bool, redirect func() string) *upstream {
	t.Helper()
	u := &upstream{redirect: redirect}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Clone())
		u.mu.Unlock()
		if loc := u.redirect(); loc != "" {
			http.Redirect(w, r, loc, http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
	})
	if tls {
		u.srv = httptest.NewTLSServer(h)
	} else {
		u.srv = httptest.NewServer(h)
	}
	t.Cleanup(u.srv.Close)
	return u
}

// requests returns the headers of the requests received so far.
func (u *upstream) requests() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.seen...)
}

// otherHost returns u's URL with the host name localhost instead of 127.0.0.1: the same server, seen as
// another host.
func (u *upstream) otherHost() string {
	return strings.Replace(u.srv.URL, "127.0.0.1", "localhost", 1)
}

// credentials are what the sources of TestRedirects send: custom headers (one of them a cookie) and a
// bearer token.
var credentials = map[string]string{
	"X-Api-Key":     "key-1",
	"Cookie":        "session=abc",
	"Authorization": "Bearer tok-1",
}

func TestRedirects(t *testing.T) {
	const (
		keep  = iota // the target receives the credentials
		strip        // the target receives the request without any credential
	)
	// Each case builds an origin server that redirects, and says where; target records what arrives.
	tests := []struct {
		name   string
		policy RedirectPolicy
		auth   AuthKind
		// route returns the URL the origin redirects to; target is a plain http server on another port.
		route    func(origin, target *upstream) string
		tlsFrom  bool // the origin is an https server
		refused  bool // the redirect must be refused: the target receives nothing
		received int  // keep or strip, when not refused
	}{
		{name: "same origin followed with credentials", route: func(o, _ *upstream) string { return o.srv.URL + "/moved" }, received: keep},
		{name: "same host other port refused by default", route: func(_, tg *upstream) string { return tg.srv.URL }, refused: true},
		{name: "other host refused by default", route: func(_, tg *upstream) string { return tg.otherHost() }, refused: true},
		{name: "same origin refused with none", policy: RedirectNone, route: func(o, _ *upstream) string { return o.srv.URL + "/moved" }, refused: true},
		{name: "same host other port with any strips", policy: RedirectAny, route: func(_, tg *upstream) string { return tg.srv.URL }, received: strip},
		{name: "basic auth to other port with any strips", policy: RedirectAny, auth: AuthBasic, route: func(_, tg *upstream) string { return tg.srv.URL }, received: strip},
		{name: "bearer auth to other port with any strips", policy: RedirectAny, auth: AuthBearer, route: func(_, tg *upstream) string { return tg.srv.URL }, received: strip},
		{name: "bearer auth within origin kept", auth: AuthBearer, route: func(o, _ *upstream) string { return o.srv.URL + "/moved" }, received: keep},
		{name: "other host with any strips", policy: RedirectAny, route: func(_, tg *upstream) string { return tg.otherHost() }, received: strip},
		{name: "https to http refused with any", policy: RedirectAny, tlsFrom: true, route: func(_, tg *upstream) string { return tg.srv.URL }, refused: true},
		{name: "https to http refused by default", tlsFrom: true, route: func(_, tg *upstream) string { return tg.srv.URL }, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := newUpstream(t, false, func() string { return "" })
			var origin *upstream
			moved := false // the origin redirects its first request only (same-origin cases come back)
			var mu sync.Mutex
			origin = newUpstream(t, tt.tlsFrom, func() string {
				mu.Lock()
				defer mu.Unlock()
				if moved {
					return ""
				}
				moved = true
				return tt.route(origin, target)
			})
			spec := redirectSpec(origin.srv.URL+"/stream", tt.policy, tt.auth)
			resp, o := New(spec, Options{HTTPClient: origin.srv.Client(), Logger: discardLogger()}).connect(t.Context(), "41")
			if resp != nil {
				_ = resp.Body.Close()
			}
			if tt.refused {
				assertRefused(t, o, target)
				return
			}
			if o.err != nil || resp == nil {
				t.Fatalf("connect: reason %v, err %v; want the stream", o.reason, o.err)
			}
			reached := target.requests()
			if len(origin.requests()) == 2 { // a redirect within the origin
				reached = origin.requests()[1:]
			}
			if len(reached) != 1 {
				t.Fatalf("the redirect target received %d requests, want 1", len(reached))
			}
			assertHeaders(t, reached[0], tt.received == keep, tt.auth)
		})
	}
}

// redirectSpec returns a source of url sending the credentials. With AuthNone the bearer token is one of
// its headers; with AuthBearer it is its auth; AuthBasic replaces it by basic auth.
func redirectSpec(url string, policy RedirectPolicy, kind AuthKind) Spec {
	spec := Spec{Name: "redirects", URL: url, Topic: "t", Redirects: policy, Header: http.Header{}}
	for k, v := range credentials {
		spec.Header.Set(k, v)
	}
	switch kind {
	case AuthBasic:
		spec.Header.Del("Authorization")
		spec.Auth = Auth{Kind: AuthBasic, Username: "ann", Secret: SecretValue("pw")}
	case AuthBearer:
		spec.Header.Del("Authorization")
		spec.Auth = Auth{Kind: AuthBearer, Secret: SecretValue("tok-1")}
	}
	return spec
}

// assertRefused checks that the connection ended with a refused redirect, naming no credential, and that
// the target received nothing.
func assertRefused(t *testing.T, o outcome, target *upstream) {
	t.Helper()
	var rerr *RedirectError
	if o.err == nil {
		t.Fatalf("the redirect was followed (%d requests reached the target); want it refused", len(target.requests()))
	}
	if o.reason != ReasonRedirect || !errors.As(o.err, &rerr) {
		t.Fatalf("connect: reason %v, err %v; want %v with a *RedirectError", o.reason, o.err, ReasonRedirect)
	}
	if n := len(target.requests()); n != 0 {
		t.Fatalf("the redirect target received %d requests, want none: %v", n, target.requests())
	}
	if msg := o.err.Error(); !strings.Contains(msg, "refused redirect") || strings.Contains(msg, "key-1") {
		t.Fatalf("error %q: want it to say the redirect was refused, without credentials", msg)
	}
}

// assertHeaders checks what a redirect target received: the credentials when keep, else none of them,
// and in both cases the headers every request of ingest carries.
func assertHeaders(t *testing.T, h http.Header, keep bool, kind AuthKind) {
	t.Helper()
	want := map[string]string{"Accept": "text/event-stream", "Cache-Control": "no-cache", "Last-Event-Id": "41"}
	for k, v := range credentials {
		want[k] = ""
		if keep {
			want[k] = v
		}
	}
	if kind == AuthBasic && keep {
		want["Authorization"] = "Basic YW5uOnB3"
	}
	want["Referer"] = h.Get("Referer")
	if !keep {
		want["Referer"] = ""
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("the redirect target received %s: %q, want %q", k, got, v)
		}
	}
}

func TestRedirectChainBackToOriginStaysStripped(t *testing.T) {
	var origin, other *upstream
	var mu sync.Mutex
	hops := 0
	origin = newUpstream(t, false, func() string {
		mu.Lock()
		defer mu.Unlock()
		hops++
		if hops == 1 {
			return other.srv.URL + "/away"
		}
		return ""
	})
	other = newUpstream(t, false, func() string { return origin.srv.URL + "/back" })
	spec := redirectSpec(origin.srv.URL+"/stream", RedirectAny, AuthBearer)
	resp, o := New(spec, Options{HTTPClient: origin.srv.Client(), Logger: discardLogger()}).connect(t.Context(), "41")
	if resp == nil {
		t.Fatalf("connect: reason %v, err %v; want the stream", o.reason, o.err)
	}
	_ = resp.Body.Close()
	reqs := origin.requests()
	if len(reqs) != 2 || len(other.requests()) != 1 {
		t.Fatalf("origin got %d requests, the other server %d; want 2 and 1", len(reqs), len(other.requests()))
	}
	// Back at the source's origin, but chosen by another server: still without credentials.
	assertHeaders(t, other.requests()[0], false, AuthBearer)
	assertHeaders(t, reqs[1], false, AuthBearer)
}

func TestRedirectLimit(t *testing.T) {
	var origin *upstream
	origin = newUpstream(t, false, func() string { return origin.srv.URL + "/again" })
	spec := redirectSpec(origin.srv.URL+"/stream", RedirectSameOrigin, AuthBearer)
	_, o := New(spec, Options{HTTPClient: origin.srv.Client(), Logger: discardLogger()}).connect(t.Context(), "")
	var rerr *RedirectError
	if o.reason != ReasonRedirect || !errors.As(o.err, &rerr) || !strings.Contains(rerr.Why, "after 10 requests") {
		t.Fatalf("connect: reason %v, err %v; want a refused redirect after 10", o.reason, o.err)
	}
	if n := len(origin.requests()); n != maxRedirects {
		t.Fatalf("%d requests, want %d", n, maxRedirects)
	}
}

func TestRefusedRedirectWaitsBackoffMax(t *testing.T) {
	tests := []struct {
		name    string
		reason  Reason
		atMost  time.Duration // the longest delay allowed (jitter adds up to a quarter)
		atLeast time.Duration
	}{
		{"refused redirect", ReasonRedirect, time.Second * 5 / 4, time.Second},
		{"bad status", ReasonBadStatus, time.Second * 5 / 4, time.Second},
		{"connect error", ReasonConnectError, 10 * time.Millisecond * 5 / 4, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bo := &backoff{min: 10 * time.Millisecond, max: time.Second}
			if d := bo.delay(outcome{reason: tt.reason}); d < tt.atLeast || d > tt.atMost {
				t.Fatalf("first delay after %v: %v, want %v..%v", tt.reason, d, tt.atLeast, tt.atMost)
			}
		})
	}
}

func TestParseRedirectPolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    RedirectPolicy
		wantErr bool
	}{
		{"", RedirectSameOrigin, false},
		{"same-origin", RedirectSameOrigin, false},
		{"any", RedirectAny, false},
		{"none", RedirectNone, false},
		{"always", 0, true},
		{"Same-Origin", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRedirectPolicy(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParseRedirectPolicy(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err == nil && tt.in != "" && got.String() != tt.in {
				t.Fatalf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"https://a.example/x", "https://A.example:443/y?q=1", true},
		{"http://a.example/x", "http://a.example:80/", true},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8081/", false},
		{"http://a.example/", "https://a.example/", false},
		{"https://a.example/", "https://b.a.example/", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	}
	for _, tt := range tests {
		t.Run(tt.a+" "+tt.b, func(t *testing.T) {
			a, b := mustParse(t, tt.a), mustParse(t, tt.b)
			if got := sameOrigin(a, b); got != tt.want {
				t.Fatalf("sameOrigin(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
