package auth

import (
	"net/http"
	"strings"
)

// QueryParam is the query parameter a token may come in, when Extractor.Query allows it (RFC 6750 section
// 2.3).
const QueryParam = "access_token"

// Extractor finds a request's token: in the Authorization header (Bearer, RFC 6750 section 2.1; what fetch
// clients send), else in the access_token query parameter when Query allows it, else in the cookie named
// Cookie (what an EventSource sends: it cannot set headers). The zero value looks at the header alone.
type Extractor struct {
	// Cookie names the cookie a token may come in. Empty means none.
	Cookie string
	// Query allows the access_token query parameter. False (the default) refuses it: a token in a URL ends up
	// in the logs of every proxy on the way.
	Query bool
}

// Token returns the request's token, or "" when it carries none. A token both in the header and in the query,
// an Authorization header given twice, or a query token when Query is off is an *Error (400 invalid_request);
// a Bearer header whose credentials are not a b64token is one too (401 invalid_token).
func (x Extractor) Token(r *http.Request) (string, error) {
	var header string
	switch vs := r.Header.Values("Authorization"); len(vs) {
	case 0:
	case 1:
		tok, isBearer, err := bearer(vs[0])
		if err != nil {
			return "", err
		}
		if isBearer {
			header = tok
		}
	default:
		return "", &Error{Reason: ReasonMultipleTokens, Detail: "more than one Authorization header"}
	}
	qs, inQuery := r.URL.Query()[QueryParam]
	switch {
	case inQuery && !x.Query:
		return "", refuse(ReasonQueryTokenRefused, nil)
	case inQuery && (len(qs) > 1 || header != ""):
		return "", refuse(ReasonMultipleTokens, nil)
	case header != "":
		return header, nil
	case inQuery:
		if qs[0] == "" {
			return "", &Error{Reason: ReasonMalformed, Detail: "empty " + QueryParam}
		}
		return qs[0], nil
	}
	if x.Cookie != "" {
		for _, c := range r.Cookies() {
			// A browser sends the cookie of the most specific path first.
			if c.Name == x.Cookie && c.Value != "" {
				return c.Value, nil
			}
		}
	}
	return "", nil
}

// FromCookie says whether r's token is the cookie's: Token finds one, and neither in the Authorization header
// nor in the query. A browser sends the cookie on its own, whatever page made the request.
func (x Extractor) FromCookie(r *http.Request) bool {
	if tok, err := x.Token(r); err != nil || tok == "" {
		return false
	}
	if _, inQuery := r.URL.Query()[QueryParam]; inQuery {
		return false
	}
	for _, v := range r.Header.Values("Authorization") {
		if _, isBearer, _ := bearer(v); isBearer {
			return false
		}
	}
	return true
}

// bearer reads an Authorization header value. It reports whether the scheme is Bearer (case-insensitive, RFC
// 9110 section 11.1); the credentials must then be one b64token (RFC 6750 section 2.1), surrounded by spaces
// at most.
func bearer(v string) (token string, isBearer bool, err error) {
	scheme, rest, _ := strings.Cut(strings.TrimLeft(v, " "), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false, nil
	}
	tok := strings.Trim(rest, " ")
	if tok == "" || !isB64Token(tok) {
		return "", true, &Error{Reason: ReasonMalformed, Detail: "the Authorization header is not Bearer and one token"}
	}
	return tok, true, nil
}

// isB64Token says whether s is a b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := range len(body) {
		c := body[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		default:
			return false
		}
	}
	return true
}
