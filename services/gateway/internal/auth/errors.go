package auth

import (
	"errors"
	"net/http"
)

// Reason says why a request's token was refused. Its String form is the "reason" of the JSON error body and a
// metric label.
type Reason int

// Reasons a token is refused. Each maps to an RFC 6750 error code and an HTTP status (see Error.Status).
const (
	// ReasonMissing: the topic needs a token and the request carries none (401, no error code, as RFC 6750
	// section 3.1 asks of a request without any authentication).
	ReasonMissing Reason = iota
	// ReasonMalformed: not a compact JWS, bad base64 or JSON, an unsupported critical header (401
	// invalid_token).
	ReasonMalformed
	// ReasonTooLarge: the token is longer than MaxTokenBytes (401 invalid_token).
	ReasonTooLarge
	// ReasonAlgorithm: the token's alg is not one the gateway is configured for; "none" never is (401
	// invalid_token).
	ReasonAlgorithm
	// ReasonUnknownKey: no key the gateway holds fits the token: its kid is in no key set (even after a
	// refresh), or no key is of its algorithm's type (401 invalid_token).
	ReasonUnknownKey
	// ReasonBadSignature: the signature does not verify with any fitting key (401 invalid_token).
	ReasonBadSignature
	// ReasonMissingExp: the token has no exp claim; one is required (401 invalid_token).
	ReasonMissingExp
	// ReasonExpired: exp has passed, beyond the leeway (401 invalid_token).
	ReasonExpired
	// ReasonNotYetValid: nbf is still in the future, beyond the leeway (401 invalid_token).
	ReasonNotYetValid
	// ReasonWrongIssuer: iss is missing or not the configured issuer (401 invalid_token).
	ReasonWrongIssuer
	// ReasonWrongAudience: aud is missing or names none of the configured audiences (401 invalid_token).
	ReasonWrongAudience
	// ReasonBadClaim: the scope claim, or a registered claim, is not of the expected shape (401
	// invalid_token).
	ReasonBadClaim
	// ReasonInsufficientScope: the token is good but does not allow this topic, or what the request asks of
	// it (403 insufficient_scope).
	ReasonInsufficientScope
	// ReasonMultipleTokens: the request carries a token both in the Authorization header and in the query
	// (400 invalid_request).
	ReasonMultipleTokens
	// ReasonQueryTokenRefused: the request carries an access_token query parameter and the gateway does not
	// accept tokens there (400 invalid_request).
	ReasonQueryTokenRefused

	numReasons
)

var reasonNames = [numReasons]string{
	"missing", "malformed", "too_large", "algorithm", "unknown_key", "bad_signature", "missing_exp",
	"expired", "not_yet_valid", "wrong_issuer", "wrong_audience", "bad_claim", "insufficient_scope",
	"multiple_tokens", "query_token_not_allowed",
}

// reasonText is the fixed message of each reason: what the JSON body's "error" and the challenge's
// error_description say. It never holds anything from the request.
var reasonText = [numReasons]string{
	"a token is required",
	"the token is malformed",
	"the token is too large",
	"the token's algorithm is not accepted",
	"no key fits the token",
	"the token's signature does not verify",
	"the token has no exp claim",
	"the token has expired",
	"the token is not valid yet",
	"the token's issuer is not accepted",
	"the token's audience is not accepted",
	"a claim of the token is malformed",
	"the token does not allow this stream",
	"the request carries more than one token",
	"tokens are not accepted in the query",
}

// String returns the reason's label, e.g. "expired".
func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// Reasons returns every Reason, for pre-registering metric series.
func Reasons() []Reason {
	rs := make([]Reason, numReasons)
	for i := range rs {
		rs[i] = Reason(i)
	}
	return rs
}

// Error is a refused request: why, in words that are safe to show the client, and the cause for logs.
type Error struct {
	Reason Reason
	// Detail adds to the reason's fixed message; it never holds token content, only the gateway's own words
	// (a claim's name, the topic asked for). Empty means none.
	Detail string
	// Err is the cause, for logs; it may quote the token's header fields, so it is never shown to a client.
	Err error
}

func refuse(r Reason, err error) *Error { return &Error{Reason: r, Err: err} }

// Error returns the message shown to the client.
func (e *Error) Error() string {
	msg := e.Reason.text()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func (r Reason) text() string {
	if r < 0 || r >= numReasons {
		return "the token is refused"
	}
	return reasonText[r]
}

// Code returns the RFC 6750 error code: "invalid_request", "invalid_token", "insufficient_scope", or "" for a
// request that carries no token.
func (e *Error) Code() string {
	switch e.Reason {
	case ReasonMissing:
		return ""
	case ReasonInsufficientScope:
		return "insufficient_scope"
	case ReasonMultipleTokens, ReasonQueryTokenRefused:
		return "invalid_request"
	default:
		return "invalid_token"
	}
}

// Status returns the HTTP status the refusal is answered with: 400, 401 or 403.
func (e *Error) Status() int {
	switch e.Code() {
	case "insufficient_scope":
		return http.StatusForbidden
	case "invalid_request":
		return http.StatusBadRequest
	default:
		return http.StatusUnauthorized
	}
}

// Challenge returns the WWW-Authenticate header value, RFC 6750 section 3: Bearer with the realm, and the
// error code and a fixed description when there is a code.
func (e *Error) Challenge(realm string) string {
	v := `Bearer realm="` + realm + `"`
	if code := e.Code(); code != "" {
		v += `, error="` + code + `", error_description="` + e.Reason.text() + `"`
	}
	return v
}

// ReasonOf returns the Reason of an *Error in err's chain, and whether there is one.
func ReasonOf(err error) (Reason, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, true
	}
	return 0, false
}

// Errors of the key sources and of configuration, wrapped with details.
var (
	// ErrNoKeys is returned by New when no key source is configured.
	ErrNoKeys = errors.New("auth: no key source configured")
	// ErrAlgorithm is returned by New for an algorithm name it does not support (none among them).
	ErrAlgorithm = errors.New("auth: unsupported algorithm")
	// ErrKey is a key file or key set that cannot be used.
	ErrKey = errors.New("auth: unusable key")
)

// errUnknownKID: the token's kid is in no key set.
var errUnknownKID = errors.New("auth: unknown kid")

// errBadDate: a date claim (exp, nbf, iat) is not a number, or no representable time; the client is told
// ReasonBadClaim.
var errBadDate = errors.New("auth: bad date claim")
