package limit

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseTrusted parses proxy address ranges: CIDR prefixes ("10.0.0.0/8", "fd00::/8") or single addresses
// ("192.0.2.7", taken as /32 or /128).
func ParseTrusted(ranges []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ranges))
	for _, s := range ranges {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Addr().Zone() != "" {
				return nil, fmt.Errorf("limit: proxy range %q: no zone allowed", s)
			}
			if p.Addr().Is4In6() {
				if p.Bits() < 96 {
					return nil, fmt.Errorf("limit: proxy range %q: an IPv4-mapped prefix needs at least 96 bits", s)
				}
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("limit: proxy range %q: want a CIDR prefix such as 10.0.0.0/8 or an address", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// ClientIP returns the address of a request's client. remoteAddr is the peer's host:port (as
// http.Request.RemoteAddr holds it), forwardedFor the X-Forwarded-For header lines in order, trusted the
// address ranges of the proxies in front of the gateway.
//
// The header is believed only as far as it was written by trusted proxies: when the peer is one, the hops
// are walked from the right (the last hop was added by the peer), skipping trusted ones; the first untrusted
// hop is the client. When every hop is trusted, the leftmost one is. A hop that does not parse as an
// address (or address:port) ends the walk, and the peer's address is the answer: what lies left of it
// cannot be trusted. Without a header, or from a peer that is not trusted, the answer is the peer's address.
// Addresses are returned without a zone and with IPv4-mapped IPv6 addresses as IPv4. The zero Addr means the
// peer's address did not parse.
func ClientIP(remoteAddr string, forwardedFor []string, trusted []netip.Prefix) netip.Addr {
	peer := parseHop(remoteAddr)
	if !peer.IsValid() || !isTrusted(peer, trusted) {
		return peer
	}
	var leftmost netip.Addr
	for i := len(forwardedFor) - 1; i >= 0; i-- {
		rest := forwardedFor[i]
		for {
			hop := rest
			j := strings.LastIndexByte(rest, ',')
			if j >= 0 {
				hop, rest = rest[j+1:], rest[:j]
			}
			a := parseHop(strings.TrimSpace(hop))
			if !a.IsValid() {
				return peer
			}
			if !isTrusted(a, trusted) {
				return a
			}
			leftmost = a
			if j < 0 {
				break
			}
		}
	}
	if leftmost.IsValid() {
		return leftmost
	}
	return peer
}

// parseHop parses an address, or an address with a port ("192.0.2.1:80", "[2001:db8::1]:80"), and
// normalizes it. It returns the zero Addr when s is neither.
func parseHop(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone("")
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
