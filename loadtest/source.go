package main

import (
	"net"
	"net/netip"
	"strings"
)

// A client connection is one (source address, source port) pair towards the gateway's single listening
// address, and the kernel's ephemeral ports (net.ipv4.ip_local_port_range, 28,232 by default) run out long
// before 50,000 connections from one source address. The whole of 127.0.0.0/8 is local on Linux, so the
// tool binds each connection to one of many loopback source addresses instead, perSource connections each.
//
// Source addresses are 127.X.Y.Z with X from 1 to 254, Y from 0 to 255 and Z from 1 to 254, in that order
// from 127.1.0.1: never in 127.0.0.0/16 (127.0.0.1 is what the gateway, Kafka and everything else on the
// machine use, and 127.0.1.1 is often the host's own name), never the network address 127.0.0.0, never
// 127.255.255.255 (the loopback broadcast route) and never a last octet of 0 or 255, which some tools read
// as network or broadcast addresses.

// sourceAddrs is how many distinct source addresses the scheme has: 254 * 256 * 254.
const sourceAddrs = 254 * 256 * 254

// sourceAddr returns the loopback source address of connection i when perSource connections share one
// address. perSource must be at least 1 and i/perSource less than sourceAddrs.
func sourceAddr(i, perSource int) netip.Addr {
	k := i / perSource
	z := 1 + k%254
	y := (k / 254) % 256
	x := 1 + k/(254*256)
	return netip.AddrFrom4([4]byte{127, byte(x), byte(y), byte(z)})
}

// bindsSource reports whether a stream to host (a URL's host, without port) is dialed from a spread source
// address: only IPv4 targets can be, that is an IPv4 literal or "localhost" dialed over IPv4.
func bindsSource(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Is4()
}

// localTCPAddr is the net.Dialer.LocalAddr of a source address (port 0: the kernel picks one).
func localTCPAddr(a netip.Addr) *net.TCPAddr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0))
}

// sourceSpan names the source addresses a run of conns connections uses, for the summary:
// "127.1.0.1-127.1.0.25", or "kernel" when they are not spread.
func sourceSpan(conns, perSource int) string {
	if perSource <= 0 || conns <= 0 {
		return "kernel"
	}
	return sourceAddr(0, perSource).String() + "-" + sourceAddr(conns-1, perSource).String()
}
