package app

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/gateway/internal/auth"
)

// AuthConfig is who may read what: how tokens are verified, where they may come from, and which topics need
// one. docs/security.md explains the model.
type AuthConfig struct {
	// Mode is what a topic without its own TopicModes entry asks of a token: "none", "optional" or
	// "required". Default: required when a key source is configured, else none.
	Mode string
	// TopicModes maps served topics to their own mode, overriding Mode. Default none.
	TopicModes map[string]string
	// Algorithms are the JWS algorithms accepted (HS256, ..., EdDSA); required when a topic needs tokens.
	// "none" is never accepted. Default none.
	Algorithms []string
	// KeyFile is a PEM file of public keys or certificates. Default none.
	KeyFile string
	// HMACSecretFile is a file holding an HMAC secret of at least 32 bytes. Default none.
	HMACSecretFile string
	// JWKSURL is a URL the JWK Set is fetched from. Default none.
	JWKSURL string
	// JWKSFile is a JWK Set file. Default none.
	JWKSFile string
	// Issuer, when set, is the iss every token must carry. Default none (not checked).
	Issuer string
	// Audience, when set, lists audiences of which a token's aud must name one. Default none (not checked).
	Audience []string
	// Leeway is the clock skew allowed on exp and nbf. Default 0.
	Leeway time.Duration
	// KeyRefresh is how often key files are read again and the JWKS URL fetched again. Default 1m.
	KeyRefresh time.Duration
	// Claim names the scope claim. Default "ssegate".
	Claim string
	// Cookie names the cookie a token may come in (what EventSource sends). Default "ssegate_token"; empty
	// means tokens are not read from cookies.
	Cookie string
	// QueryToken accepts tokens in the access_token query parameter. Default false: such URLs end up in
	// proxies' logs.
	QueryToken bool
	// ExpiryNotice is how long before a token expires its streams get "event: token-expiring". Default 1m;
	// zero means no notice.
	ExpiryNotice time.Duration
	// Hook is the authorization hook (config_hook.go). Default none.
	Hook HookConfig
}

// CORSConfig says which other origins' pages may read the gateway.
type CORSConfig struct {
	// Origins are the origins allowed: exact ("https://app.example.com", "http://localhost:3000"), a pattern
	// with one "*" as the first label of the host ("https://*.example.com"), or "*" (any, without
	// credentials). Default none: only pages of the gateway's own origin.
	Origins []string
	// Credentials lets allowed pages send cookies (Access-Control-Allow-Credentials), which cookie tokens
	// need. Default false.
	Credentials bool
}

// authDefaults returns the auth configuration before any setting is applied.
func authDefaults() AuthConfig {
	return AuthConfig{KeyRefresh: time.Minute, Claim: "ssegate", Cookie: "ssegate_token", ExpiryNotice: time.Minute, Hook: hookDefaults()}
}

func authSettings(a *AuthConfig, cors *CORSConfig) []settings.Setting {
	return []settings.Setting{
		setting("auth", "what topics ask of a token: none, optional or required (default: required with a key source, else none)", settings.String(&a.Mode)),
		setting("topic-auth", "per-topic auth modes overriding auth, comma-separated topic=mode pairs (prices=none,orders=required)", settings.Map(&a.TopicModes)),
		setting("auth-algorithms", "JWT algorithms accepted, comma-separated (HS256, RS256, PS256, ES256, EdDSA, ...)", settings.List(&a.Algorithms)),
		setting("auth-key-file", "PEM file of public keys or certificates verifying tokens; read again every auth-key-refresh", settings.String(&a.KeyFile)),
		setting("auth-hmac-secret-file", "file holding an HMAC secret (at least 32 bytes); read again every auth-key-refresh", settings.String(&a.HMACSecretFile)),
		setting("auth-jwks-url", "URL of a JWK Set of verification keys; fetched every auth-key-refresh and on an unknown kid", settings.String(&a.JWKSURL)),
		setting("auth-jwks-file", "JWK Set file of verification keys (oct keys are HMAC secrets); read again every auth-key-refresh", settings.String(&a.JWKSFile)),
		setting("auth-issuer", "iss every token must carry (default: not checked)", settings.String(&a.Issuer)),
		setting("auth-audience", "audiences, comma-separated, of which a token's aud must name one (default: not checked)", settings.List(&a.Audience)),
		setting("auth-leeway", "clock skew allowed on exp and nbf", settings.Duration(&a.Leeway)),
		setting("auth-key-refresh", "how often key files are read again and the JWKS URL fetched again", settings.Duration(&a.KeyRefresh)),
		setting("auth-claim", "name of the claim holding a token's scope (topics, keys, events)", settings.String(&a.Claim)),
		setting("auth-cookie", "cookie a token may come in (EventSource sends cookies, not headers); empty means none", settings.String(&a.Cookie)),
		setting("auth-query-token", "accept tokens in the access_token query parameter (they end up in proxies' logs)", settings.Bool(&a.QueryToken)),
		setting("auth-expiry-notice", "how long before a token expires its streams get event: token-expiring; 0 means no notice", settings.Duration(&a.ExpiryNotice)),
		setting("cors-origins", "origins whose pages may read the gateway, comma-separated: exact, https://*.example.com patterns, or *", settings.List(&cors.Origins)),
		setting("cors-credentials", "let allowed origins send cookies (needed for cookie tokens); refused with *", settings.Bool(&cors.Credentials)),
	}
}

