package app

import (
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/auth"
)

// TestLoadAuthSettings: every auth and CORS setting from flags, the environment and the file, and the modes
// they give the topics.
func TestLoadAuthSettings(t *testing.T) {
	got, err := loadConfig(t, []string{
		"--auth-algorithms=RS256,ES256", "--auth-key-file=/keys.pem", "--auth-issuer=https://idp.example",
		"--auth-audience=ssegate,other", "--auth-leeway=5s", "--auth-cookie=tok", "--auth-query-token",
		"--cors-origins=https://app.example.com,https://*.example.org", "--cors-credentials",
	}, withEnv(map[string]string{
		"SSEGATE_TOPICS": "orders,prices", "SSEGATE_TOPIC_AUTH": "prices=none", "SSEGATE_AUTH_CLAIM": "scope",
		"SSEGATE_AUTH_EXPIRY_NOTICE": "30s", "SSEGATE_AUTH_JWKS_URL": "https://idp.example/jwks",
	}), "auth-key-refresh: 2m\nauth-hmac-secret-file: /hmac\nauth-jwks-file: /jwks.json\n")
	if err != nil {
		t.Fatal(err)
	}
	a := got.Auth
	want := AuthConfig{
		TopicModes: map[string]string{"prices": "none"}, Algorithms: []string{"RS256", "ES256"},
		KeyFile: "/keys.pem", HMACSecretFile: "/hmac", JWKSURL: "https://idp.example/jwks", JWKSFile: "/jwks.json",
		Issuer: "https://idp.example", Audience: []string{"ssegate", "other"}, Leeway: 5 * time.Second,
		KeyRefresh: 2 * time.Minute, Claim: "scope", Cookie: "tok", QueryToken: true, ExpiryNotice: 30 * time.Second,
	}
	if a.Mode != "" || strings.Join(a.Algorithms, ",") != strings.Join(want.Algorithms, ",") || a.KeyFile != want.KeyFile ||
		a.HMACSecretFile != want.HMACSecretFile || a.JWKSURL != want.JWKSURL || a.JWKSFile != want.JWKSFile ||
		a.Issuer != want.Issuer || strings.Join(a.Audience, ",") != "ssegate,other" || a.Leeway != want.Leeway ||
		a.KeyRefresh != want.KeyRefresh || a.Claim != want.Claim || a.Cookie != want.Cookie || !a.QueryToken ||
		a.ExpiryNotice != want.ExpiryNotice || a.TopicModes["prices"] != "none" {
		t.Fatalf("auth %+v\nwant %+v", a, want)
	}
	if strings.Join(got.CORS.Origins, ",") != "https://app.example.com,https://*.example.org" || !got.CORS.Credentials {
		t.Fatalf("cors %+v", got.CORS)
	}
	modes, err := got.authModes()
	if err != nil || modes["orders"] != auth.ModeRequired || modes["prices"] != auth.ModeNone {
		t.Fatalf("modes %v, %v: want orders required (a key source is set), prices none", modes, err)
	}
}

// TestAuthModeDefault: without a key source every topic is public; with one, every topic needs a token unless
// auth or topic-auth says otherwise.
func TestAuthModeDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want auth.Mode
	}{
		{"no key source", nil, auth.ModeNone},
		{"a key source", []string{"--auth-hmac-secret-file=/s", "--auth-algorithms=HS256"}, auth.ModeRequired},
		{"a key source, auth optional", []string{"--auth-hmac-secret-file=/s", "--auth-algorithms=HS256", "--auth=optional"}, auth.ModeOptional},
		{"a key source, auth none", []string{"--auth-hmac-secret-file=/s", "--auth=none"}, auth.ModeNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(t, tc.args, minimalEnv, "")
			if err != nil {
				t.Fatal(err)
			}
			if modes, _ := c.authModes(); modes["orders"] != tc.want {
				t.Fatalf("mode %v, want %v", modes["orders"], tc.want)
			}
		})
	}
}

