package sse

import (
	"strings"
	"unicode/utf8"
)

// DecodeUTF8 returns b as a client reads it from an event stream: valid UTF-8
// unchanged, each maximal subpart of an ill-formed sequence replaced by one
// U+FFFD, as the Parser and a browser decode the stream. A writer uses it to
// know the exact text a client will see of bytes it writes (an event type from
// a Kafka header, for example). It does not drop a byte order mark: only the
// one at the very start of a stream is dropped, and the Parser does that.
func DecodeUTF8(b []byte) string { return decodeUTF8(b) }

// decodeUTF8 returns b decoded the way the WHATWG Encoding standard's "UTF-8
// decode" does (without the BOM handling, which the Parser does once at the
// start of the stream): valid UTF-8 is kept, and each maximal subpart of an
// ill-formed sequence becomes one U+FFFD.
//
// Go's own decoders differ: utf8.DecodeRune and a string range replace every
// bad byte on its own, so the truncated sequence "\xe2\x82" gives two U+FFFD
// where a browser shows one, and strings.ToValidUTF8 merges a whole run of bad
// bytes into one. Both agree with WHATWG on which bytes are valid (no
// surrogates, no overlong forms, nothing above U+10FFFF), so the common case
// is one utf8.Valid check and one conversion.
//
// Decoding the stream line by line, or value by value, gives the same text as
// decoding it whole: every byte the parser splits at (CR, LF, ':' and space)
// is ASCII, which can never continue a multi-byte sequence and so always ends
// a maximal subpart.
func decodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 2*utf8.UTFMax)
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			sb.WriteByte(c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			// Valid, including an encoded U+FFFD, which has size 3.
			sb.Write(b[i : i+size])
			i += size
			continue
		}
		sb.WriteString(replacement)
		i += illFormedLen(b[i:])
	}
	return sb.String()
}

// illFormedLen returns the length of the maximal subpart at the start of b,
// which must not start with a valid UTF-8 sequence: the longest prefix that
// is the start of some valid sequence, or 1 when b[0] cannot start one.
//
// The byte ranges are those of the WHATWG UTF-8 decoder (and of Unicode table
// 3-7): after E0 the next byte is A0..BF, after ED 80..9F, after F0 90..BF,
// after F4 80..8F, and 80..BF otherwise.
func illFormedLen(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	var need int // continuation bytes the lead byte asks for
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		// 80..C1 and F5..FF never start a sequence.
		return 1
	}
	n := 1
	for n <= need && n < len(b) && b[n] >= lo && b[n] <= hi {
		lo, hi = 0x80, 0xBF
		n++
	}
	// n <= need: had all continuation bytes matched, b would have started
	// with a valid sequence.
	return n
}
