package source

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// RedirectPolicy says which redirects a source follows. Whatever the policy, a redirect from https to
// http (a downgrade) is never followed, and a connection makes at most maxRedirects requests.
type RedirectPolicy int

// The redirect policies.
const (
	// RedirectSameOrigin follows redirects only within the origin (scheme, host and port) of the source's
	// URL; the credentials and headers go along. It is the default (the zero value).
	RedirectSameOrigin RedirectPolicy = iota
	// RedirectAny follows redirects to any origin too, but once a connection has left the source's origin
	// it sends none of the source's credentials and headers (see stripCredentials), for the rest of that
	// connection's redirects, even back to the source's origin.
	RedirectAny
	// RedirectNone follows no redirect.
	RedirectNone
)

// maxRedirects is how many requests one connection makes at most, the first and those of the redirects
// it follows, as net/http's default: the 10th redirect in a row is refused.
const maxRedirects = 10

// ParseRedirectPolicy parses "same-origin", "any" or "none"; empty means "same-origin".
func ParseRedirectPolicy(s string) (RedirectPolicy, error) {
	switch s {
	case "", "same-origin":
		return RedirectSameOrigin, nil
	case "any":
		return RedirectAny, nil
	case "none":
		return RedirectNone, nil
	}
	return 0, fmt.Errorf("%q: want same-origin, any or none", s)
}

// String returns the policy as the sources file spells it, such as "same-origin".
func (p RedirectPolicy) String() string {
	switch p {
	case RedirectSameOrigin:
		return "same-origin"
	case RedirectAny:
		return "any"
	case RedirectNone:
		return "none"
	}
	return "unknown"
}

// sensitiveHeaders are the headers that carry credentials and are removed on an origin change, besides
// the source's own headers. Authorization is where basic and bearer auth go.
var sensitiveHeaders = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Cookie2", "Www-Authenticate",
	// Referer names the previous URL, whose query may hold a token.
	"Referer",
}

// httpClient returns the client the source makes its requests with: opt's client with the source's
// redirect policy. The copy shares opt's transport (and its connection pool); if opt's client has a
// CheckRedirect of its own, it runs after the policy, on the redirects the policy allows.
func (s *Source) httpClient() *http.Client {
	c := *s.opt.HTTPClient
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := s.checkRedirect(req, via); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &c
}

// checkRedirect applies the source's redirect policy to req, the next request of a redirect chain after
// via (via[0] is the request to the source's URL). net/http has already copied via[0]'s headers into
// req; it strips Authorization and Cookie only when the host name changes, ignoring the port and the
// scheme, and never strips other headers. So the policy is applied here: a refused redirect returns a
// *RedirectError, and a followed one that leaves (or has left) the source's origin loses its
// credentials.
func (s *Source) checkRedirect(req *http.Request, via []*http.Request) error {
	first, prev := via[0].URL, via[len(via)-1].URL
	refuse := func(why string) error {
		return &RedirectError{From: redactURL(prev), To: redactURL(req.URL), Policy: s.spec.Redirects, Why: why}
	}
	switch {
	case strings.EqualFold(prev.Scheme, "https") && !strings.EqualFold(req.URL.Scheme, "https"):
		return refuse("a redirect from https to http is never followed")
	case s.spec.Redirects == RedirectNone:
		return refuse("follow-redirects is none")
	case s.spec.Redirects != RedirectAny && !sameOrigin(first, req.URL):
		return refuse("another origin than the source URL's, and follow-redirects is same-origin")
	case len(via) >= maxRedirects:
		return refuse(fmt.Sprintf("stopped after %d requests", maxRedirects))
	}
	for _, r := range append(via[1:len(via):len(via)], req) {
		if !sameOrigin(first, r.URL) {
			// An upstream that needs the credentials will now answer 401 or 403: say why they are missing.
			s.log.Info("following a redirect to another origin without the source's headers and credentials",
				"from", redactURL(prev), "to", redactURL(req.URL))
			s.stripCredentials(req.Header)
			break
		}
	}
	return nil
}

// stripCredentials removes from h what the source adds for its own origin only: the sensitive headers
// (Authorization, so basic and bearer auth too), and every header of the source's headers setting. The
// headers every request of ingest carries (Accept, Cache-Control) are set again to ingest's defaults;
// Last-Event-ID and traceparent stay, as the new origin serves the stream.
func (s *Source) stripCredentials(h http.Header) {
	for _, k := range sensitiveHeaders {
		h.Del(k)
	}
	for k := range s.spec.Header {
		h.Del(k)
	}
	if h.Get("Accept") == "" {
		h.Set("Accept", "text/event-stream")
	}
	h.Set("Cache-Control", "no-cache")
}

// sameOrigin reports whether a and b have the same origin: scheme, host and port, an absent port being
// the scheme's default.
func sameOrigin(a, b *url.URL) bool {
	return origin(a) == origin(b)
}

// origin returns u's scheme, host and port, lowercased, with the default port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// redactURL returns u without its user info and query, which may hold credentials, for errors and logs.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}
