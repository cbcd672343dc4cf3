package kafkatest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// OAuth audience and key id that the test broker's OAUTHBEARER accepts (pkg/kafkatest/kafka.sh).
const (
	OAuthAudience = "ssegate-kafka"
	oauthKeyID    = "kafkatest"
)

// TokenServer is an OAuth 2.0 token endpoint for the test broker's OAUTHBEARER: it answers the
// client-credentials grant of ClientID and ClientSecret (or the secret RotateSecret set) with an RS256 JWT
// that lives Lifetime.
type TokenServer struct {
	URL                    string
	ClientID, ClientSecret string
	// Issued counts the tokens issued.
	Issued atomic.Int64
	// Refused counts the requests refused.
	Refused atomic.Int64

	rotated atomic.Pointer[string]
}

// RotateSecret makes the server accept secret, and no longer ClientSecret (or the secret of an earlier call):
// a client secret rotated at the identity provider.
func (ts *TokenServer) RotateSecret(secret string) { ts.rotated.Store(&secret) }

// secret is the client secret accepted now.
func (ts *TokenServer) secret() string {
	if p := ts.rotated.Load(); p != nil {
		return *p
	}
	return ts.ClientSecret
}

// NewTokenServer serves tokens signed with the broker's key (KAFKA_OAUTH_KEY, set by pkg/kafkatest/kafka.sh;
// t is skipped without it, failed under CI=true), or, with foreign, with a key of its own that the broker
// does not know. It is closed when the test ends.
func NewTokenServer(t testing.TB, lifetime time.Duration, foreign bool) *TokenServer {
	t.Helper()
	key := oauthKey(t)
	if foreign {
		var err error
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	}
	ts := &TokenServer{ClientID: "ssegate", ClientSecret: "oauth-secret"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if r.Method != http.MethodPost || r.FormValue("grant_type") != "client_credentials" || !ok ||
			id != ts.ClientID || secret != ts.secret() {
			ts.Refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"unknown client or secret"}`))
			return
		}
		now := time.Now()
		claims := jwt.MapClaims{"sub": id, "aud": OAuthAudience, "iat": now.Unix(), "exp": now.Add(lifetime).Unix()}
		if scope := r.FormValue("scope"); scope != "" {
			claims["scope"] = scope // the broker refuses an empty scope claim
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = oauthKeyID
		signed, err := tok.SignedString(key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		ts.Issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": signed, "token_type": "Bearer", "expires_in": int(lifetime / time.Second),
		})
	}))
	t.Cleanup(srv.Close)
	ts.URL = srv.URL
	return ts
}

// oauthKey reads the test broker's OAUTHBEARER signing key.
func oauthKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	data, err := os.ReadFile(fromEnv(t, "KAFKA_OAUTH_KEY")[0])
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("KAFKA_OAUTH_KEY holds no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("KAFKA_OAUTH_KEY holds a %T, want an RSA key", k)
	}
	return rk
}