// TestLoadAuthInvalid: bad auth and CORS settings stop the gateway at start, naming the setting.
func TestLoadAuthInvalid(t *testing.T) {
	keys := []string{"--auth-hmac-secret-file=/s", "--auth-algorithms=HS256"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown mode", []string{"--auth=maybe"}, []string{"auth", "SSEGATE_AUTH", `"maybe"`}},
		{"topic-auth of an unserved topic", []string{"--topic-auth=x=none"}, []string{"topic-auth", `"x"`}},
		{"topic-auth unknown mode", []string{"--topic-auth=orders=public"}, []string{"topic-auth", "orders", `"public"`}},
		{"required without keys", []string{"--auth=required"}, []string{"auth", "no key is configured"}},
		{"topic required without keys", []string{"--topic-auth=orders=optional"}, []string{"auth", "no key is configured"}},
		{"keys without algorithms", []string{"--auth-key-file=/k.pem"}, []string{"auth-algorithms", "pinned"}},
		{"alg none", []string{"--auth-key-file=/k.pem", "--auth-algorithms=none"}, []string{"auth-algorithms", `"none"`}},
		{"alg in lower case", []string{"--auth-key-file=/k.pem", "--auth-algorithms=rs256"}, []string{"auth-algorithms", `"rs256"`}},
		{"JWKS URL not a URL", []string{"--auth-jwks-url=idp.example/jwks", "--auth-algorithms=RS256"}, []string{"auth-jwks-url"}},
		{"leeway negative", append([]string{"--auth-leeway=-1s"}, keys...), []string{"auth-leeway"}},
		{"leeway too long", append([]string{"--auth-leeway=1h"}, keys...), []string{"auth-leeway", "5m"}},
		{"refresh too short", append([]string{"--auth-key-refresh=10ms"}, keys...), []string{"auth-key-refresh"}},
		{"notice negative", append([]string{"--auth-expiry-notice=-1s"}, keys...), []string{"auth-expiry-notice"}},
		{"empty claim", append([]string{"--auth-claim="}, keys...), []string{"auth-claim"}},
		{"bad cookie name", append([]string{"--auth-cookie=a b"}, keys...), []string{"auth-cookie", `"a b"`}},
		{"CORS * with credentials", []string{"--cors-origins=*", "--cors-credentials"}, []string{"cors-credentials", "*"}},
		{"CORS null", []string{"--cors-origins=null"}, []string{"cors-origins", "null"}},
		{"CORS origin with a path", []string{"--cors-origins=https://app.example.com/page"}, []string{"cors-origins", "path"}},
		{"CORS origin without scheme", []string{"--cors-origins=app.example.com"}, []string{"cors-origins", "app.example.com"}},
		{"CORS pattern on a TLD", []string{"--cors-origins=https://*.com"}, []string{"cors-origins", "two labels"}},
		{"CORS star inside", []string{"--cors-origins=https://app.*.example.com"}, []string{"cors-origins", "first label"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig(t, tc.args, minimalEnv, "")
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestCORSPolicy: which Origin headers an allowlist admits.
func TestCORSPolicy(t *testing.T) {
	p, err := newCORS(CORSConfig{Origins: []string{"https://app.example.com", "HTTP://LOCALHOST:3000", "https://*.example.org", "https://*.example.net:8443", "https://x.example.com:443"}, Credentials: true})
	if err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]bool{
		"https://app.example.com":      true,
		"https://x.example.com":        true, // :443 is the default port, which browsers leave out
		"http://localhost:3000":        true,
		"http://app.example.com":       false, // another scheme
		"https://app.example.com:8443": false,
		"https://evil.app.example.com": false,
		"https://a.example.org":        true,
		"https://a.b.example.org":      true,
		"https://example.org":          false, // the pattern needs a label before it
		"https://evilexample.org":      false,
		"https://a.example.org:8443":   false,
		"https://a.example.net:8443":   true,
		"https://a.example.net":        false,
		"null":                         false,
		"https://APP.example.com":      false, // not how a browser serializes it
		"https://app.example.com/":     false,
		"":                             false,
	} {
		if got := p.allows(origin); got != want {
			t.Errorf("allows(%q) = %v, want %v", origin, got, want)
		}
	}
	star, err := newCORS(CORSConfig{Origins: []string{"*"}})
	if err != nil || !star.allows("https://anything.example") || star.allows("null") {
		t.Fatalf("* : %v", err)
	}
}
