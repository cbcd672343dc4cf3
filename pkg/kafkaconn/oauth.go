package kafkaconn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/ssegate/ssegate/pkg/secret"
)

// OAuthConfig is SASL OAUTHBEARER with tokens from an OAuth 2.0 token endpoint, by the client-credentials
// grant (RFC 6749 section 4.4): what Confluent Cloud, Strimzi with an identity provider and most company
// clusters with single sign-on use.
type OAuthConfig struct {
	// TokenURL is the identity provider's token endpoint. Required with OAUTHBEARER. https, or http with
	// SASLConfig.AllowPlaintext (the client secret then goes in clear).
	TokenURL string
	// ClientID and ClientSecret are the client's credentials, sent with HTTP basic authentication. A client
	// id, and a secret or a ClientSecretFile, are required. ClientSecret is never logged.
	ClientID, ClientSecret string
	// ClientSecretFile is a file holding the client secret, read again when it changes (a rotated Kubernetes
	// Secret is used by the next token request); it wins over ClientSecret. Empty means ClientSecret.
	ClientSecretFile string
	// Scope, when not empty, is the scope asked for (space-separated).
	Scope string
	// Audience, when not empty, is sent as the audience parameter, which some providers need to issue a
	// token for an API.
	Audience string
	// Extensions are SASL extensions sent to the brokers with the token (RFC 7628 section 3.1): Confluent
	// Cloud wants logicalCluster and identityPoolId there. Keys are letters only, and not "auth".
	Extensions map[string]string
}

// Token refresh: once refreshAt of a token's lifetime has passed (the Java client's default refresh window) a
// new one is fetched in the background, the old one handed out meanwhile, and after a failed refresh while it
// has not expired; its lifetime is the earlier of expires_in and the token's own exp claim, or
// tokenDefaultLife when the answer has neither.
const (
	refreshAt        = 0.8
	tokenDefaultLife = time.Minute
	tokenTimeout     = 10 * time.Second
	maxTokenAnswer   = 64 << 10
)

// tokenSource gets and caches the tokens of an OAuthConfig, refreshing them in the background; safe for
// concurrent use.
type tokenSource struct {
	cfg    OAuthConfig
	secret secret.Value // the client secret, the file read again when it changes
	client *http.Client
	now    func() time.Time
	r      *refresher[string]
}

// newTokenSource returns the token source of cfg. The token endpoint's certificate is checked against the
// system roots and, when caFile is not empty, the CAs in it too (the brokers' CA file: a company CA
// often signs both), read again when it changes. The client secret file is read once here, to check it.
func newTokenSource(cfg OAuthConfig, caFile string) (*tokenSource, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		d, err := TLSConfig{CAFile: caFile}.newDialer(true)
		if err != nil {
			return nil, err
		}
		tc, err := d.config()
		if err != nil {
			return nil, err
		}
		// Direct connections check the CA file as it is at each dial; through a proxy, http.Transport makes
		// the TLS connection itself, with the CAs of the start.
		tr.TLSClientConfig, tr.DialTLSContext = tc, d.DialContext
	}
	s := &tokenSource{
		cfg:    cfg,
		secret: secret.Pick(cfg.ClientSecret, "kafka-sasl-oauth-client-secret-file", cfg.ClientSecretFile),
		client: &http.Client{Transport: tr, Timeout: tokenTimeout},
		now:    time.Now,
	}
	if _, err := s.secret.Get(); err != nil {
		return nil, err
	}
	s.r = newRefresher(s.fetchCred, func() time.Time { return s.now() })
	return s, nil
}

// mechanism is the OAUTHBEARER mechanism that authenticates each connection, and each re-authentication
// the broker asks for, with the source's current token.
func (s *tokenSource) mechanism() sasl.Mechanism {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := s.get(ctx)
		return oauth.Auth{Token: tok, Extensions: s.cfg.Extensions}, err
	})
}

// get returns the current token. A token due for refresh is still handed out while a new one is fetched in
// the background; a refresh that fails keeps the old token while it has not expired: a provider's short
// outage, or one that hangs, costs nothing.
func (s *tokenSource) get(ctx context.Context) (string, error) { return s.r.get(ctx) }

// fetchCred asks for a token and says when it is due for refresh (refreshAt of its lifetime) and expires.
func (s *tokenSource) fetchCred(ctx context.Context) (cred[string], error) {
	now := s.now()
	tok, life, err := s.fetch(ctx)
	if err != nil {
		return cred[string]{}, err
	}
	return cred[string]{val: tok, refresh: now.Add(time.Duration(float64(life) * refreshAt)), expires: now.Add(life)}, nil
}

// tokenAnswer is a token endpoint's answer (RFC 6749 sections 5.1 and 5.2).
type tokenAnswer struct {
	AccessToken string      `json:"access_token"`
	ExpiresIn   json.Number `json:"expires_in"`
	Error       string      `json:"error"`
	Description string      `json:"error_description"`
}

