package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxTokenBytes bounds a token's length. Longer ones are refused before any decoding: a token is read from a
// header, a cookie or the query, and each byte of it costs base64 and JSON work.
const MaxTokenBytes = 16 << 10

// UnknownKeyRefreshGap is how soon after a refresh a token naming an unknown kid may cause another one: an
// issuer that rotated its keys is seen at once, a stream of forged kids costs one JWKS fetch per gap.
const UnknownKeyRefreshGap = 10 * time.Second

// unknownKeyWait bounds how long a verification waits for the refresh its unknown kid asked for.
const unknownKeyWait = 5 * time.Second

// Config configures a Verifier.
type Config struct {
	// Algorithms are the JWS algorithms accepted (HS256, HS384, HS512, RS256, ..., PS512, ES256, ES384,
	// ES512, EdDSA). Required; "none" is never accepted.
	Algorithms []string
	// KeyFile is a PEM file of public keys or certificates (RSA, EC, Ed25519). Empty means none.
	KeyFile string
	// HMACSecretFile is a file whose bytes (without trailing CR and LF) are an HMAC secret of at least 32
	// bytes. Empty means none.
	HMACSecretFile string
	// JWKSFile is a JWK Set file; its oct keys are HMAC secrets. Empty means none.
	JWKSFile string
	// JWKSURL is where a JWK Set is fetched (oct keys there are left out: a URL is public). Empty means none.
	JWKSURL string
	// Issuer, when not empty, is the iss every token must have.
	Issuer string
	// Audience, when not empty, lists audiences of which a token's aud must name one.
	Audience []string
	// Leeway is how far exp and nbf may be past, or ahead, for clock skew. Zero means none.
	Leeway time.Duration
	// Refresh is how often key files are read again and the JWKS URL fetched again. Zero means 1 minute.
	Refresh time.Duration
	// Claim names the scope claim. Empty means "ssegate".
	Claim string
	// HTTPClient fetches the JWKS URL. Nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	// Logger receives refresh failures and left-out keys. Nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for exp and nbf. Nil means time.Now.
	Now func() time.Time
}

// Verifier checks tokens against the configured keys and rules.
type Verifier struct {
	cfg     Config
	log     *slog.Logger
	parser  *jwt.Parser
	algs    map[string]bool
	sources []*source
	url     *source // the JWKS URL source, also in sources; nil without one

	kick  chan struct{} // asks Run for a refresh (a token named an unknown kid)
	mu    sync.Mutex
	round chan struct{} // closed when the refresh in progress (or the next one) ends
	// asked counts the refreshes verifications asked for; served is the count Run had taken when its last
	// round in answer to them ended. A verification waits until served reaches its ask: a round that was
	// under way when it asked (Run's first fetch, a periodic one) may have read the set before the rotation.
	asked, served uint64
}