// hasKeySource says whether any key source is configured.
func (a AuthConfig) hasKeySource() bool {
	return a.KeyFile != "" || a.HMACSecretFile != "" || a.JWKSURL != "" || a.JWKSFile != ""
}

// modeDefault returns the mode of topics without their own.
func (a AuthConfig) modeDefault() string {
	if a.Mode != "" {
		return a.Mode
	}
	if a.hasKeySource() {
		return auth.ModeRequired.String()
	}
	return auth.ModeNone.String()
}

// modes returns every served topic's auth mode.
func (c Config) authModes() (map[string]auth.Mode, error) {
	out := make(map[string]auth.Mode, len(c.Topics))
	for _, topic := range c.Topics {
		name := c.Auth.modeDefault()
		if m, ok := c.Auth.TopicModes[topic]; ok {
			name = m
		}
		m, err := auth.ParseMode(name)
		if err != nil {
			return nil, fmt.Errorf("auth mode of topic %s: %w", topic, err)
		}
		out[topic] = m
	}
	return out, nil
}

// needsTokens says whether any served topic looks at tokens.
func (c Config) needsTokens() bool {
	modes, err := c.authModes()
	if err != nil {
		return false
	}
	for _, m := range modes {
		if m != auth.ModeNone {
			return true
		}
	}
	return false
}

// validateAuth checks the auth and CORS settings. Key files are read, and checked, by New.
func (c Config) validateAuth() error {
	a := c.Auth
	if a.Mode != "" {
		if _, err := auth.ParseMode(a.Mode); err != nil {
			return badSetting("auth", "%v", err)
		}
	}
	if err := c.perTopic(a.TopicModes, func(topic, v string) error {
		if _, err := auth.ParseMode(v); err != nil {
			return fmt.Errorf("topic %s: %w", topic, err)
		}
		return nil
	}); err != nil {
		return badSetting("topic-auth", "%v", err)
	}
	if c.needsTokens() {
		if !a.hasKeySource() {
			return badSetting("auth", "a topic needs tokens but no key is configured: set auth-key-file, auth-hmac-secret-file, auth-jwks-url or auth-jwks-file")
		}
		if len(a.Algorithms) == 0 {
			return badSetting("auth-algorithms", "required when a topic needs tokens: the algorithms are pinned, never taken from the token")
		}
	}
	for _, alg := range a.Algorithms {
		if !slices.Contains(auth.Algorithms(), alg) {
			return badSetting("auth-algorithms", "%q is not one of %s (none is never accepted)", alg, strings.Join(auth.Algorithms(), ", "))
		}
	}
	if a.JWKSURL != "" {
		if err := httpURL(a.JWKSURL); err != nil {
			return badSetting("auth-jwks-url", "%v", err)
		}
	}
	switch {
	case a.Leeway < 0 || a.Leeway > 5*time.Minute:
		return badSetting("auth-leeway", "must be from 0 to 5m")
	case a.KeyRefresh < time.Second:
		return badSetting("auth-key-refresh", "must be at least 1s")
	case a.ExpiryNotice < 0:
		return badSetting("auth-expiry-notice", "must be zero or positive")
	case a.Claim == "":
		return badSetting("auth-claim", "must not be empty")
	case a.Cookie != "" && !validCookieName(a.Cookie):
		return badSetting("auth-cookie", "%q is not a cookie name", a.Cookie)
	}
	if _, err := newCORS(c.CORS); err != nil {
		return err
	}
	return nil
}

// badSetting is the error of an invalid setting, naming it and its environment variable.
func badSetting(name, format string, args ...any) error {
	return fmt.Errorf("invalid setting %s (%s): %s", name, settings.EnvName("SSEGATE_", name), fmt.Sprintf(format, args...))
}

// httpURL checks that u is an absolute http or https URL.
func httpURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q: want an http or https URL", u)
	}
	return nil
}

// validCookieName says whether s is an RFC 6265 token (what a cookie name must be).
func validCookieName(s string) bool {
	for i := range len(s) {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return s != ""
}
