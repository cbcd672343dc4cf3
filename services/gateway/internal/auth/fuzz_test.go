package auth

import (
	"path"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzBearer: any Authorization header value parses without panicking; a token that comes out is one b64token,
// and putting it back behind "Bearer " gives the same token.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc.def.ghi", "bearer  x==", "Basic Zm9v", "Bearer", "Bearer a b", "Bearer a=b", " Bearer x", "BEARER ~+/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, isBearer, err := bearer(v)
		if err != nil {
			if !isBearer {
				t.Fatalf("an error for a non-Bearer value %q", v)
			}
			if _, ok := ReasonOf(err); !ok {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		if !isBearer {
			if tok != "" {
				t.Fatalf("a token from a non-Bearer value %q", v)
			}
			return
		}
		if !isB64Token(tok) || strings.ContainsAny(tok, " \t\r\n") {
			t.Fatalf("token %q from %q is not a b64token", tok, v)
		}
		again, ok, err := bearer("Bearer " + tok)
		if err != nil || !ok || again != tok {
			t.Fatalf("round trip of %q: %q %v %v", tok, again, ok, err)
		}
	})
}

// FuzzVerify: any string is verified without panicking, refused with an *Error, and only the tokens the
// issuer signed are accepted: no change to a header, payload or signature (not even another base64 spelling
// of the same bytes) gets through.
func FuzzVerify(f *testing.F) {
	k := keys(f)
	cfg := Config{Algorithms: []string{"RS256", "ES256", "EdDSA", "HS256"}}
	dir := f.TempDir()
	cfg.KeyFile = writeFile(f, dir, "keys.pem", append(append(pemPublic(f, &k.rsa.PublicKey), pemPublic(f, &k.ec256.PublicKey)...), pemPublic(f, k.ed.Public())...))
	cfg.HMACSecretFile = writeFile(f, dir, "hmac", k.hmac)
	v := newVerifier(f, cfg)
	valid := map[string]bool{}
	for _, tok := range []string{
		sign(f, jwt.SigningMethodRS256, k.rsa, baseClaims(), nil),
		sign(f, jwt.SigningMethodES256, k.ec256, baseClaims(), map[string]any{"kid": "x"}),
		sign(f, jwt.SigningMethodEdDSA, k.ed, baseClaims(), nil),
		sign(f, jwt.SigningMethodHS256, k.hmac, baseClaims(), nil),
	} {
		valid[tok] = true
		f.Add(tok)
	}
	f.Add(sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, baseClaims(), nil))
	f.Add(sign(f, jwt.SigningMethodHS256, pemPublic(f, &k.rsa.PublicKey), baseClaims(), nil))
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(t.Context(), tok)
		if err == nil {
			if !valid[tok] {
				t.Fatalf("accepted a token the issuer never signed: %q", tok)
			}
			if c.Scope == nil || !c.Scope.AllowsTopic("orders") {
				t.Fatalf("scope %+v", c.Scope)
			}
			return
		}
		if _, ok := ReasonOf(err); !ok {
			t.Fatalf("error %v is not an *Error", err)
		}
	})
}

// FuzzScope: any claim JSON is read without panicking; an accepted scope has topics that are all valid
// patterns and no empty key or event.
func FuzzScope(f *testing.F) {
	for _, s := range []string{
		`{"topics":["orders"],"keys":["user-42"]}`, `{"topics":[]}`, `{"topics":["a["]}`, `{"topics":null}`,
		`{"topics":["*"],"events":["x"],"keys":[]}`, `null`, `[]`, `"x"`, `{"topics":["a"],"extra":1}`,
		`{"topics":["*"],"per_topic":{"a*":{"keys":["k"]},"b":{"filter":"true"}}}`, `{"topics":["*"],"per_topic":{"a":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := parseScope(raw)
		if err != nil {
			return
		}
		if s.Topics == nil {
			t.Fatal("a scope without topics")
		}
		for _, p := range s.Topics {
			s.AllowsTopic(p)
			if p == "" {
				t.Fatal("an empty pattern")
			}
		}
		lists := [][]string{s.Keys, s.Events}
		for p, e := range s.PerTopic {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				t.Fatalf("per-topic pattern %q", p)
			}
			lists = append(lists, e.Keys, e.Events)
		}
		for _, list := range lists {
			for _, v := range list {
				if v == "" {
					t.Fatal("an empty value")
				}
			}
		}
	})
}
