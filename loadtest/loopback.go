package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// errNotLoopback is wrapped by every refusal of a non-loopback target.
var errNotLoopback = errors.New("refusing a target that is not on loopback")

// isLoopbackHost reports whether host is "localhost" or a literal loopback address (127.0.0.0/8, ::1). Other
// names are refused without a DNS lookup: a name that resolves to loopback today may not tomorrow.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // a zone (fe80::1%lo) never makes an address loopback
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkGatewayURL parses a gateway base URL (http://127.0.0.1:8080, or with tls https://127.0.0.1:8443) and
// refuses any other scheme or a host that is not loopback.
func checkGatewayURL(raw string, tls bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("gateway url %q: %w", raw, err)
	}
	switch {
	case tls && u.Scheme != "https":
		return nil, fmt.Errorf("gateway url %q: want https://host:port (--proto=h2 is HTTP/2 over TLS)", raw)
	case !tls && u.Scheme == "https":
		return nil, fmt.Errorf("gateway url %q: want http://host:port (TLS needs --proto=h2)", raw)
	case !tls && u.Scheme != "http":
		return nil, fmt.Errorf("gateway url %q: want http://host:port", raw)
	}
	if !isLoopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("%w: gateway url %q (host %q); only localhost, 127.0.0.0/8 and ::1 are allowed",
			errNotLoopback, raw, u.Hostname())
	}
	if u.Port() == "" {
		return nil, fmt.Errorf("gateway url %q: a port is required", raw)
	}
	return u, nil
}

// checkBroker refuses a Kafka seed broker (host:port) whose host is not loopback.
func checkBroker(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("kafka broker %q: want host:port", addr)
	}
	if !isLoopbackHost(host) {
		return fmt.Errorf("%w: kafka broker %q; only localhost, 127.0.0.0/8 and ::1 are allowed", errNotLoopback, addr)
	}
	return nil
}
