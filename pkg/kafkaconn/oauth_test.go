package kafkaconn

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// tokenEndpoint answers the client-credentials grant of "id"/"secret" with tokens "t1", "t2", ... living
// expiresIn seconds (none when 0: the token is then a JWT whose exp is a minute and a half from its issue);
// it fails with a 503 while down is set and refuses other clients with invalid_client.
type tokenEndpoint struct {
	srv       *httptest.Server
	calls     atomic.Int64
	down      atomic.Bool
	expiresIn int
	scope     atomic.Value // the last scope asked for
}

func newTokenEndpoint(t *testing.T, expiresIn int) *tokenEndpoint {
	e := &tokenEndpoint{expiresIn: expiresIn}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	t.Cleanup(e.srv.Close)
	return e
}

// clock is a settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

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

// TestTokenRefresh: a token is reused until 80% of its lifetime has passed, then a new one is asked for; a
// refresh that fails keeps the old token while it has not expired, and fails once it has.
func TestTokenRefresh(t *testing.T) {
	e := newTokenEndpoint(t, 100)
	src, c := source(t, e, "s3cr=t")
	for _, step := range []struct {
		at    time.Duration // since the start
		down  bool
		want  string // the token, or the error's text
		calls int64
	}{
		{0, false, "t1", 1},
		{79 * time.Second, false, "t1", 1},
		{81 * time.Second, false, "t2", 2},
		{165 * time.Second, true, "t2", 2},                      // due at 161 s, the endpoint is down, t2 lives until 181 s
		{182 * time.Second, true, "503 Service Unavailable", 2}, // t2 has expired
		{183 * time.Second, false, "t3", 3},
	} {
		c.t = time.Unix(1_000_000, 0).Add(step.at)
		e.down.Store(step.down)
		got, err := src.get(t.Context())
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, step.want) || e.calls.Load() != step.calls {
			t.Fatalf("at %v: got %q after %d successful calls, want %q after %d", step.at, got, e.calls.Load(), step.want, step.calls)
		}
	}
	if s, _ := e.scope.Load().(string); s != "kafka read" {
		t.Errorf("scope asked for: %q, want %q", s, "kafka read")
	}
}

// TestTokenLifetimeFromJWT: without expires_in the token's own exp claim says when to refresh.
func TestTokenLifetimeFromJWT(t *testing.T) {
	e := newTokenEndpoint(t, 0)
	src, c := source(t, e, "s3cr=t")
	c.t = time.Now()
	if _, err := src.get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := src.expires.Sub(c.t); d < 85*time.Second || d > 95*time.Second {
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

// TestValidateOAuth: OAUTHBEARER needs a token endpoint, a client id and a secret, and an http endpoint,
// which sends the secret in clear, only with the plaintext allowance.
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
		{"mechanism in lower case", func(s *SASLConfig) { s.Mechanism = "oauthbearer" }, nil, ""},
		{"extensions", func(s *SASLConfig) {
			s.OAuth.Extensions = map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
		}, nil, ""},
		{"extension key not letters", func(s *SASLConfig) { s.OAuth.Extensions = map[string]string{"logical-cluster": "x"} }, ErrOAuthConfig, "kafka-sasl-oauth-extensions"},
		{"extension named auth", func(s *SASLConfig) { s.OAuth.Extensions = map[string]string{"auth": "x"} }, ErrOAuthConfig, "kafka-sasl-oauth-extensions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SASLConfig{Mechanism: MechanismOAuthBearer, OAuth: ok}
			tc.mutate(&s)
			err := Config{Brokers: []string{"k:9092"}, SASL: s}.Validate()
			if tc.want == nil && err != nil || tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.setting)) {
				t.Fatalf("Validate: %v, want %v naming %q", err, tc.want, tc.setting)
			}
		})
	}
}
