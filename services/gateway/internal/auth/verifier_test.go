package auth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// fileConfig is a Verifier configuration with keys of every type in files: an RSA, an EC P-256 and an Ed25519
// public key in one PEM file, and an HMAC secret.
func fileConfig(t *testing.T) Config {
	t.Helper()
	k := keys(t)
	dir := t.TempDir()
	pems := append(append(pemPublic(t, &k.rsa.PublicKey), pemPublic(t, &k.ec256.PublicKey)...), pemPublic(t, k.ed.Public())...)
	return Config{
		Algorithms:     []string{"RS256", "PS256", "ES256", "ES384", "EdDSA", "HS256"},
		KeyFile:        writeFile(t, dir, "keys.pem", pems),
		HMACSecretFile: writeFile(t, dir, "hmac", append(append([]byte{}, k.hmac...), '\n')),
		Issuer:         "https://issuer.example",
		Audience:       []string{"ssegate", "other"},
		Leeway:         30 * time.Second,
	}
}

// TestVerifyAttacks: a table of tokens, good and forged, against keys from files. Each forged one is refused
// with the reason a client is told.
func TestVerifyAttacks(t *testing.T) {
	k := keys(t)
	with := func(change func(c jwt.MapClaims)) jwt.MapClaims {
		c := baseClaims()
		change(c)
		return c
	}
	rsaPEM := pemPublic(t, &k.rsa.PublicKey)
	rsaDER, _ := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	good := sign(t, jwt.SigningMethodRS256, k.rsa, baseClaims(), nil)
	parts := strings.Split(good, ".")

	var jkuHits atomic.Int32
	jku := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { jkuHits.Add(1) }))
	t.Cleanup(jku.Close)

	tests := []struct {
		name  string
		token string
		want  Reason // -1: accepted
	}{
		{"RS256", good, -1},
		{"PS256", sign(t, jwt.SigningMethodPS256, k.rsa, baseClaims(), nil), -1},
		{"ES256", sign(t, jwt.SigningMethodES256, k.ec256, baseClaims(), nil), -1},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, k.ed, baseClaims(), nil), -1},
		{"HS256", sign(t, jwt.SigningMethodHS256, k.hmac, baseClaims(), nil), -1},
		{"a kid is ignored for keys from files", sign(t, jwt.SigningMethodRS256, k.rsa, baseClaims(), map[string]any{"kid": "anything"}), -1},
		{"aud list naming one accepted audience", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["aud"] = []string{"x", "other"} }), nil), -1},
		{"expired within the leeway", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-10 * time.Second).Unix() }), nil), -1},
		{"nbf within the leeway", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(10 * time.Second).Unix() }), nil), -1},
		{"no scope claim", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { delete(c, "ssegate") }), nil), -1},

		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, baseClaims(), nil), ReasonAlgorithm},
		{"alg none with the signature of a good token", noneHeader(t) + "." + parts[1] + "." + parts[2], ReasonAlgorithm},
		{"alg NONE", rawHeader(t, `{"alg":"NONE","typ":"JWT"}`) + "." + parts[1] + ".", ReasonAlgorithm},
		{"alg not configured (HS512)", sign(t, jwt.SigningMethodHS512, k.hmac, baseClaims(), nil), ReasonAlgorithm},
		{"alg unknown", rawHeader(t, `{"alg":"HS257"}`) + "." + parts[1] + "." + parts[2], ReasonAlgorithm},
		{"confusion: HS256 with the RSA public key's PEM as secret", sign(t, jwt.SigningMethodHS256, rsaPEM, baseClaims(), nil), ReasonBadSignature},
		{"confusion: HS256 with the RSA public key's DER as secret", sign(t, jwt.SigningMethodHS256, rsaDER, baseClaims(), nil), ReasonBadSignature},
		{"confusion: RS256 header on an HMAC signature", swapAlg(t, sign(t, jwt.SigningMethodHS256, k.hmac, baseClaims(), nil), "RS256"), ReasonBadSignature},
		{"ES384 with no P-384 key", sign(t, jwt.SigningMethodES384, k.ec384, baseClaims(), nil), ReasonUnknownKey},
		{"another RSA key", sign(t, jwt.SigningMethodRS256, k.attacker, baseClaims(), nil), ReasonBadSignature},
		{"jku header is never followed", sign(t, jwt.SigningMethodRS256, k.attacker, baseClaims(), map[string]any{"jku": jku.URL, "x5u": jku.URL}), ReasonBadSignature},
		{"expired", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-time.Minute).Unix() }), nil), ReasonExpired},
		{"not yet valid", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(time.Minute).Unix() }), nil), ReasonNotYetValid},
		{"no exp", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { delete(c, "exp") }), nil), ReasonMissingExp},
		{"exp not a number", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }), nil), ReasonBadClaim},
		{"wrong iss", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), nil), ReasonWrongIssuer},
		{"no iss", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { delete(c, "iss") }), nil), ReasonWrongIssuer},
		{"wrong aud", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["aud"] = "someone-else" }), nil), ReasonWrongAudience},
		{"no aud", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { delete(c, "aud") }), nil), ReasonWrongAudience},
		{"expired and wrong aud: expired first", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) {
			c["exp"] = testNow.Add(-time.Hour).Unix()
			c["aud"] = "x"
		}), nil), ReasonExpired},
		{"tampered payload", parts[0] + "." + tamper(t, parts[1]) + "." + parts[2], ReasonBadSignature},
		{"tampered signature", parts[0] + "." + parts[1] + "." + flip(parts[2], 10), ReasonBadSignature},
		{"signature in another spelling of the same bytes", parts[0] + "." + parts[1] + "." + respell(t, parts[2]), ReasonMalformed},
		{"signature stripped", parts[0] + "." + parts[1] + ".", ReasonBadSignature},
		{"oversized", parts[0] + "." + strings.Repeat("A", MaxTokenBytes) + "." + parts[2], ReasonTooLarge},
		{"not a JWT", "hello", ReasonMalformed},
		{"two segments", parts[0] + "." + parts[1], ReasonMalformed},
		{"payload not JSON", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + "." + parts[2], ReasonMalformed},
		{"critical header", sign(t, jwt.SigningMethodRS256, k.rsa, baseClaims(), map[string]any{"crit": []string{"exp"}}), ReasonMalformed},
		{"kid not a string", sign(t, jwt.SigningMethodRS256, k.rsa, baseClaims(), map[string]any{"kid": 7}), ReasonMalformed},
		{"sub not a string", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["sub"] = 42 }), nil), ReasonBadClaim},
		{"scope claim with a misspelled field", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) {
			c["ssegate"] = map[string]any{"topics": []string{"orders"}, "key": []string{"user-42"}}
		}), nil), ReasonBadClaim},
		{"scope claim with keys null", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) {
			c["ssegate"] = map[string]any{"topics": []string{"orders"}, "keys": nil}
		}), nil), ReasonBadClaim},
		{"scope claim without topics", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) {
			c["ssegate"] = map[string]any{"keys": []string{"user-42"}}
		}), nil), ReasonBadClaim},
		{"scope claim with a bad pattern", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) {
			c["ssegate"] = map[string]any{"topics": []string{"orders["}}
		}), nil), ReasonBadClaim},
		{"scope claim that is a string", sign(t, jwt.SigningMethodRS256, k.rsa, with(func(c jwt.MapClaims) { c["ssegate"] = "orders" }), nil), ReasonBadClaim},
	}
	v := newVerifier(t, fileConfig(t))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(t.Context(), tc.token)
			if tc.want < 0 {
				if err != nil {
					t.Fatalf("refused: %v (%v)", err, errors.Unwrap(err))
				}
				if c.Subject != "user-42" || c.Expires.IsZero() {
					t.Fatalf("claims %+v", c)
				}
				return
			}
			r, ok := ReasonOf(err)
			if !ok || r != tc.want {
				t.Fatalf("got %v (reason %v), want reason %v", err, r, tc.want)
			}
		})
	}
	if n := jkuHits.Load(); n != 0 {
		t.Errorf("the jku/x5u URL was fetched %d times", n)
	}
}

