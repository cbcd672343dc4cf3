package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// Minimum key strengths: weaker keys are refused wherever they come from.
const (
	// MinRSABits is the smallest RSA modulus accepted (RFC 7518 section 3.3 asks for 2048).
	MinRSABits = 2048
	// MinHMACBytes is the shortest HMAC secret accepted: as long as the SHA-256 output (RFC 7518 section 3.2).
	MinHMACBytes = 32
	// maxKeySourceBytes bounds what is read from a key file or a JWKS URL.
	maxKeySourceBytes = 1 << 20
)

// keySet is what one key source holds at one moment. It is immutable once built: a refresh builds a new one and
// swaps it in, so a verification in progress keeps the set it started with.
type keySet struct {
	hmac   [][]byte           // HMAC secrets, for HS*
	public []crypto.PublicKey // public keys without a kid, for RS*, PS*, ES*, EdDSA
	jwks   keyfunc.Keyfunc    // a JWK Set, selected by kid; nil for the other sources
}

// sourceKind is what a key source's bytes hold.
type sourceKind int

const (
	kindPEM  sourceKind = iota // PEM public keys or certificates
	kindHMAC                   // one HMAC secret
	kindJWKS                   // a JWK Set
)

// source is one configured place keys come from: a file, read again at every refresh and swapped in when it
// changed and parses; or a JWKS URL, fetched at every refresh. A failed read or parse keeps the keys it had.
type source struct {
	setting string // the setting that names it, for logs and errors
	kind    sourceKind
	path    string // a file; empty for a URL
	url     string
	client  *http.Client

	set  atomic.Pointer[keySet]
	last []byte // the bytes set was built from; only the refresh goroutine (or New) touches it
}

// keys returns the source's current keys (nil before the first good load).
func (s *source) keys() *keySet { return s.set.Load() }

// load reads the source again and swaps in its keys when they changed and parse. It reports whether it swapped.
func (s *source) load(ctx context.Context, log *slog.Logger) (bool, error) {
	data, err := s.read(ctx)
	if err != nil {
		return false, err
	}
	if s.set.Load() != nil && bytes.Equal(data, s.last) {
		return false, nil
	}
	var ks *keySet
	switch s.kind {
	case kindPEM:
		ks, err = parsePEMKeys(data)
	case kindHMAC:
		ks, err = parseHMACSecret(data)
	case kindJWKS:
		ks, err = parseJWKS(data, s.url == "", log.With("setting", s.setting))
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", s.setting, err)
	}
	s.set.Store(ks)
	s.last = data
	return true, nil
}

func (s *source) read(ctx context.Context) ([]byte, error) {
	if s.path != "" {
		f, err := os.Open(s.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.setting, err)
		}
		defer func() { _ = f.Close() }()
		return io.ReadAll(io.LimitReader(f, maxKeySourceBytes))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.setting, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.setting, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s answered %d", s.setting, s.url, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxKeySourceBytes))
}

// parsePEMKeys reads public keys from PEM blocks: PUBLIC KEY (PKIX), RSA PUBLIC KEY (PKCS #1) or
// CERTIFICATE. A private key is refused: the gateway verifies, it never signs, and a private key in its
// configuration is one more place to leak it from.
func parsePEMKeys(data []byte) (*keySet, error) {
	ks := &keySet{}
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		var pub any
		var err error
		switch {
		case b.Type == "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(b.Bytes)
		case b.Type == "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(b.Bytes)
		case b.Type == "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(b.Bytes); err == nil {
				pub = cert.PublicKey
			}
		case strings.Contains(b.Type, "PRIVATE KEY"):
			return nil, fmt.Errorf("%w: a %s block: give the gateway public keys only", ErrKey, b.Type)
		default:
			return nil, fmt.Errorf("%w: unexpected PEM block %q", ErrKey, b.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s block: %w", ErrKey, b.Type, err)
		}
		if err := checkPublicKey(pub); err != nil {
			return nil, err
		}
		ks.public = append(ks.public, pub)
	}
	if len(ks.public) == 0 {
		return nil, fmt.Errorf("%w: no PEM public key or certificate found", ErrKey)
	}
	return ks, nil
}

// checkPublicKey refuses key types the gateway cannot verify with and keys that are too weak.
func checkPublicKey(pub any) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return fmt.Errorf("%w: an RSA key of %d bits; at least %d are needed", ErrKey, k.N.BitLen(), MinRSABits)
		}
	case *ecdsa.PublicKey:
		if curveAlg(k.Curve) == "" {
			return fmt.Errorf("%w: an EC key on curve %s; want P-256, P-384 or P-521", ErrKey, k.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("%w: a key of type %T; want RSA, EC or Ed25519", ErrKey, pub)
	}
	return nil
}

// parseHMACSecret takes the file's bytes, without trailing CR and LF, as one HMAC secret. PEM text is refused:
// a public key used as an HMAC secret is the classic algorithm-confusion attack, so the gateway never takes
// one for a secret, even when told to.
func parseHMACSecret(data []byte) (*keySet, error) {
	secret := bytes.TrimRight(data, "\r\n")
	if bytes.Contains(secret, []byte("-----BEGIN")) {
		return nil, fmt.Errorf("%w: the HMAC secret file holds PEM text; a public key is never an HMAC secret", ErrKey)
	}
	if len(secret) < MinHMACBytes {
		return nil, fmt.Errorf("%w: an HMAC secret of %d bytes; at least %d are needed", ErrKey, len(secret), MinHMACBytes)
	}
	return &keySet{hmac: [][]byte{secret}}, nil
}

