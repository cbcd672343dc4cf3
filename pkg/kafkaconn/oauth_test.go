package kafkaconn

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tokenEndpoint answers the client-credentials grant of "id"/"s3cr=t" with tokens "t1", "t2", ... living
// expiresIn seconds (none when 0: the token is then a JWT whose exp is a minute and a half from its issue);
// it fails with a 503 while down is set, holds requests while hang is set (until the test ends), and
// refuses other clients with invalid_client.
type tokenEndpoint struct {
	srv       *httptest.Server
	calls     atomic.Int64 // tokens issued
	asked     atomic.Int64 // requests
	down      atomic.Bool
	hang      atomic.Bool
	expiresIn int
	scope     atomic.Value // the last scope asked for
}

func newTokenEndpoint(t *testing.T, expiresIn int) *tokenEndpoint {
	e := &tokenEndpoint{expiresIn: expiresIn}
	release := make(chan struct{})
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.asked.Add(1)
		if e.hang.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		if e.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		id, secret, _ := r.BasicAuth()
		if id != "id" || secret != "s3cr=t" || r.FormValue("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = fmt.Fprint(w, `{"error":"invalid_client","error_description":"bad secret"}`)
			return
		}
		e.scope.Store(r.FormValue("scope"))
		n := e.calls.Add(1)
		if expiresIn == 0 {
			exp := time.Now().Add(90 * time.Second).Unix()
			payload := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"exp":%d}`, exp))
			_, _ = fmt.Fprintf(w, `{"access_token":"h.%s.s","token_type":"Bearer"}`, payload)
			return
		}
		_, _ = fmt.Fprintf(w, `{"access_token":"t%d","token_type":"Bearer","expires_in":%d}`, n, expiresIn)
	}))
	t.Cleanup(func() { close(release); e.srv.Close() })
	return e
}

// clock is a settable now, read by background refreshes too.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func source(t *testing.T, e *tokenEndpoint, secret string) (*tokenSource, *clock) {
	t.Helper()
	src, err := newTokenSource(OAuthConfig{TokenURL: e.srv.URL, ClientID: "id", ClientSecret: secret, Scope: "kafka read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1_000_000, 0)}
	src.now = c.now
	return src, c
}

// TestTokenRefresh: a token is handed out until it expires; once 80% of its lifetime has passed a new one is
// asked for in the background, the old one handed out meanwhile. A refresh that fails keeps the old token
// while it has not expired; without a valid token a get waits for a request of its own, whose failure is the
// answer, and within the backoff that follows gets the same failure without asking again.
func TestTokenRefresh(t *testing.T) {
	e := newTokenEndpoint(t, 100)
	src, c := source(t, e, "s3cr=t")
	for _, step := range []struct {
		at         time.Duration // since the start
		down       bool
		want, then string // the token (or a piece of the error) handed out, and once the background request ended
		asked      int64  // requests by then
	}{
		{0, false, "t1", "t1", 1},
		{79 * time.Second, false, "t1", "t1", 1},
		{81 * time.Second, false, "t1", "t2", 2},
		{165 * time.Second, true, "t2", "t2", 3},                                           // due at 161 s, the endpoint is down, t2 lives until 181 s
		{182 * time.Second, true, "503 Service Unavailable", "503 Service Unavailable", 4}, // t2 has expired; backing off
		{182*time.Second + refreshBackoffMax, false, "t3", "t3", 5},
	} {
		c.set(time.Unix(1_000_000, 0).Add(step.at))
		e.down.Store(step.down)
		for i, want := range []string{step.want, step.then} {
			got, err := src.get(t.Context())
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, want) {
				t.Fatalf("at %v, get %d: %q, want %q", step.at, i, got, want)
			}
			src.r.settle()
		}
		if n := e.asked.Load(); n != step.asked {
			t.Fatalf("at %v: %d requests, want %d", step.at, n, step.asked)
		}
	}
	if s, _ := e.scope.Load().(string); s != "kafka read" {
		t.Errorf("scope asked for: %q, want %q", s, "kafka read")
	}
}

// TestTokenRefreshDoesNotWait: a token due for refresh while the identity provider hangs is handed out at once
// to every handshake, which do not queue behind the one background request.
func TestTokenRefreshDoesNotWait(t *testing.T) {
	e := newTokenEndpoint(t, 100)
	src, c := source(t, e, "s3cr=t")
	if tok, err := src.get(t.Context()); err != nil || tok != "t1" {
		t.Fatalf("first get: %q, %v", tok, err)
	}
	e.hang.Store(true)
	c.set(c.now().Add(90 * time.Second)) // due at 80 s, valid until 100 s
	handshakesDoNotQueue(t, src.get, "t1", &e.asked, 2)
}

// TestTokenLifetime: a token lives the earlier of expires_in and its own exp claim, whichever it has, or a
// minute when it has neither; an exp already past (clocks apart) is not believed.
func TestTokenLifetime(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	jwtExpiring := func(d time.Duration) string {
		return "h." + base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"exp":%d}`, now.Add(d).Unix())) + ".s"
	}
	for _, tc := range []struct {
		name      string
		token     string
		expiresIn string
		want      time.Duration
	}{
		{"expires_in alone", "opaque", "300", 300 * time.Second},
		{"exp alone", jwtExpiring(90 * time.Second), "", 90 * time.Second},
		{"exp earlier than expires_in", jwtExpiring(90 * time.Second), "3600", 90 * time.Second},
		{"expires_in earlier than exp", jwtExpiring(time.Hour), "60", 60 * time.Second},
		{"exp past", jwtExpiring(-time.Minute), "120", 120 * time.Second},
		{"neither", "opaque", "", tokenDefaultLife},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lifetime(tokenAnswer{AccessToken: tc.token, ExpiresIn: json.Number(tc.expiresIn)}, now); got != tc.want {
				t.Fatalf("lifetime %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTokenLifetimeFromJWT: without expires_in the token's own exp claim says when to refresh.
func TestTokenLifetimeFromJWT(t *testing.T) {
	e := newTokenEndpoint(t, 0)
	src, c := source(t, e, "s3cr=t")
	c.set(time.Now())
	if _, err := src.get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := src.r.cur.expires.Sub(c.now()); d < 85*time.Second || d > 95*time.Second {
		t.Fatalf("a token with exp 90 s ahead is taken to live %v", d)
	}
}

// TestTokenRefused: the endpoint's refusal is an ErrOAuthToken naming the endpoint and the OAuth error.
func TestTokenRefused(t *testing.T) {
	e := newTokenEndpoint(t, 100)
	src, _ := source(t, e, "wrong")
	_, err := src.get(t.Context())
	if !errors.Is(err, ErrOAuthToken) || !strings.Contains(err.Error(), "invalid_client") || !strings.Contains(err.Error(), e.srv.URL) {
		t.Fatalf("get: %v, want ErrOAuthToken naming invalid_client and the endpoint", err)
	}
}

// TestValidateOAuth: OAUTHBEARER needs a token endpoint, a client id and a secret (or its file); TLS to the
// brokers, since the bearer token goes as it is, and an https endpoint, since the secret does too, unless the
// plaintext allowance accepts that.
func TestValidateOAuth(t *testing.T) {
	ok := OAuthConfig{TokenURL: "https://idp.example/token", ClientID: "id", ClientSecret: "s"}
	for _, tc := range []struct {
		name    string
		mutate  func(*SASLConfig)
		want    error
		setting string
	}{
		{"complete", func(*SASLConfig) {}, nil, ""},
		{"no token url", func(s *SASLConfig) { s.OAuth.TokenURL = "" }, ErrOAuthConfig, "kafka-sasl-oauth-token-url"},
		{"not a url", func(s *SASLConfig) { s.OAuth.TokenURL = "idp.example/token" }, ErrOAuthConfig, "kafka-sasl-oauth-token-url"},
		{"http", func(s *SASLConfig) { s.OAuth.TokenURL = "http://idp.example/token" }, ErrOAuthConfig, "kafka-sasl-allow-plaintext"},
		{"http, allowed", func(s *SASLConfig) { s.OAuth.TokenURL = "http://idp.example/token"; s.AllowPlaintext = true }, nil, ""},
		{"no client id", func(s *SASLConfig) { s.OAuth.ClientID = "" }, ErrOAuthConfig, "kafka-sasl-oauth-client-id"},
		{"no secret", func(s *SASLConfig) { s.OAuth.ClientSecret = "" }, ErrOAuthConfig, "kafka-sasl-oauth-client-secret"},
		{"a secret file", func(s *SASLConfig) { s.OAuth.ClientSecret, s.OAuth.ClientSecretFile = "", "/run/secret" }, nil, ""},
		{"mechanism in lower case", func(s *SASLConfig) { s.Mechanism = "oauthbearer" }, nil, ""},
		{"extensions", func(s *SASLConfig) {
			s.OAuth.Extensions = map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
		}, nil, ""},
		{"extension key not letters", func(s *SASLConfig) { s.OAuth.Extensions = map[string]string{"logical-cluster": "x"} }, ErrOAuthConfig, "kafka-sasl-oauth-extensions"},
		{"without TLS", func(s *SASLConfig) {}, ErrOAuthWithoutTLS, "kafka-sasl-allow-plaintext"},
		{"without TLS, allowed", func(s *SASLConfig) { s.AllowPlaintext = true }, nil, ""},
		{"extension named auth", func(s *SASLConfig) { s.OAuth.Extensions = map[string]string{"auth": "x"} }, ErrOAuthConfig, "kafka-sasl-oauth-extensions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SASLConfig{Mechanism: MechanismOAuthBearer, OAuth: ok}
			tc.mutate(&s)
			c := Config{Brokers: []string{"k:9092"}, SASL: s, TLS: TLSConfig{Enabled: true}}
			if strings.HasPrefix(tc.name, "without TLS") {
				c.TLS = TLSConfig{}
			}
			err := c.Validate()
			if tc.want == nil && err != nil || tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.setting)) {
				t.Fatalf("Validate: %v, want %v naming %q", err, tc.want, tc.setting)
			}
		})
	}
}