// TestVerifyDateClaims: an exp, nbf or iat that is no representable time (or no number) is a bad claim, 401
// invalid_token, whatever time golang-jwt would have made of it; only a well-signed token learns it.
func TestVerifyDateClaims(t *testing.T) {
	k := keys(t)
	change := func(m map[string]any) string {
		c := baseClaims()
		maps.Copy(c, m)
		return sign(t, jwt.SigningMethodRS256, k.rsa, c, nil)
	}
	with := func(name string, value any) string { return change(map[string]any{name: value}) }
	// raw signs a payload written by hand: encoding/json cannot write 1e400.
	raw := func(name, value string) string {
		payload := fmt.Sprintf(`{"iss":"https://issuer.example","aud":"ssegate","sub":"user-42","exp":%d,%q:%s}`, testNow.Add(time.Hour).Unix(), name, value)
		if name == "exp" {
			payload = fmt.Sprintf(`{"iss":"https://issuer.example","aud":"ssegate","sub":"user-42","exp":%s}`, value)
		}
		return signPayload(t, k, payload)
	}
	lastSecond := time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC).Unix()
	tests := []struct {
		name  string
		token string
		want  Reason // -1: accepted
	}{
		{"exp 1e300", with("exp", 1e300), ReasonBadClaim},
		{"exp -1e300", with("exp", -1e300), ReasonBadClaim},
		{"exp 1e400, beyond a float64", raw("exp", "1e400"), ReasonBadClaim},
		{"exp -1e400", raw("exp", "-1e400"), ReasonBadClaim},
		{"exp beyond int64 seconds", with("exp", 9.3e18), ReasonBadClaim},
		{"exp with a fraction beyond int64 seconds", raw("exp", "9223372036854775807.5"), ReasonBadClaim},
		{"exp one second after the year 9999", with("exp", lastSecond+1), ReasonBadClaim},
		{"exp before the year 1", with("exp", float64(minDate)-1), ReasonBadClaim},
		{"exp null", with("exp", nil), ReasonBadClaim},
		{"exp 1e300 and a wrong aud: the bad claim first", change(map[string]any{"exp": 1e300, "aud": "x"}), ReasonBadClaim},
		{"exp 1e300 with a forged signature", forge(t, with("exp", 1e300)), ReasonBadSignature},
		{"exp in the last second of the year 9999", with("exp", lastSecond), -1},
		{"exp with a fraction", raw("exp", fmt.Sprintf("%d.999999999", testNow.Add(time.Hour).Unix())), -1},
		{"exp 0 is 1970, not a missing exp", with("exp", 0), ReasonExpired},
		{"exp negative within reason is expired", with("exp", -1), ReasonExpired},
		{"nbf 1e300", with("nbf", 1e300), ReasonBadClaim},
		{"nbf -1e300", with("nbf", -1e300), ReasonBadClaim},
		{"nbf 1e400", raw("nbf", "1e400"), ReasonBadClaim},
		{"nbf 0 is 1970", with("nbf", 0), -1},
		{"iat 1e300", with("iat", 1e300), ReasonBadClaim},
		{"iat -1e400", raw("iat", "-1e400"), ReasonBadClaim},
		{"iat not a number", with("iat", "yesterday"), ReasonBadClaim},
		{"iat in range", with("iat", testNow.Add(-time.Minute).Unix()), -1},
	}
	v := newVerifier(t, fileConfig(t))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(t.Context(), tc.token)
			if tc.want < 0 {
				if err != nil {
					t.Fatalf("refused: %v (%v)", err, errors.Unwrap(err))
				}
				if c.Expires.IsZero() {
					t.Fatalf("claims %+v", c)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != tc.want {
				t.Fatalf("got %v, want reason %v", err, tc.want)
			}
			if tc.want == ReasonBadClaim && (e.Status() != http.StatusUnauthorized || e.Code() != "invalid_token" ||
				!strings.Contains(e.Challenge("ssegate"), `error_description="a claim of the token is malformed"`)) {
				t.Fatalf("answered %d %q %q", e.Status(), e.Code(), e.Challenge("ssegate"))
			}
		})
	}
}