// parseJWKS reads a JWK Set. Keys that cannot be used (unsupported types, weak keys, keys for encryption) are
// left out and logged, so that one odd key does not take the whole set down. Symmetric (oct) keys are taken
// only from a file (withOct): a JWK Set served at a URL is public, and an HMAC secret in it is no secret.
func parseJWKS(data []byte, withOct bool, log *slog.Logger) (*keySet, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%w: not a JWK Set: %w", ErrKey, err)
	}
	store := jwkset.NewMemoryStorage()
	n := 0
	for i, m := range set.Keys {
		if m.KTY == jwkset.KtyOct && !withOct {
			log.Warn("JWK Set key left out: a symmetric key served at a URL is public", "index", i, "kid", m.KID)
			continue
		}
		if m.USE != "" && m.USE != jwkset.UseSig {
			continue
		}
		// Private parts are dropped (only oct keys need them: their secret is the key).
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: m.KTY == jwkset.KtyOct}, jwkset.JWKValidateOptions{})
		if err == nil {
			err = checkJWK(jwk)
		}
		if err != nil {
			log.Warn("JWK Set key left out", "index", i, "kid", m.KID, "err", err)
			continue
		}
		if err := store.KeyWrite(context.Background(), jwk); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKey, err)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the JWK Set holds no usable signature key", ErrKey)
	}
	kf, err := keyfunc.New(keyfunc.Options{Storage: store})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	return &keySet{jwks: kf}, nil
}

// checkJWK applies the gateway's key rules to a JWK.
func checkJWK(jwk jwkset.JWK) error {
	switch k := jwk.Key().(type) {
	case []byte:
		if len(k) < MinHMACBytes {
			return fmt.Errorf("%w: an oct key of %d bytes; at least %d are needed", ErrKey, len(k), MinHMACBytes)
		}
		return nil
	case *rsa.PrivateKey:
		return checkPublicKey(&k.PublicKey)
	case *ecdsa.PrivateKey:
		return checkPublicKey(&k.PublicKey)
	case ed25519.PrivateKey:
		return nil
	default:
		return checkPublicKey(k)
	}
}

// family is the key type an algorithm verifies with.
type family int

const (
	famNone family = iota
	famHMAC
	famRSA
	famEC
	famEd25519
)

// algorithms lists every algorithm the gateway can be configured for, with the key type it needs. "none" is
// not among them and never will be.
var algorithms = map[string]family{
	"HS256": famHMAC, "HS384": famHMAC, "HS512": famHMAC,
	"RS256": famRSA, "RS384": famRSA, "RS512": famRSA,
	"PS256": famRSA, "PS384": famRSA, "PS512": famRSA,
	"ES256": famEC, "ES384": famEC, "ES512": famEC,
	"EdDSA": famEd25519,
}

// curveAlg returns the ES algorithm of a curve, or "" for a curve the gateway does not take.
func curveAlg(c elliptic.Curve) string {
	switch c {
	case elliptic.P256():
		return "ES256"
	case elliptic.P384():
		return "ES384"
	case elliptic.P521():
		return "ES512"
	}
	return ""
}

// fits says whether key verifies tokens of alg. The key's Go type decides, never the token: an RSA key is
// never handed to an HMAC check (algorithm confusion), an ES256 token gets only P-256 keys.
func fits(alg string, key any) bool {
	switch k := key.(type) {
	case []byte:
		return algorithms[alg] == famHMAC
	case *rsa.PublicKey:
		return algorithms[alg] == famRSA
	case *ecdsa.PublicKey:
		return curveAlg(k.Curve) == alg
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// candidates returns the keys of ks that may verify t: for a key set, the keys keyfunc selects by kid (all
// keys when t has none), whose JWK alg (when given) is t's; for the other sources, every key of t's type.
func (ks *keySet) candidates(ctx context.Context, t *jwt.Token, alg string, out []any) []any {
	if ks == nil {
		return out
	}
	for _, k := range ks.hmac {
		if fits(alg, k) {
			out = append(out, k)
		}
	}
	for _, k := range ks.public {
		if fits(alg, k) {
			out = append(out, k)
		}
	}
	if ks.jwks == nil {
		return out
	}
	got, err := ks.jwks.KeyfuncCtx(ctx)(t)
	if err != nil {
		return out // no key with this kid, or its alg is another one
	}
	var keys []any
	if set, ok := got.(jwt.VerificationKeySet); ok {
		for _, k := range set.Keys {
			keys = append(keys, k)
		}
	} else {
		keys = append(keys, got)
	}
	for _, k := range keys {
		if fits(alg, k) {
			out = append(out, k)
		}
	}
	return out
}

// errNoFit: a source's keys cannot verify any configured algorithm.
var errNoFit = errors.New("auth: no key fits the configured algorithms")
