package app

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
)

// corsPolicy answers cross-origin requests (the Fetch standard's CORS protocol) from an explicit allowlist.
// It is immutable once built.
type corsPolicy struct {
	any         bool            // "*": every origin, never with credentials
	exact       map[string]bool // serialized origins, as browsers send them
	wild        []wildOrigin
	credentials bool
}

// wildOrigin is a pattern https://*.example.com[:port]: any host with at least one label before suffix.
type wildOrigin struct {
	scheme, suffix, port string // suffix starts with "."
}

// corsMaxAge is how long a browser may cache a preflight answer, in seconds.
const corsMaxAge = "600"

// corsRequestHeaders are the request headers a page may send to the gateway cross-origin (lower case):
// the token (fetch clients), the resume position, and what fetch-based SSE clients add.
var corsRequestHeaders = map[string]bool{"authorization": true, "last-event-id": true, "accept": true, "cache-control": true}

func newCORS(c CORSConfig) (*corsPolicy, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("invalid setting cors-origins (SSEGATE_CORS_ORIGINS): %s", fmt.Sprintf(format, args...))
	}
	p := &corsPolicy{exact: map[string]bool{}, credentials: c.Credentials}
	for _, o := range c.Origins {
		switch {
		case o == "*":
			if c.Credentials {
				return nil, fmt.Errorf("invalid setting cors-credentials (SSEGATE_CORS_CREDENTIALS): not with cors-origins *: " +
					"a page of any origin could then read streams with the user's cookies; list the origins instead")
			}
			p.any = true
		case strings.EqualFold(o, "null"):
			return nil, bad("null is never allowed: it is the origin of sandboxed frames and local files, which anyone can make")
		case strings.Contains(o, "*"):
			w, err := parseWildOrigin(o)
			if err != nil {
				return nil, bad("%q: %v", o, err)
			}
			p.wild = append(p.wild, w)
		default:
			s, err := serializeOrigin(o)
			if err != nil {
				return nil, bad("%q: %v", o, err)
			}
			p.exact[s] = true
		}
	}
	return p, nil
}

// serializeOrigin returns an origin as a browser serializes it (lower-case scheme and host, no default port),
// or an error when s is not a scheme://host[:port] origin of http or https.
func serializeOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("want an http or https origin")
	}
	if u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("want scheme://host[:port], without a path")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		return scheme + "://" + host + ":" + port, nil
	}
	return scheme + "://" + host, nil
}

func parseWildOrigin(s string) (wildOrigin, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !strings.HasPrefix(rest, "*.") {
		return wildOrigin{}, fmt.Errorf("a pattern has * as the first label of the host only, as in https://*.example.com")
	}
	norm, err := serializeOrigin(scheme + "://x" + rest[1:])
	if err != nil {
		return wildOrigin{}, err
	}
	u, _ := url.Parse(norm)
	suffix := strings.TrimPrefix(u.Hostname(), "x")
	if strings.Count(suffix, ".") < 2 || strings.Contains(suffix, "*") {
		return wildOrigin{}, fmt.Errorf("a pattern needs a domain of at least two labels after *. (*.example.com, not *.com)")
	}
	return wildOrigin{scheme: u.Scheme, suffix: suffix, port: u.Port()}, nil
}

// allows says whether a page of origin (an Origin header) may read the gateway.
func (p *corsPolicy) allows(origin string) bool {
	if origin == "null" {
		return false
	}
	s, err := serializeOrigin(origin)
	if err != nil || s != origin {
		return false // browsers send origins serialized; anything else is not a browser's origin
	}
	if p.any || p.exact[s] {
		return true
	}
	u, _ := url.Parse(s)
	for _, w := range p.wild {
		if u.Scheme == w.scheme && u.Port() == w.port && strings.HasSuffix(u.Hostname(), w.suffix) && len(u.Hostname()) > len(w.suffix) {
			return true
		}
	}
	return false
}

// cookiesFrom says whether a page of origin may have the user's cookie taken as its token where no CORS check
// protects it (a WebSocket: browsers send cookies with it from any page, and let any page read it): only an
// origin listed exactly, with credentials on, which is what a page needs to read an event stream with the
// cookie. Not * nor a pattern: any page of any origin, or of every host of a domain, would then act as the
// user.
func (p *corsPolicy) cookiesFrom(origin string) bool {
	s, err := serializeOrigin(origin)
	return err == nil && s == origin && p.credentials && p.exact[s]
}

// sameOrigin says whether origin names the host the request was sent to: a page of the gateway itself.
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	rh, rp, err := net.SplitHostPort(r.Host)
	if err != nil {
		rh, rp = r.Host, port // a Host without a port is on the scheme's default one
	}
	return strings.EqualFold(host, rh) && port == rp
}

// handler applies the policy to a route: it answers preflight requests (OPTIONS with
// Access-Control-Request-Method) itself, adds the CORS headers to the answers of allowed origins, and refuses
// (refuse, a 403) requests from other origins before any work is done for them. Vary: Origin is always set,
// so that a cache never serves one origin's answer to another.
func (p *corsPolicy) handler(refuse func(c *gin.Context, origin string)) gin.HandlerFunc {
	return p.handlerFor(streamCORSRoute, refuse)
}

// corsRoute is what a route lets other origins' pages do: its methods, and the request headers they may send
// (lower case).
type corsRoute struct {
	methods string
	headers map[string]bool
}

var (
	streamCORSRoute  = corsRoute{methods: "GET", headers: corsRequestHeaders}
	publishCORSRoute = corsRoute{methods: "POST", headers: map[string]bool{"authorization": true, "content-type": true, "idempotency-key": true}}
)

// handlerFor is handler for a route of its own.
func (p *corsPolicy) handlerFor(route corsRoute, refuse func(c *gin.Context, origin string)) gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h.Add("Vary", "Origin")
		origins := c.Request.Header.Values("Origin")
		if len(origins) == 0 {
			c.Next()
			return
		}
		origin := origins[0]
		allowed := len(origins) == 1 && p.allows(origin)
		if !allowed {
			if len(origins) == 1 && sameOrigin(c.Request, origin) {
				c.Next()
				return
			}
			refuse(c, origin)
			return
		}
		if p.any && !p.credentials {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		if p.credentials {
			h.Set("Access-Control-Allow-Credentials", "true")
		}
		if c.Request.Method == http.MethodOptions && c.Request.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", route.methods)
			var allow []string
			for _, name := range strings.Split(c.Request.Header.Get("Access-Control-Request-Headers"), ",") {
				if name = strings.ToLower(strings.TrimSpace(name)); route.headers[name] {
					allow = append(allow, name)
				}
			}
			if len(allow) > 0 {
				h.Set("Access-Control-Allow-Headers", strings.Join(allow, ", "))
			}
			h.Set("Access-Control-Max-Age", corsMaxAge)
			c.AbortWithStatus(http.StatusNoContent)
			return
		}
		// A page reading a refusal may want the challenge that says why.
		h.Set("Access-Control-Expose-Headers", "WWW-Authenticate, Retry-After")
		c.Next()
	}
}
