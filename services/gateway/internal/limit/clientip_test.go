package limit

import (
	"net/netip"
	"strings"
	"testing"
)

var trusted = mustTrusted("10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.254")

func mustTrusted(ranges ...string) []netip.Prefix {
	p, err := ParseTrusted(ranges)
	if err != nil {
		panic(err)
	}
	return p
}

func TestClientIP(t *testing.T) {
	for _, tc := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"no proxy", "198.51.100.1:5000", nil, "198.51.100.1"},
		{"untrusted peer's header ignored", "198.51.100.1:5000", []string{"203.0.113.9"}, "198.51.100.1"},
		{"trusted peer without header", "10.1.2.3:80", nil, "10.1.2.3"},
		{"one proxy", "10.1.2.3:80", []string{"203.0.113.9"}, "203.0.113.9"},
		{"spoofed left part ignored", "10.1.2.3:80", []string{"1.1.1.1, 203.0.113.9"}, "203.0.113.9"},
		{"two trusted hops skipped", "10.1.2.3:80", []string{"1.1.1.1, 203.0.113.9, 10.9.9.9, 192.0.2.254"}, "203.0.113.9"},
		{"several header lines, in order", "10.1.2.3:80", []string{"1.1.1.1, 203.0.113.9", "10.9.9.9"}, "203.0.113.9"},
		{"every hop trusted: the leftmost", "10.1.2.3:80", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"garbage falls back to the peer", "10.1.2.3:80", []string{"1.1.1.1, nonsense, 10.0.0.2"}, "10.1.2.3"},
		{"empty hop falls back to the peer", "10.1.2.3:80", []string{"203.0.113.9,"}, "10.1.2.3"},
		{"empty header falls back to the peer", "10.1.2.3:80", []string{""}, "10.1.2.3"},
		{"a hop with a port", "10.1.2.3:80", []string{"203.0.113.9:4711"}, "203.0.113.9"},
		{"an IPv6 hop with a port", "10.1.2.3:80", []string{"[2001:db8::7]:4711"}, "2001:db8::7"},
		{"an IPv6 proxy", "[2001:db8:ffff::1]:443", []string{"2001:db8::7"}, "2001:db8::7"},
		{"IPv4-mapped peer", "[::ffff:10.1.2.3]:80", []string{"203.0.113.9"}, "203.0.113.9"},
		{"IPv4-mapped hop", "10.1.2.3:80", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"zone dropped", "[fe80::1%eth0]:80", nil, "fe80::1"},
		{"unparsable peer", "not-an-address", []string{"203.0.113.9"}, "invalid IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClientIP(tc.remote, tc.xff, trusted).String(); got != tc.want {
				t.Fatalf("ClientIP(%q, %q) = %s, want %s", tc.remote, tc.xff, got, tc.want)
			}
		})
	}
}

func TestParseTrusted(t *testing.T) {
	got, err := ParseTrusted([]string{"10.1.2.3/8", " 192.0.2.1 ", "::ffff:10.0.0.0/104", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.1/32", "10.0.0.0/8", "2001:db8::/32"}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("range %d = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "", "fe80::1%eth0", "::ffff:0:0/90"} {
		if _, err := ParseTrusted([]string{bad}); err == nil {
			t.Errorf("ParseTrusted(%q) took it", bad)
		}
	}
}

// clientIPReference is ClientIP written the plain way (split everything, then walk), to check the real one
// against.
func clientIPReference(remote string, xff []string, trusted []netip.Prefix) netip.Addr {
	peer := parseHop(remote)
	if !peer.IsValid() || !isTrusted(peer, trusted) {
		return peer
	}
	var hops []string
	for _, line := range xff {
		hops = append(hops, strings.Split(line, ",")...)
	}
	var last netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		a := parseHop(strings.TrimSpace(hops[i]))
		switch {
		case !a.IsValid():
			return peer
		case !isTrusted(a, trusted):
			return a
		}
		last = a
	}
	if last.IsValid() {
		return last
	}
	return peer
}

// FuzzClientIP: ClientIP agrees with the plain walk, never panics, and returns either the peer or one of
// the header's hops, normalized; from an untrusted peer, always the peer.
func FuzzClientIP(f *testing.F) {
	for _, s := range [][3]string{
		{"10.1.2.3:80", "1.1.1.1, 203.0.113.9, 10.9.9.9", ""},
		{"10.1.2.3:80", "10.0.0.1,10.0.0.2", "10.0.0.3"},
		{"[2001:db8:ffff::1]:443", "[2001:db8::7]:4711", ""},
		{"198.51.100.1:5000", "203.0.113.9", ""},
		{"10.1.2.3:80", " ,, ::ffff:1.2.3.4 ,fe80::1%lo", "x"},
		{"192.0.2.254:1", "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, remote, line1, line2 string) {
		var xff []string
		if line1 != "" || line2 != "" {
			xff = []string{line1, line2}
		}
		got := ClientIP(remote, xff, trusted)
		if want := clientIPReference(remote, xff, trusted); got != want {
			t.Fatalf("ClientIP(%q, %q) = %v, the plain walk says %v", remote, xff, got, want)
		}
		peer := parseHop(remote)
		if !peer.IsValid() {
			if got.IsValid() {
				t.Fatalf("unparsable peer %q gave %v", remote, got)
			}
			return
		}
		if got.Zone() != "" || got.Is4In6() {
			t.Fatalf("%v is not normalized", got)
		}
		if !isTrusted(peer, trusted) && got != peer {
			t.Fatalf("untrusted peer %v: got %v from its header", peer, got)
		}
		if got != peer {
			isHop := false
			for _, line := range xff {
				for hop := range strings.SplitSeq(line, ",") {
					isHop = isHop || parseHop(strings.TrimSpace(hop)) == got
				}
			}
			if !isHop {
				t.Fatalf("%v is neither the peer nor a hop of %q", got, xff)
			}
		}
	})
}
