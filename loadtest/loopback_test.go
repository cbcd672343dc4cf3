package main

import (
	"errors"
	"testing"
)

func TestCheckGatewayURL(t *testing.T) {
	tests := []struct {
		name     string
		url      string
		tls      bool // --proto=h2
		ok       bool
		loopback bool // a refusal because of the host, not the syntax
	}{
		{"ipv4 loopback", "http://127.0.0.1:8080", false, true, false},
		{"ipv4 loopback range", "http://127.1.2.3:8080", false, true, false},
		{"localhost", "http://localhost:8080", false, true, false},
		{"localhost upper case and dot", "http://LOCALHOST.:8080", false, true, false},
		{"ipv6 loopback", "http://[::1]:8080", false, true, false},
		{"ipv4-mapped loopback", "http://[::ffff:127.0.0.1]:8080", false, true, false},
		{"private address", "http://10.0.0.5:8080", false, false, true},
		{"public address", "http://93.184.216.34:80", false, false, true},
		{"unspecified", "http://0.0.0.0:8080", false, false, true},
		{"ipv6 unspecified", "http://[::]:8080", false, false, true},
		{"a name", "http://gateway.example.com:8080", false, false, true},
		{"localhost lookalike", "http://localhost.example.com:8080", false, false, true},
		{"loopback as a subdomain label", "http://127.0.0.1.nip.io:8080", false, false, true},
		{"userinfo trick", "http://127.0.0.1@evil.example:8080", false, false, true},
		{"https without tls", "https://127.0.0.1:8443", false, false, false},
		{"https with tls", "https://127.0.0.1:8443", true, true, false},
		{"https localhost with tls", "https://localhost:8443", true, true, false},
		{"http with tls", "http://127.0.0.1:8080", true, false, false},
		{"https remote with tls", "https://10.0.0.5:8443", true, false, true},
		{"https name with tls", "https://gateway.example.com:443", true, false, true},
		{"other scheme", "ws://127.0.0.1:8080", false, false, false},
		{"no port", "http://127.0.0.1", false, false, false},
		{"not a url", "::nope", false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkGatewayURL(tc.url, tc.tls)
			if tc.ok != (err == nil) {
				t.Fatalf("checkGatewayURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
			}
			if got := errors.Is(err, errNotLoopback); got != tc.loopback {
				t.Fatalf("checkGatewayURL(%q) = %v; errors.Is(errNotLoopback) = %v, want %v", tc.url, err, got, tc.loopback)
			}
		})
	}
}

func TestCheckBroker(t *testing.T) {
	tests := []struct {
		addr     string
		ok       bool
		loopback bool
	}{
		{"127.0.0.1:9092", true, false},
		{"localhost:9092", true, false},
		{"[::1]:9092", true, false},
		{"127.255.255.254:1", true, false},
		{"128.0.0.1:9092", false, true},
		{"kafka:9092", false, true},
		{"broker-1.example.com:9093", false, true},
		{"[fe80::1%lo]:9092", false, true},
		{"127.0.0.1", false, false},
		{"", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			err := checkBroker(tc.addr)
			if tc.ok != (err == nil) {
				t.Fatalf("checkBroker(%q) = %v, want ok=%v", tc.addr, err, tc.ok)
			}
			if got := errors.Is(err, errNotLoopback); got != tc.loopback {
				t.Fatalf("checkBroker(%q) = %v; errors.Is(errNotLoopback) = %v, want %v", tc.addr, err, got, tc.loopback)
			}
		})
	}
}