// New checks cfg, reads every key file once (a file that cannot be read or used is an error) and returns a
// Verifier. It does not fetch the JWKS URL: Run does, at once, and again every Refresh.
func New(cfg Config) (*Verifier, error) {
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Minute
	}
	if cfg.Claim == "" {
		cfg.Claim = "ssegate"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	v := &Verifier{cfg: cfg, log: cfg.Logger, algs: map[string]bool{}, kick: make(chan struct{}, 1), round: make(chan struct{})}
	if len(cfg.Algorithms) == 0 {
		return nil, fmt.Errorf("%w: no algorithm configured", ErrAlgorithm)
	}
	fams := map[family]bool{}
	for _, a := range cfg.Algorithms {
		f, ok := algorithms[a]
		if !ok {
			if strings.EqualFold(a, "none") {
				return nil, fmt.Errorf("%w: %q is never accepted", ErrAlgorithm, a)
			}
			return nil, fmt.Errorf("%w: %q; want HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA", ErrAlgorithm, a)
		}
		v.algs[a] = true
		fams[f] = true
	}
	for _, s := range []struct {
		setting, path string
		kind          sourceKind
	}{{"auth-key-file", cfg.KeyFile, kindPEM}, {"auth-hmac-secret-file", cfg.HMACSecretFile, kindHMAC}, {"auth-jwks-file", cfg.JWKSFile, kindJWKS}} {
		if s.path != "" {
			v.sources = append(v.sources, &source{setting: s.setting, kind: s.kind, path: s.path})
		}
	}
	if cfg.JWKSURL != "" {
		u, err := url.Parse(cfg.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("%w: auth-jwks-url %q: want an http or https URL", ErrKey, cfg.JWKSURL)
		}
		v.url = &source{setting: "auth-jwks-url", kind: kindJWKS, url: cfg.JWKSURL, client: cfg.HTTPClient}
		v.sources = append(v.sources, v.url)
	}
	if len(v.sources) == 0 {
		return nil, ErrNoKeys
	}
	for _, s := range v.sources {
		if s.url != "" {
			continue
		}
		if _, err := s.load(context.Background(), v.log); err != nil {
			return nil, err
		}
	}
	if err := v.checkFamilies(fams); err != nil {
		return nil, err
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(cfg.Now),
		jwt.WithStrictDecoding(),
		// Numbers stay json.Number, so that checkDates sees an exp of 1e400 as written (a float64 decoding
		// would refuse the whole payload as malformed) and an exp of 0 as 1970, not as no exp.
		jwt.WithJSONNumber(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if len(cfg.Audience) > 0 {
		opts = append(opts, jwt.WithAudience(cfg.Audience...))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// checkFamilies refuses configurations where a configured algorithm can never verify (no source can hold a key
// of its type) and key files whose keys fit no configured algorithm.
func (v *Verifier) checkFamilies(fams map[family]bool) error {
	hasJWKS := v.url != nil || v.cfg.JWKSFile != ""
	for _, s := range v.sources {
		ks := s.keys()
		if ks == nil || ks.jwks != nil {
			continue
		}
		used := false
		for a := range v.algs {
			for _, k := range ks.hmac {
				used = used || fits(a, k)
			}
			for _, k := range ks.public {
				used = used || fits(a, k)
			}
		}
		if !used {
			return fmt.Errorf("%w: %s: %w (auth-algorithms %s)", ErrKey, s.setting, errNoFit, strings.Join(v.cfg.Algorithms, ","))
		}
	}
	if fams[famHMAC] && v.cfg.HMACSecretFile == "" && v.cfg.JWKSFile == "" {
		return fmt.Errorf("%w: an HS algorithm is configured but no HMAC secret: set auth-hmac-secret-file or auth-jwks-file (a JWKS URL never supplies secrets)", ErrKey)
	}
	for f := range fams {
		if f == famHMAC || hasJWKS {
			continue
		}
		found := false
		for _, s := range v.sources {
			if ks := s.keys(); ks != nil {
				for _, k := range ks.public {
					for a := range v.algs {
						found = found || (algorithms[a] == f && fits(a, k))
					}
				}
			}
		}
		if !found {
			return fmt.Errorf("%w: auth-algorithms %s names an algorithm no configured key can verify", ErrKey, strings.Join(v.cfg.Algorithms, ","))
		}
	}
	return nil
}

// Run fetches the JWKS URL at once, then reads every key source again every Refresh (and when a token names a
// kid no key set holds, at most once per UnknownKeyRefreshGap), until ctx ends. A source that fails keeps the
// keys it had, and the failure is logged. Without Run, the keys New read are used as they are.
func (v *Verifier) Run(ctx context.Context) {
	tick := time.NewTicker(v.cfg.Refresh)
	defer tick.Stop()
	if v.url != nil {
		v.refresh(ctx)
	}
	var kicked time.Time // the last refresh an unknown kid asked for
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			v.refresh(ctx)
		case <-v.kick:
			v.mu.Lock()
			asked := v.asked // every ask up to now is answered by this round
			v.mu.Unlock()
			if !kicked.IsZero() && time.Since(kicked) < UnknownKeyRefreshGap {
				v.endRound(asked) // nothing new: the waiting verifications refuse their kid at once
				continue
			}
			kicked = time.Now()
			v.reload(ctx)
			v.endRound(asked)
		}
	}
}

// refresh loads every source again, then wakes the verifications waiting for it (those that asked for a
// refresh of their own wait on).
func (v *Verifier) refresh(ctx context.Context) {
	v.reload(ctx)
	v.mu.Lock()
	served := v.served
	v.mu.Unlock()
	v.endRound(served)
}

// reload loads every source again.
func (v *Verifier) reload(ctx context.Context) {
	for _, s := range v.sources {
		changed, err := s.load(ctx, v.log)
		switch {
		case err != nil && ctx.Err() == nil:
			v.log.Warn("auth keys not refreshed; keeping the keys loaded before", "setting", s.setting, "err", err)
		case changed && (s.url == "" || s.last != nil):
			v.log.Info("auth keys loaded", "setting", s.setting)
		}
	}
}

// endRound wakes the verifications waiting for the current refresh round, which answered the asks up to
// served.
func (v *Verifier) endRound(served uint64) {
	v.mu.Lock()
	v.served = max(v.served, served)
	close(v.round)
	v.round = make(chan struct{})
	v.mu.Unlock()
}

// awaitRefresh asks Run for a refresh and waits for it, at most unknownKeyWait or until ctx ends.
func (v *Verifier) awaitRefresh(ctx context.Context) {
	v.mu.Lock()
	v.asked++
	ask, round := v.asked, v.round
	v.mu.Unlock()
	select {
	case v.kick <- struct{}{}:
	default: // a refresh is asked for already; Run takes this ask with it
	}
	t := time.NewTimer(unknownKeyWait)
	defer t.Stop()
	for {
		select {
		case <-round:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
		v.mu.Lock()
		done := v.served >= ask
		round = v.round
		v.mu.Unlock()
		if done {
			return
		}
	}
}

// Verify checks a token: its size, its algorithm, its signature with a key of the right type (selected by kid
// from a key set), exp (required), nbf, iss and aud, that exp, nbf and iat are representable times (see
// checkDates), and the shape of the scope claim. A refused token is an *Error. It never logs the token.
func (v *Verifier) Verify(ctx context.Context, token string) (*Claims, error) {
	if len(token) > MaxTokenBytes {
		return nil, refuse(ReasonTooLarge, nil)
	}
	mc := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(token, mc, v.keyfunc(ctx))
	if err != nil {
		return nil, v.classify(tok, mc, err)
	}
	if e := checkDates(mc); e != nil {
		return nil, e
	}
	exp, err := mc.GetExpirationTime()
	if err != nil || exp == nil {
		return nil, refuse(ReasonMissingExp, err)
	}
	sub, err := mc.GetSubject()
	if err != nil {
		return nil, &Error{Reason: ReasonBadClaim, Detail: "sub", Err: err}
	}
	c := &Claims{Subject: sub, Expires: exp.Time}
	if raw, ok := mc[v.cfg.Claim]; ok {
		b, err := json.Marshal(raw)
		if err == nil {
			c.Scope, err = parseScope(b)
		}
		if err != nil {
			return nil, &Error{Reason: ReasonBadClaim, Detail: v.cfg.Claim, Err: err}
		}
	}
	return c, nil
}

// Errors of the key lookup, told apart by classify.
var (
	errCritical  = errors.New("auth: the token has critical header parameters")
	errBadKID    = errors.New("auth: the token's kid is not a string")
	errAlgorithm = errors.New("auth: algorithm not accepted")
)

// keyfunc returns the keys a token may be verified with. The token's alg has been checked against the
// configured ones (the parser's WithValidMethods) and is checked again here; which keys it gets is decided by
// their type (see fits), never by what the token says.
func (v *Verifier) keyfunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			// RFC 7515 section 4.1.11: a recipient that does not understand a critical extension must refuse.
			return nil, errCritical
		}
		alg, _ := t.Header["alg"].(string)
		if !v.algs[alg] {
			return nil, errAlgorithm
		}
		if kid, ok := t.Header["kid"]; ok {
			if _, isString := kid.(string); !isString {
				return nil, errBadKID
			}
		}
		keys := v.candidates(ctx, t, alg)
		if len(keys) == 0 && v.url != nil {
			// The issuer may have rotated its keys since the last fetch.
			v.awaitRefresh(ctx)
			keys = v.candidates(ctx, t, alg)
		}
		if len(keys) == 0 {
			return nil, errUnknownKID
		}
		set := jwt.VerificationKeySet{Keys: make([]jwt.VerificationKey, len(keys))}
		for i, k := range keys {
			set.Keys[i] = k
		}
		return set, nil
	}
}

