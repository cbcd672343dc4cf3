package auth

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// TestJWKSURL: keys from a JWKS URL are selected by kid; a token whose kid's key is another one, whose alg is
// not its JWK's, or whose kid is unknown is refused; symmetric keys at a URL are left out.
func TestJWKSURL(t *testing.T) {
	k := keys(t)
	srv := newJWKSServer(t, jwksJSON(t,
		jwk(t, k.rsa, "a", jwkset.AlgRS256),
		jwk(t, k.rsa2, "b", ""),
		jwk(t, k.ec256, "ec", jwkset.AlgES256),
		jwk(t, k.hmac, "oct", jwkset.AlgHS256),
	))
	v := newVerifier(t, Config{Algorithms: []string{"RS256", "RS384", "ES256"}, JWKSURL: srv.URL, Refresh: time.Hour})
	waitFor(t, "the first fetch", func() bool { return srv.fetches.Load() >= 1 })
	for _, tc := range []struct {
		name  string
		token string
		want  Reason
	}{
		{"kid a", sign(t, jwt.SigningMethodRS256, k.rsa, baseClaims(), map[string]any{"kid": "a"}), -1},
		{"kid b, no alg in the JWK", sign(t, jwt.SigningMethodRS384, k.rsa2, baseClaims(), map[string]any{"kid": "b"}), -1},
		{"kid ec", sign(t, jwt.SigningMethodES256, k.ec256, baseClaims(), map[string]any{"kid": "ec"}), -1},
		{"no kid: every key of the type is tried", sign(t, jwt.SigningMethodRS256, k.rsa2, baseClaims(), nil), -1},
		{"kid a signed with b's key", sign(t, jwt.SigningMethodRS256, k.rsa2, baseClaims(), map[string]any{"kid": "a"}), ReasonBadSignature},
		{"kid a with another alg than its JWK's", sign(t, jwt.SigningMethodRS384, k.rsa, baseClaims(), map[string]any{"kid": "a"}), ReasonUnknownKey},
		{"unknown kid", sign(t, jwt.SigningMethodRS256, k.attacker, baseClaims(), map[string]any{"kid": "evil"}), ReasonUnknownKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(t.Context(), tc.token)
			if tc.want < 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if r, _ := ReasonOf(err); r != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// The symmetric key was left out: nothing can verify HS256 from a URL (New refuses HS256 with a URL alone,
	// so the key is checked directly).
	if ks := v.url.keys(); len(ks.candidates(t.Context(), &jwt.Token{Header: map[string]any{"kid": "oct", "alg": "HS256"}}, "HS256", nil)) != 0 {
		t.Fatal("an oct key from a URL is used")
	}
}

// TestJWKSRotation: the issuer rotates its keys: a token signed with the new key is accepted at once (its
// unknown kid makes the gateway fetch the set again, without waiting for the refresh interval); once the old
// key is gone from the set, its tokens are refused. Unknown kids fetch at most once per UnknownKeyRefreshGap.
// A fetch that fails, or a set that does not parse, keeps the keys the gateway had.
func TestJWKSRotation(t *testing.T) {
	k := keys(t)
	srv := newJWKSServer(t, jwksJSON(t, jwk(t, k.rsa, "k1", jwkset.AlgRS256)))
	v := newVerifier(t, Config{Algorithms: []string{"RS256"}, JWKSURL: srv.URL, Refresh: time.Hour})
	t1 := sign(t, jwt.SigningMethodRS256, k.rsa, baseClaims(), map[string]any{"kid": "k1"})
	t2 := sign(t, jwt.SigningMethodRS256, k.rsa2, baseClaims(), map[string]any{"kid": "k2"})
	// Run's first fetch first: a token verified before it would ask for a refresh of its own, and the
	// rotation's refresh below would then fall within UnknownKeyRefreshGap of it.
	waitFor(t, "the first fetch", func() bool { return v.url.keys() != nil })
	if _, err := v.Verify(t.Context(), t1); err != nil {
		t.Fatalf("k1 before the rotation: %v", err)
	}
	before := srv.fetches.Load()
	srv.set(jwksJSON(t, jwk(t, k.rsa2, "k2", jwkset.AlgRS256)))
	start := time.Now()
	if _, err := v.Verify(t.Context(), t2); err != nil {
		t.Fatalf("k2 right after the rotation: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the new key took %v", took)
	}
	if n := srv.fetches.Load() - before; n != 1 {
		t.Errorf("%d fetches for the new kid, want 1", n)
	}
	if r, _ := ReasonOf(verifyErr(t, v, t1)); r != ReasonUnknownKey {
		t.Fatalf("k1 after the rotation: %v, want unknown_key", r)
	}
	// Forged kids within the gap cost no fetch.
	before = srv.fetches.Load()
	for range 20 {
		forged := sign(t, jwt.SigningMethodRS256, k.attacker, baseClaims(), map[string]any{"kid": "forged"})
		if r, _ := ReasonOf(verifyErr(t, v, forged)); r != ReasonUnknownKey {
			t.Fatalf("forged kid: %v", r)
		}
	}
	if n := srv.fetches.Load() - before; n != 0 {
		t.Errorf("%d fetches for forged kids within the gap, want 0", n)
	}

	// A broken set or a failing server keeps the keys.
	srv.set([]byte(`{"keys": "nope"}`))
	v.refresh(t.Context())
	srv.status.Store(http.StatusInternalServerError)
	v.refresh(t.Context())
	if _, err := v.Verify(t.Context(), t2); err != nil {
		t.Fatalf("k2 after failed refreshes: %v", err)
	}
}

// TestJWKSFile: a JWK Set file may hold HMAC secrets (oct keys) with kids; it is read again when it changes.
func TestJWKSFile(t *testing.T) {
	k := keys(t)
	dir := t.TempDir()
	path := writeFile(t, dir, "jwks.json", jwksJSON(t, jwk(t, k.hmac, "h1", jwkset.AlgHS256), jwk(t, k.ed, "ed", jwkset.AlgEdDSA)))
	v := newVerifier(t, Config{Algorithms: []string{"HS256", "EdDSA"}, JWKSFile: path, Refresh: 20 * time.Millisecond})
	h1 := sign(t, jwt.SigningMethodHS256, k.hmac, baseClaims(), map[string]any{"kid": "h1"})
	ed := sign(t, jwt.SigningMethodEdDSA, k.ed, baseClaims(), map[string]any{"kid": "ed"})
	h2 := sign(t, jwt.SigningMethodHS256, k.hmac2, baseClaims(), map[string]any{"kid": "h2"})
	for _, tok := range []string{h1, ed} {
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if r, _ := ReasonOf(verifyErr(t, v, h2)); r != ReasonUnknownKey {
		t.Fatalf("h2 before it is in the file: %v", r)
	}
	writeFile(t, dir, "jwks.json", jwksJSON(t, jwk(t, k.hmac2, "h2", jwkset.AlgHS256)))
	waitFor(t, "the new file", func() bool { _, err := v.Verify(t.Context(), h2); return err == nil })
	if r, _ := ReasonOf(verifyErr(t, v, h1)); r != ReasonUnknownKey {
		t.Fatalf("h1 after the rotation: %v", r)
	}
}

// TestUnknownKidWaitsForItsOwnRefresh: a token naming a new kid that arrives while a fetch is under way,
// one that read the key set before the rotation, is verified by the refresh it asked for, not refused when
// the stale one ends.
func TestUnknownKidWaitsForItsOwnRefresh(t *testing.T) {
	k := keys(t)
	oldSet, newSet := jwksJSON(t, jwk(t, k.rsa, "k1", jwkset.AlgRS256)), jwksJSON(t, jwk(t, k.rsa2, "k2", jwkset.AlgRS256))
	var fetches atomic.Int32
	read, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		body := newSet
		if fetches.Add(1) == 1 {
			body = oldSet // Run's first fetch reads the set before the rotation, and is slow to answer
			close(read)
			<-release
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	v := newVerifier(t, Config{Algorithms: []string{"RS256"}, JWKSURL: srv.URL, Refresh: time.Hour})
	<-read
	t2 := sign(t, jwt.SigningMethodRS256, k.rsa2, baseClaims(), map[string]any{"kid": "k2"})
	verified := make(chan error, 1)
	go func() {
		_, err := v.Verify(t.Context(), t2)
		verified <- err
	}()
	waitFor(t, "the verification to ask for a refresh", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.asked == 1
	})
	close(release)
	if err := <-verified; err != nil {
		t.Fatalf("a token of the new key, asked about during a fetch of the old set: %v", err)
	}
}
