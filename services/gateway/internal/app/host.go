package app

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ssegate/ssegate/pkg/settings"
)

// DNS rebinding: a page of an attacker's name (evil.example) whose DNS answer is changed, after the page has
// loaded, to the address of a gateway inside a private network. The browser then sends the page's requests to
// the gateway, and lets the page read the answers: for the browser they are same-origin, so CORS does not
// apply, and the Origin the page sends is its own, the Host's. What gives the attack away is the Host header,
// which names the attacker's name and not the gateway's. The clients' port therefore answers only the Host
// headers that allowed-hosts lists, when it lists any.
//
// An IP literal in the Host header cannot be rebound (the browser connects to that address, whatever DNS
// says), so a page can only send one that already reaches the gateway: listing the address ranges that clients
// use (pod and cluster addresses, 0.0.0.0/0) costs no protection. Without any entry every Host is answered, as
// before the setting existed.
//
// The admin port is not checked: its callers (the kubelet's probes, Prometheus) address pods by IP and by names
// the setting would have to list, and it is for them alone (docs/security.md, Ports).

// hostPolicy is which Host headers the clients' port answers. It is immutable once built, and safe for
// concurrent use.
type hostPolicy struct {
	names map[string][]string // exact names (lower case, no trailing dot) -> their ports; "" for any
	wild  []hostPattern       // *.example.com[:port]
	ips   []hostPattern       // addresses and ranges
}

// hostPattern is one wildcard or address entry: a name suffix (".example.com") or an address range, and a
// port ("" for any).
type hostPattern struct {
	suffix string
	ips    netip.Prefix
	port   string
}

// reasonHost is the reason of a request refused for its Host header, in the JSON body and the refusal metric.
const reasonHost = "host"

// hostSetting is the allowed-hosts setting.
func hostSetting(p *[]string) settings.Setting {
	return setting("allowed-hosts", "Host headers the clients' port answers (others get 421), comma-separated: names, *.example.com patterns, "+
		"addresses, each with an optional :port, and address ranges (10.0.0.0/8, 0.0.0.0/0: IP literals cannot be rebound); none answers any host", settings.List(p))
}

// newHostPolicy parses the allowed-hosts entries; nil entries make a nil policy, which answers any host.
func newHostPolicy(entries []string) (*hostPolicy, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	p := &hostPolicy{names: map[string][]string{}}
	for _, e := range entries {
		if err := p.add(strings.ToLower(strings.TrimSpace(e))); err != nil {
			return nil, fmt.Errorf("invalid setting allowed-hosts (SSEGATE_ALLOWED_HOSTS): %q: %w", e, err)
		}
	}
	return p, nil
}

func (p *hostPolicy) add(e string) error {
	switch {
	case e == "":
		return fmt.Errorf("empty entry")
	case e == "*":
		return fmt.Errorf("* is not an entry: leave allowed-hosts empty to answer any host")
	case strings.Contains(e, "/"):
		pfx, err := netip.ParsePrefix(e)
		if err != nil || pfx.Addr().Zone() != "" {
			return fmt.Errorf("want an address range such as 10.0.0.0/8 or fd00::/8")
		}
		p.ips = append(p.ips, hostPattern{ips: pfx.Masked()})
		return nil
	}
	host, port, ok := splitHost(e)
	if !ok {
		return fmt.Errorf("want a name, *.name or an address, with an optional :port")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return fmt.Errorf("an address with a zone is never a Host")
		}
		ip = ip.Unmap()
		p.ips = append(p.ips, hostPattern{ips: netip.PrefixFrom(ip, ip.BitLen()), port: port})
		return nil
	}
	if rest, wild := strings.CutPrefix(host, "*."); wild {
		if !validName(rest) || strings.Count(rest, ".") < 1 {
			return fmt.Errorf("a pattern has * as the first label only, and at least two labels after it (*.example.com, not *.com)")
		}
		p.wild = append(p.wild, hostPattern{suffix: "." + rest, port: port})
		return nil
	}
	if !validName(host) {
		return fmt.Errorf("not a host name")
	}
	p.names[host] = append(p.names[host], port)
	return nil
}

// splitHost splits a Host header (or an entry of allowed-hosts) into its host, lower case and without a
// trailing dot (the same name in DNS), and its port, "" when it has none. An IPv6 address has brackets when it
// has a port; an entry may also be a bare IPv6 address. ok is false for anything else.
func splitHost(s string) (host, port string, ok bool) {
	switch {
	case strings.HasPrefix(s, "["):
		if strings.HasSuffix(s, "]") {
			host = s[1 : len(s)-1]
		} else if h, pt, err := net.SplitHostPort(s); err == nil {
			host, port = h, pt
		} else {
			return "", "", false
		}
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return "", "", false
		}
	case strings.Count(s, ":") > 1:
		host = s // a bare IPv6 address
		if _, err := netip.ParseAddr(host); err != nil {
			return "", "", false
		}
	case strings.Contains(s, ":"):
		host, port, _ = strings.Cut(s, ":")
		if port == "" {
			return "", "", false
		}
	default:
		host = s
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", "", false
		}
		port = strconv.Itoa(n)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host, port, host != ""
}

// validName says whether s is a host name: dot-separated labels of letters, digits, hyphens and underscores.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return true
}

// allows says whether the clients' port answers a request with this Host header. A nil policy allows any.
func (p *hostPolicy) allows(hostHeader string) bool {
	if p == nil {
		return true
	}
	host, port, ok := splitHost(hostHeader)
	if !ok {
		return false
	}
	portOK := func(want string) bool { return want == "" || want == port }
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return false
		}
		ip = ip.Unmap()
		for _, e := range p.ips {
			if e.ips.Contains(ip) && portOK(e.port) {
				return true
			}
		}
		return false
	}
	for _, want := range p.names[host] {
		if portOK(want) {
			return true
		}
	}
	for _, w := range p.wild {
		if strings.HasSuffix(host, w.suffix) && len(host) > len(w.suffix) && portOK(w.port) {
			return true
		}
	}
	return false
}

// checkHost refuses, before anything else, a request to the clients' port whose Host header allowed-hosts
// does not list: 421 Misdirected Request, the status for a request sent to a server that does not answer for
// its host (RFC 9110, 15.5.20). Unlike a 403, it tells a browser that reuses one connection for several of
// its hosts (HTTP/2 connection coalescing) to send the request again on a connection of its own.
func (a *App) checkHost(c *gin.Context) {
	r := c.Request
	if a.hosts.allows(r.Host) {
		c.Next()
		return
	}
	if topic := c.Param("topic"); topic != "" {
		a.refused.add(topic, reasonHost)
	}
	if a.log.Enabled(r.Context(), slog.LevelDebug) {
		a.log.Debug("request refused", "reason", reasonHost, "host", r.Host, "remote", r.RemoteAddr, "path", r.URL.Path)
	}
	abort(c, &httpError{
		status: http.StatusMisdirectedRequest, reason: reasonHost,
		msg: "host " + strconv.Quote(r.Host) + " is not one this gateway answers for (allowed-hosts)",
	})
}