func (v *Verifier) candidates(ctx context.Context, t *jwt.Token, alg string) []any {
	var out []any
	for _, s := range v.sources {
		out = s.keys().candidates(ctx, t, alg, out)
	}
	return out
}

// classify turns a parse error into the Reason the client is told. Signature problems come first (golang-jwt
// checks the signature before the claims, so a forged token never learns whether its claims would pass);
// then, among claim errors, the one a client can act on first.
func (v *Verifier) classify(tok *jwt.Token, mc jwt.MapClaims, err error) *Error {
	alg := ""
	if tok != nil {
		alg, _ = tok.Header["alg"].(string)
	}
	switch {
	case errors.Is(err, errCritical), errors.Is(err, errBadKID), errors.Is(err, jwt.ErrTokenMalformed):
		return refuse(ReasonMalformed, err)
	case tok != nil && !v.algs[alg], errors.Is(err, errAlgorithm):
		return refuse(ReasonAlgorithm, err)
	case errors.Is(err, errUnknownKID):
		return refuse(ReasonUnknownKey, err)
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse(ReasonBadSignature, err)
	}
	if e := checkDates(mc); e != nil {
		// Before the validator's verdict on exp and nbf, which was reached with a time the claim does not say.
		return e
	}
	has := func(name string) bool { _, ok := mc[name]; return ok }
	switch {
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && !has("exp"):
		return refuse(ReasonMissingExp, err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return refuse(ReasonExpired, err)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return refuse(ReasonNotYetValid, err)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer),
		errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && v.cfg.Issuer != "" && !has("iss"):
		return refuse(ReasonWrongIssuer, err)
	case errors.Is(err, jwt.ErrTokenInvalidAudience),
		errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && len(v.cfg.Audience) > 0:
		return refuse(ReasonWrongAudience, err)
	default:
		return refuse(ReasonBadClaim, err)
	}
}

