package main

import (
	"net/netip"
	"testing"
)

// TestSourceAddrSpread checks the addresses of the connections of a large run: each address holds exactly
// perSource connections (the last one the rest), every address is distinct from the others, and none is
// outside 127.0.0.0/8, in 127.0.0.0/16, or ends in 0 or 255.
func TestSourceAddrSpread(t *testing.T) {
	loop := netip.MustParsePrefix("127.0.0.0/8")
	low := netip.MustParsePrefix("127.0.0.0/16")
	tests := []struct {
		name      string
		conns     int
		perSource int
		wantAddrs int
	}{
		{"one per address, past a third-octet wrap", 100_000, 1, 100_000},
		{"a few thousand per address", 60_000, 2000, 30},
		{"uneven last address", 50_001, 2000, 26},
		{"all on one address", 10, 1000, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			count := map[netip.Addr]int{}
			var prev netip.Addr
			for i := range tc.conns {
				a := sourceAddr(i, tc.perSource)
				if !loop.Contains(a) || low.Contains(a) {
					t.Fatalf("conn %d: %v is outside 127.0.0.0/8 or inside 127.0.0.0/16", i, a)
				}
				b := a.As4()
				if b[3] == 0 || b[3] == 255 || b[1] == 255 {
					t.Fatalf("conn %d: %v is a network or broadcast-like address", i, a)
				}
				if i > 0 && a != prev && a.Less(prev) {
					t.Fatalf("conn %d: %v comes after %v: addresses must be handed out in order, once", i, a, prev)
				}
				prev = a
				count[a]++
			}
			if len(count) != tc.wantAddrs {
				t.Fatalf("%d distinct addresses, want %d", len(count), tc.wantAddrs)
			}
			for a, n := range count {
				if n > tc.perSource {
					t.Fatalf("%v holds %d connections, more than %d", a, n, tc.perSource)
				}
			}
		})
	}
}

// TestSourceAddrEdges pins the first addresses, the wraps of the last two octets, and the last address of
// the scheme, which must still be inside 127.0.0.0/8 and not 127.255.255.255.
func TestSourceAddrEdges(t *testing.T) {
	tests := []struct {
		k    int
		want string
	}{
		{0, "127.1.0.1"},
		{253, "127.1.0.254"},
		{254, "127.1.1.1"},
		{254*256 - 1, "127.1.255.254"},
		{254 * 256, "127.2.0.1"},
		{sourceAddrs - 1, "127.254.255.254"},
	}
	for _, tc := range tests {
		if got := sourceAddr(tc.k, 1); got.String() != tc.want {
			t.Errorf("sourceAddr(%d, 1) = %v, want %s", tc.k, got, tc.want)
		}
		if got := sourceAddr(tc.k*7+6, 7); got.String() != tc.want {
			t.Errorf("sourceAddr(%d, 7) = %v, want %s", tc.k*7+6, got, tc.want)
		}
	}
}

func TestBindsSource(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.3.4.5", true},
		{"localhost", true},
		{"LOCALHOST.", true},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
	}
	for _, tc := range tests {
		if got := bindsSource(tc.host); got != tc.want {
			t.Errorf("bindsSource(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestSourceSpan(t *testing.T) {
	if got := sourceSpan(50_000, 2000); got != "127.1.0.1-127.1.0.25" {
		t.Errorf("sourceSpan(50000, 2000) = %q", got)
	}
	if got := sourceSpan(50_001, 2000); got != "127.1.0.1-127.1.0.26" {
		t.Errorf("sourceSpan(50001, 2000) = %q", got)
	}
	if got := sourceSpan(100, 0); got != "kernel" {
		t.Errorf("sourceSpan(100, 0) = %q", got)
	}
}
