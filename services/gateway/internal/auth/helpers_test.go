package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

var discardLog = slog.New(slog.DiscardHandler)

// testKeys are the keys of the tests, made once per test binary (RSA keys take a while under -race).
type testKeys struct {
	rsa, rsa2, attacker *rsa.PrivateKey
	weakRSA             *rsa.PrivateKey
	ec256, ec384        *ecdsa.PrivateKey
	ed                  ed25519.PrivateKey
	hmac, hmac2         []byte
}

var (
	keysOnce sync.Once
	tk       testKeys
)

func keys(t testing.TB) *testKeys {
	t.Helper()
	keysOnce.Do(func() {
		must := func(err error) {
			if err != nil {
				panic(err)
			}
		}
		var err error
		for _, k := range []**rsa.PrivateKey{&tk.rsa, &tk.rsa2, &tk.attacker} {
			*k, err = rsa.GenerateKey(rand.Reader, 2048)
			must(err)
		}
		tk.weakRSA, err = rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // a weak key the gateway must refuse
		must(err)
		tk.ec256, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(err)
		tk.ec384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		must(err)
		_, tk.ed, err = ed25519.GenerateKey(rand.Reader)
		must(err)
		tk.hmac = []byte("0123456789abcdef0123456789abcdef-demo-secret")
		tk.hmac2 = []byte("fedcba9876543210fedcba9876543210-next-secret")
	})
	return &tk
}

// pemPublic returns pub as a PEM PUBLIC KEY block.
func pemPublic(t testing.TB, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	// Written aside and renamed, as a Kubernetes Secret volume swaps its files: a reader never sees half.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// testNow is the tests' clock.
var testNow = time.Unix(1_800_000_000, 0)

// baseClaims returns the claims of a good token, to be changed by a case.
func baseClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss":     "https://issuer.example",
		"aud":     "ssegate",
		"sub":     "user-42",
		"exp":     testNow.Add(time.Hour).Unix(),
		"nbf":     testNow.Add(-time.Minute).Unix(),
		"ssegate": map[string]any{"topics": []string{"orders"}, "keys": []string{"user-42"}},
	}
}

// sign signs claims with method and key, with extra header fields.
func sign(t testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwk returns the JWK of key with kid and alg ("" for none).
func jwk(t testing.TB, key any, kid string, alg jwkset.ALG) jwkset.JWKMarshal {
	t.Helper()
	j, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{
		Marshal:  jwkset.JWKMarshalOptions{Private: true},
		Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: alg, USE: jwkset.UseSig},
	})
	if err != nil {
		t.Fatal(err)
	}
	return j.Marshal()
}

func jwksJSON(t testing.TB, keys ...jwkset.JWKMarshal) []byte {
	t.Helper()
	b, err := json.Marshal(jwkset.JWKSMarshal{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jwksServer serves a JWK Set that a test can change, and counts the fetches.
type jwksServer struct {
	*httptest.Server
	body    atomic.Pointer[[]byte]
	status  atomic.Int32
	fetches atomic.Int32
}

func newJWKSServer(t testing.TB, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.set(body)
	s.status.Store(http.StatusOK)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(int(s.status.Load()))
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(body []byte) { s.body.Store(&body) }

// newVerifier builds a Verifier and runs it until the test ends.
func newVerifier(t testing.TB, cfg Config) *Verifier {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = discardLog
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return testNow }
	}
	v, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := contextWithCancel()
	done := make(chan struct{})
	go func() { v.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return v
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
