package sse

import (
	"testing"
	"unicode/utf8"
)

// refDecode is the WHATWG Encoding standard's UTF-8 decoder written out step
// by step as the standard words it (bytes needed, bytes seen, lower and upper
// boundary, and the byte that is "restored" to the stream after an error). It
// is slow and obviously right, and checks decodeUTF8.
func refDecode(b []byte) string {
	var out []rune
	var cp rune
	needed, seen := 0, 0
	lower, upper := byte(0x80), byte(0xBF)
	for i := 0; ; {
		if i == len(b) {
			if needed != 0 {
				out = append(out, utf8.RuneError)
			}
			return string(out)
		}
		c := b[i]
		if needed == 0 {
			i++
			switch {
			case c <= 0x7F:
				out = append(out, rune(c))
			case c >= 0xC2 && c <= 0xDF:
				needed, cp = 1, rune(c&0x1F)
			case c >= 0xE0 && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				}
				if c == 0xED {
					upper = 0x9F
				}
				needed, cp = 2, rune(c&0xF)
			case c >= 0xF0 && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				}
				if c == 0xF4 {
					upper = 0x8F
				}
				needed, cp = 3, rune(c&0x7)
			default:
				out = append(out, utf8.RuneError)
			}
			continue
		}
		if c < lower || c > upper {
			// Reset, emit an error and process c again (i is not advanced).
			cp, needed, seen = 0, 0, 0
			lower, upper = 0x80, 0xBF
			out = append(out, utf8.RuneError)
			continue
		}
		i++
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | rune(c&0x3F)
		seen++
		if seen == needed {
			out = append(out, cp)
			cp, needed, seen = 0, 0, 0
		}
	}
}

func TestDecodeUTF8(t *testing.T) {
	const fffd = "\uFFFD"
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"ascii", "abc", "abc"},
		{"valid multi-byte", "\u00e9\u65e5\U0001F600", "\u00e9\u65e5\U0001F600"},
		{"lone continuation", "\x80", fffd},
		{"two continuations", "\x80\xbf", fffd + fffd},
		{"c0 and c1 never start a sequence", "\xc0\x80\xc1\xbf", fffd + fffd + fffd + fffd},
		{"f5 and above never start a sequence", "\xf5\x80\xff", fffd + fffd + fffd},
		{"truncated 2-byte at end", "\xc3", fffd},
		{"truncated 3-byte at end", "\xe2\x82", fffd},
		{"truncated 4-byte at end", "\xf0\x9f\x98", fffd},
		{"truncated 3-byte before ascii", "\xe2\x82a", fffd + "a"},
		{"truncated 4-byte before lead", "\xf0\x9f\xe2\x82\xac", fffd + "\u20ac"},
		{"e0 overlong", "\xe0\x80\x80", fffd + fffd + fffd},
		{"e0 lowest valid", "\xe0\xa0\x80", "\u0800"},
		{"ed surrogate", "\xed\xa0\x80", fffd + fffd + fffd},
		{"ed highest valid", "\xed\x9f\xbf", "\ud7ff"},
		{"f0 overlong", "\xf0\x80\x80\x80", fffd + fffd + fffd + fffd},
		{"f4 above max", "\xf4\x90\x80\x80", fffd + fffd + fffd + fffd},
		{"f4 max", "\xf4\x8f\xbf\xbf", "\U0010FFFF"},
		{"table 3-8", "a\xf1\x80\x80\xe1\x80\xc2b\x80c\x80\xbfd", "a" + fffd + fffd + fffd + "b" + fffd + "c" + fffd + fffd + "d"},
		{"replacement character itself", fffd, fffd},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeUTF8([]byte(tc.in)); got != tc.want {
				t.Errorf("decodeUTF8(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if got := DecodeUTF8([]byte(tc.in)); got != tc.want {
				t.Errorf("DecodeUTF8(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if got := refDecode([]byte(tc.in)); got != tc.want {
				t.Errorf("refDecode(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzDecodeUTF8(f *testing.F) {
	for _, s := range []string{"", "a", "\xe2\x82", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "a\xf1\x80\x80\xe1\x80\xc2b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := decodeUTF8(b), refDecode(b); got != want {
			t.Fatalf("decodeUTF8(%q) = %q, reference %q", b, got, want)
		}
	})
}
