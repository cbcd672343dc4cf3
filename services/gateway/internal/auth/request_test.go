package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestExtractorToken: where a token comes from, in which order, and what is refused before any verification.
func TestExtractorToken(t *testing.T) {
	const tok = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"
	for _, tc := range []struct {
		name   string
		x      Extractor
		url    string
		header []string
		cookie string
		want   string
		reason Reason // -1: no error
	}{
		{"nothing", Extractor{Cookie: "t"}, "/", nil, "", "", -1},
		{"header", Extractor{}, "/", []string{"Bearer " + tok}, "", tok, -1},
		{"header, scheme in lower case, extra spaces", Extractor{}, "/", []string{"bearer   " + tok + " "}, "", tok, -1},
		{"header with another scheme is no token", Extractor{}, "/", []string{"Basic dXNlcjpwYXNz"}, "", "", -1},
		{"header Bearer alone", Extractor{}, "/", []string{"Bearer"}, "", "", ReasonMalformed},
		{"header with two tokens", Extractor{}, "/", []string{"Bearer a b"}, "", "", ReasonMalformed},
		{"header with a quote", Extractor{}, "/", []string{`Bearer a"b`}, "", "", ReasonMalformed},
		{"two Authorization headers", Extractor{}, "/", []string{"Bearer a", "Bearer b"}, "", "", ReasonMultipleTokens},
		{"cookie", Extractor{Cookie: "t"}, "/", nil, tok, tok, -1},
		{"cookie of another name", Extractor{Cookie: "other"}, "/", nil, tok, "", -1},
		{"cookie off", Extractor{}, "/", nil, tok, "", -1},
		{"header wins over the cookie", Extractor{Cookie: "t"}, "/", []string{"Bearer " + tok}, "stale", tok, -1},
		{"query allowed", Extractor{Query: true}, "/?access_token=" + tok, nil, "", tok, -1},
		{"query wins over the cookie", Extractor{Query: true, Cookie: "t"}, "/?access_token=" + tok, nil, "stale", tok, -1},
		{"query refused", Extractor{}, "/?access_token=" + tok, nil, "", "", ReasonQueryTokenRefused},
		{"query twice", Extractor{Query: true}, "/?access_token=a&access_token=b", nil, "", "", ReasonMultipleTokens},
		{"query and header", Extractor{Query: true}, "/?access_token=a", []string{"Bearer b"}, "", "", ReasonMultipleTokens},
		{"query empty", Extractor{Query: true}, "/?access_token=", nil, "", "", ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tc.url, nil)
			for _, h := range tc.header {
				r.Header.Add("Authorization", h)
			}
			if tc.cookie != "" {
				r.AddCookie(&http.Cookie{Name: "t", Value: tc.cookie})
			}
			got, err := tc.x.Token(r)
			if tc.reason < 0 {
				if err != nil || got != tc.want {
					t.Fatalf("Token = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if r, _ := ReasonOf(err); r != tc.reason || got != "" {
				t.Fatalf("Token = %q, %v; want reason %v", got, err, tc.reason)
			}
		})
	}
}

// TestErrorAnswers: each reason's status, RFC 6750 code and challenge.
func TestErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		r         Reason
		status    int
		challenge string
	}{
		{ReasonMissing, 401, `Bearer realm="ssegate"`},
		{ReasonExpired, 401, `Bearer realm="ssegate", error="invalid_token", error_description="the token has expired"`},
		{ReasonBadSignature, 401, `Bearer realm="ssegate", error="invalid_token", error_description="the token's signature does not verify"`},
		{ReasonInsufficientScope, 403, `Bearer realm="ssegate", error="insufficient_scope", error_description="the token does not allow this stream"`},
		{ReasonMultipleTokens, 400, `Bearer realm="ssegate", error="invalid_request", error_description="the request carries more than one token"`},
	} {
		e := &Error{Reason: tc.r, Detail: "topic x"}
		if e.Status() != tc.status || e.Challenge("ssegate") != tc.challenge {
			t.Errorf("%v: %d %q, want %d %q", tc.r, e.Status(), e.Challenge("ssegate"), tc.status, tc.challenge)
		}
	}
	for _, r := range Reasons() {
		if r.String() == "unknown" || r.text() == "the token is refused" {
			t.Errorf("reason %d has no name or text", r)
		}
	}
}