// Bounds of a date claim, in Unix seconds: the years 1 to 9999, the times RFC 3339 can write (Claims.Expires
// is written in frames and logs). Beyond them golang-jwt's conversion of the float to an int64 is
// implementation-defined: an exp of 1e300 becomes the most negative int64 on amd64 (a token told it has
// expired), and the most positive one on arm64 (a time.Time that overflows).
var (
	minDate = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxDate = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC).Unix()
)

// dateClaims are the registered claims that are NumericDates (RFC 7519 section 4.1), in the order checked.
var dateClaims = []string{"exp", "nbf", "iat"}

// checkDates refuses, as a bad claim, a token whose exp, nbf or iat is not a number, or is one that is no
// representable time (out of range, or too large for a float64). golang-jwt checks the type of exp and nbf
// only, and turns any number into a time without a range check; iat it does not look at. Called only once the
// signature has verified.
func checkDates(mc jwt.MapClaims) *Error {
	for _, name := range dateClaims {
		raw, ok := mc[name]
		if !ok {
			continue
		}
		var f float64
		var err error
		switch n := raw.(type) {
		case json.Number:
			f, err = n.Float64() // a range error for 1e400
		case float64:
			f = n
		default:
			return &Error{Reason: ReasonBadClaim, Detail: name, Err: fmt.Errorf("%w: %s is not a number", errBadDate, name)}
		}
		if err != nil || math.IsNaN(f) || f < float64(minDate) || f >= float64(maxDate+1) {
			return &Error{Reason: ReasonBadClaim, Detail: name, Err: fmt.Errorf("%w: %s is no time between the years 1 and 9999", errBadDate, name)}
		}
	}
	return nil
}

// Algorithms returns the names of every algorithm a Verifier can be configured for, sorted.
func Algorithms() []string {
	var out []string
	for a := range algorithms {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}