// fetch asks the token endpoint for a token and returns it with its lifetime.
func (s *tokenSource) fetch(ctx context.Context) (string, time.Duration, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if s.cfg.Scope != "" {
		form.Set("scope", s.cfg.Scope)
	}
	if s.cfg.Audience != "" {
		form.Set("audience", s.cfg.Audience)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("kafkaconn: oauth token request: %w", err)
	}
	// The id and secret go as they are, not form-encoded first: what the Java client does by default
	// (sasl.oauthbearer.header.urlencode=false) and what providers accept.
	clientSecret, err := s.secret.Get()
	if err != nil {
		return "", 0, err
	}
	req.SetBasicAuth(s.cfg.ClientID, clientSecret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := roundTrip(s.client, req)
	if err != nil {
		return "", 0, fmt.Errorf("kafkaconn: oauth token endpoint %s: %w", s.cfg.TokenURL, err)
	}
	var ans tokenAnswer
	jsonErr := json.Unmarshal(resp.body, &ans)
	switch {
	case resp.code != http.StatusOK && ans.Error != "":
		return "", 0, fmt.Errorf("kafkaconn: oauth token endpoint %s: %s: %s %s: %w", s.cfg.TokenURL, resp.status, ans.Error, ans.Description, ErrOAuthToken)
	case resp.code != http.StatusOK:
		return "", 0, fmt.Errorf("kafkaconn: oauth token endpoint %s: %s: %w", s.cfg.TokenURL, resp.status, ErrOAuthToken)
	case jsonErr != nil || ans.AccessToken == "":
		return "", 0, fmt.Errorf("kafkaconn: oauth token endpoint %s: the answer holds no access_token: %w", s.cfg.TokenURL, ErrOAuthToken)
	}
	return ans.AccessToken, lifetime(ans, s.now()), nil
}

// answer is what an endpoint asked for credentials answered.
type answer struct {
	code   int    // the status code
	status string // the status line's text, "401 Unauthorized"
	body   []byte // at most maxTokenAnswer bytes
}

// roundTrip sends req, an ask for credentials, and returns the answer.
func roundTrip(client *http.Client, req *http.Request) (answer, error) {
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenAnswer))
	if err != nil {
		return answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	return answer{resp.StatusCode, resp.Status, body}, nil
}

// lifetime is how long a token lives: the earlier of expires_in and its own exp claim, else whichever of
// them it has, else tokenDefaultLife. A token whose exp has passed (a clock ahead of the provider's) is taken
// at expires_in, or tokenDefaultLife: the broker is the judge.
func lifetime(ans tokenAnswer, now time.Time) time.Duration {
	life := time.Duration(0)
	if secs, err := ans.ExpiresIn.Float64(); err == nil && secs > 0 {
		life = time.Duration(secs * float64(time.Second))
	}
	if exp, ok := jwtExp(ans.AccessToken); ok && exp.After(now) && (life == 0 || exp.Sub(now) < life) {
		life = exp.Sub(now)
	}
	if life == 0 {
		life = tokenDefaultLife
	}
	return life
}

// jwtExp reads the exp claim of a JWT without checking it (the broker does): only to know when to refresh.
func jwtExp(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return time.Time{}, false
	}
	secs, err := claims.Exp.Float64()
	if err != nil || secs <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(secs), 0), true
}

// validate checks an OAUTHBEARER configuration; plaintext says an http token endpoint is allowed.
func (o OAuthConfig) validate(plaintext bool) error {
	u, err := url.Parse(o.TokenURL)
	switch {
	case o.TokenURL == "":
		return fmt.Errorf("kafka-sasl-oauth-token-url: %w", ErrOAuthConfig)
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("kafka-sasl-oauth-token-url %q: want an http or https URL: %w", o.TokenURL, ErrOAuthConfig)
	case u.Scheme == "http" && !plaintext:
		return fmt.Errorf("kafka-sasl-oauth-token-url %q would send the client secret in clear "+
			"(use https, or set kafka-sasl-allow-plaintext=true to accept that): %w", o.TokenURL, ErrOAuthConfig)
	case o.ClientID == "":
		return fmt.Errorf("kafka-sasl-oauth-client-id: %w", ErrOAuthConfig)
	case o.ClientSecret == "" && o.ClientSecretFile == "":
		return fmt.Errorf("kafka-sasl-oauth-client-secret (or kafka-sasl-oauth-client-secret-file): %w", ErrOAuthConfig)
	}
	for k, v := range o.Extensions {
		letters := k != "" && strings.IndexFunc(k, func(r rune) bool { return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') }) < 0
		if !letters || k == "auth" || strings.ContainsAny(v, "\x01") {
			return fmt.Errorf("kafka-sasl-oauth-extensions: %q=%q: keys are letters only and not \"auth\", values hold no control-A: %w", k, v, ErrOAuthConfig)
		}
	}
	return nil
}