// signPayload signs a JSON payload as it is, with RS256.
func signPayload(t *testing.T, k *testKeys, payload string) string {
	t.Helper()
	signing := rawHeader(t, `{"alg":"RS256","typ":"JWT"}`) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	sig, err := jwt.SigningMethodRS256.Sign(signing, k.rsa)
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// forge returns tok with its signature changed.
func forge(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	return parts[0] + "." + parts[1] + "." + flip(parts[2], 10)
}

// TestVerifyConfusionWhenOnlyRSAIsConfigured: with RS256 alone configured, an HS256 token signed with the public
// key is refused for its algorithm, before any key is looked at.
func TestVerifyConfusionWhenOnlyRSAIsConfigured(t *testing.T) {
	k := keys(t)
	dir := t.TempDir()
	v := newVerifier(t, Config{Algorithms: []string{"RS256"}, KeyFile: writeFile(t, dir, "k.pem", pemPublic(t, &k.rsa.PublicKey))})
	forged := sign(t, jwt.SigningMethodHS256, pemPublic(t, &k.rsa.PublicKey), baseClaims(), nil)
	if r, _ := ReasonOf(verifyErr(t, v, forged)); r != ReasonAlgorithm {
		t.Fatalf("reason %v, want algorithm", r)
	}
}

func verifyErr(t *testing.T, v *Verifier, token string) error {
	t.Helper()
	_, err := v.Verify(t.Context(), token)
	return err
}

// TestVerifyScope: the scope claim comes back as it was issued; keys and events stay nil when absent and empty
// when empty.
func TestVerifyScope(t *testing.T) {
	k := keys(t)
	v := newVerifier(t, fileConfig(t))
	for _, tc := range []struct {
		name  string
		claim any
		want  Scope
	}{
		{"topics and keys", map[string]any{"topics": []string{"orders", "user-*"}, "keys": []string{"user-42"}}, Scope{Topics: []string{"orders", "user-*"}, Keys: []string{"user-42"}}},
		{"events", map[string]any{"topics": []string{"*"}, "events": []string{"order.paid"}}, Scope{Topics: []string{"*"}, Events: []string{"order.paid"}}},
		{"empty keys", map[string]any{"topics": []string{"orders"}, "keys": []string{}}, Scope{Topics: []string{"orders"}, Keys: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := baseClaims()
			c["ssegate"] = tc.claim
			got, err := v.Verify(t.Context(), sign(t, jwt.SigningMethodES256, k.ec256, c, nil))
			if err != nil {
				t.Fatal(err)
			}
			s := got.Scope
			if s == nil || strings.Join(s.Topics, ",") != strings.Join(tc.want.Topics, ",") ||
				(s.Keys == nil) != (tc.want.Keys == nil) || strings.Join(s.Keys, ",") != strings.Join(tc.want.Keys, ",") ||
				(s.Events == nil) != (tc.want.Events == nil) || strings.Join(s.Events, ",") != strings.Join(tc.want.Events, ",") {
				t.Fatalf("scope %+v, want %+v", s, tc.want)
			}
		})
	}
}

func TestScopeAllowsTopic(t *testing.T) {
	s := &Scope{Topics: []string{"orders", "user-*", "log.?"}}
	for topic, want := range map[string]bool{
		"orders": true, "orders2": false, "user-42": true, "user-": true, "users": false, "log.a": true, "log.ab": false,
	} {
		if got := s.AllowsTopic(topic); got != want {
			t.Errorf("AllowsTopic(%q) = %v, want %v", topic, got, want)
		}
	}
	if (*Scope)(nil).AllowsTopic("orders") {
		t.Error("a nil scope allows a topic")
	}
}

// TestNewRefusesBadKeys: configurations that could never verify safely stop the gateway at start.
func TestNewRefusesBadKeys(t *testing.T) {
	k := keys(t)
	dir := t.TempDir()
	privDER, _ := x509.MarshalPKCS8PrivateKey(k.rsa)
	priv := writeFile(t, dir, "priv.pem", pemBlock("PRIVATE KEY", privDER))
	rsaPEM := writeFile(t, dir, "rsa.pem", pemPublic(t, &k.rsa.PublicKey))
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no algorithm", Config{KeyFile: rsaPEM}, "no algorithm"},
		{"alg none", Config{Algorithms: []string{"none"}, KeyFile: rsaPEM}, "never accepted"},
		{"unknown alg", Config{Algorithms: []string{"RS257"}, KeyFile: rsaPEM}, "unsupported algorithm"},
		{"no key source", Config{Algorithms: []string{"RS256"}}, "no key source"},
		{"weak RSA key", Config{Algorithms: []string{"RS256"}, KeyFile: writeFile(t, dir, "weak.pem", pemPublic(t, &k.weakRSA.PublicKey))}, "1024 bits"},
		{"private key", Config{Algorithms: []string{"RS256"}, KeyFile: priv}, "public keys only"},
		{"PEM as HMAC secret", Config{Algorithms: []string{"HS256"}, HMACSecretFile: rsaPEM}, "never an HMAC secret"},
		{"short HMAC secret", Config{Algorithms: []string{"HS256"}, HMACSecretFile: writeFile(t, dir, "short", []byte("secret\n"))}, "at least 32"},
		{"HS without a secret", Config{Algorithms: []string{"HS256", "RS256"}, KeyFile: rsaPEM}, "no HMAC secret"},
		{"HS from a JWKS URL only", Config{Algorithms: []string{"HS256"}, JWKSURL: "https://idp.example/jwks"}, "no HMAC secret"},
		{"key of no configured type", Config{Algorithms: []string{"ES256"}, KeyFile: rsaPEM}, "no key fits"},
		{"missing key file", Config{Algorithms: []string{"RS256"}, KeyFile: dir + "/nope.pem"}, "no such file"},
		{"JWKS URL not http", Config{Algorithms: []string{"RS256"}, JWKSURL: "file:///etc/jwks"}, "http or https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = discardLog
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestKeyFileRotation: key files are read again every refresh; a new key is accepted without a restart and the
// old one refused once it is gone; a file that turns unreadable or garbage keeps the keys it had.
func TestKeyFileRotation(t *testing.T) {
	k := keys(t)
	dir := t.TempDir()
	keyFile := writeFile(t, dir, "keys.pem", pemPublic(t, &k.rsa.PublicKey))
	secret := writeFile(t, dir, "hmac", k.hmac)
	v := newVerifier(t, Config{Algorithms: []string{"RS256", "HS256"}, KeyFile: keyFile, HMACSecretFile: secret, Refresh: 20 * time.Millisecond})
	oldRSA := sign(t, jwt.SigningMethodRS256, k.rsa, baseClaims(), nil)
	newRSA := sign(t, jwt.SigningMethodRS256, k.rsa2, baseClaims(), nil)
	oldHS := sign(t, jwt.SigningMethodHS256, k.hmac, baseClaims(), nil)
	newHS := sign(t, jwt.SigningMethodHS256, k.hmac2, baseClaims(), nil)
	ok := func(tok string) bool { _, err := v.Verify(t.Context(), tok); return err == nil }
	if !ok(oldRSA) || ok(newRSA) || !ok(oldHS) || ok(newHS) {
		t.Fatal("before the rotation")
	}
	// Both keys during the overlap, then the new one alone.
	writeFile(t, dir, "keys.pem", append(pemPublic(t, &k.rsa.PublicKey), pemPublic(t, &k.rsa2.PublicKey)...))
	waitFor(t, "the new RSA key", func() bool { return ok(newRSA) })
	if !ok(oldRSA) {
		t.Fatal("the old key is refused during the overlap")
	}
	writeFile(t, dir, "keys.pem", pemPublic(t, &k.rsa2.PublicKey))
	waitFor(t, "the old RSA key to be refused", func() bool { return !ok(oldRSA) })
	writeFile(t, dir, "hmac", k.hmac2)
	waitFor(t, "the new HMAC secret", func() bool { return ok(newHS) && !ok(oldHS) })

	writeFile(t, dir, "keys.pem", []byte("not PEM"))
	time.Sleep(100 * time.Millisecond) // several refreshes
	if !ok(newRSA) {
		t.Fatal("a garbage key file dropped the keys")
	}
}

func noneHeader(t *testing.T) string { return rawHeader(t, `{"alg":"none","typ":"JWT"}`) }

func rawHeader(t *testing.T, h string) string {
	t.Helper()
	return base64.RawURLEncoding.EncodeToString([]byte(h))
}

// swapAlg returns tok with its header's alg replaced, keeping the rest.
func swapAlg(t *testing.T, tok, alg string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	return rawHeader(t, `{"alg":"`+alg+`","typ":"JWT"}`) + "." + parts[1] + "." + parts[2]
}

// tamper returns a payload segment whose keys claim is another user's.
func tamper(t *testing.T, seg string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.ReplaceAll(string(b), "user-42", "user-07")
	if out == string(b) {
		t.Fatal("nothing to tamper with")
	}
	return base64.RawURLEncoding.EncodeToString([]byte(out))
}

// flip changes one character of a base64url segment.
func flip(seg string, i int) string {
	c := byte('A')
	if seg[i] == 'A' {
		c = 'B'
	}
	return seg[:i] + string(c) + seg[i+1:]
}

// respell returns a base64url segment that decodes, leniently, to the same bytes: the unused low bits of its
// last character set.
func respell(t *testing.T, seg string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(seg)%4 == 0 {
		t.Fatal("segment has no unused bits")
	}
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	alt := alphabet[last|1]
	if last|1 == last {
		alt = alphabet[last&^1]
	}
	out := seg[:len(seg)-1] + string(alt)
	a, _ := base64.RawURLEncoding.DecodeString(seg)
	b, err := base64.RawURLEncoding.DecodeString(out)
	if err != nil || string(a) != string(b) {
		t.Fatalf("respelling changed the bytes: %v", err)
	}
	return out
}

func pemBlock(typ string, der []byte) []byte {
	return []byte("-----BEGIN " + typ + "-----\n" + base64.StdEncoding.EncodeToString(der) + "\n-----END " + typ + "-----\n")
}

var _ = context.Background
