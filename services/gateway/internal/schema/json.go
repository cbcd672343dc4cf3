package schema

import (
	"encoding/base64"
	"math"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"
)

// JSON writing for the Avro renderer, as docs/gateway.md ("Schema formats") maps Avro to JSON. Strings are
// escaped as encoding/json escapes them without its HTML escaping: ill-formed UTF-8 becomes U+FFFD.

const hex = "0123456789abcdef"

func appendString(dst []byte, s string) []byte { return appendStringBytes(dst, []byte(s)) }

func appendStringBytes(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(dst, s[start:]...), '"')
}

func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendFloat writes a float as encoding/json does (the shortest text that reads back to the same value, in
// exponent form below 1e-6 and from 1e21 on); NaN and the infinities, which JSON has no number for, as the
// strings "NaN", "Infinity" and "-Infinity".
func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// 1e-07 to 1e-7, as JavaScript writes it.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendDecimal writes the decimal whose unscaled value is the two's-complement big-endian b, with scale
// digits after the point, as a JSON string: exact, whatever its precision. A value of more digits than the
// schema's precision is not a datum of it (the specification: "invalid"), and is refused before any work
// that grows with its length. Up to 8 bytes it does not allocate.
func appendDecimal(dst, b []byte, scale, precision int) ([]byte, error) {
	neg := len(b) > 0 && b[0]&0x80 != 0
	// Sign-extension bytes carry no digit (a fixed is often wider than its value).
	for len(b) > 1 && (b[0] == 0 && b[1]&0x80 == 0 || b[0] == 0xff && b[1]&0x80 != 0) {
		b = b[1:]
	}
	if precision <= 0 || precision > maxDecimalPrecision {
		precision = maxDecimalPrecision
	}
	if len(b) > int(math.Ceil((float64(precision)*math.Log2(10)+1)/8)) {
		return dst, errDecimalPrecision
	}
	var tmp [24]byte
	var digits []byte
	if len(b) <= 8 {
		var v int64
		if neg {
			v = -1
		}
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		if neg {
			digits = strconv.AppendUint(tmp[:0], uint64(-v), 10) // -MinInt64 as uint64 is right
		} else {
			digits = strconv.AppendInt(tmp[:0], v, 10)
		}
	} else {
		u := new(big.Int).SetBytes(b)
		if neg {
			u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
			u.Neg(u)
		}
		digits = u.Append(nil, 10)
	}
	if len(digits) > precision {
		return dst, errDecimalPrecision
	}
	dst = append(dst, '"')
	if neg {
		dst = append(dst, '-')
	}
	if scale <= 0 {
		return append(append(dst, digits...), '"'), nil
	}
	if len(digits) <= scale { // 0.05: zeros before the digits, one of them before the point
		dst = append(dst, '0', '.')
		for range scale - len(digits) {
			dst = append(dst, '0')
		}
		return append(append(dst, digits...), '"'), nil
	}
	dst = append(dst, digits[:len(digits)-scale]...)
	dst = append(dst, '.')
	dst = append(dst, digits[len(digits)-scale:]...)
	return append(dst, '"'), nil
}

var errDecimalPrecision = errorString("a decimal of more digits than its precision")

// timeUnit is the unit of a time or timestamp logical type.
type timeUnit uint8

const (
	millis timeUnit = iota
	micros
	nanos
)

func (u timeUnit) time(v int64) time.Time {
	switch u {
	case millis:
		return time.UnixMilli(v)
	case micros:
		return time.UnixMicro(v)
	}
	return time.Unix(0, v)
}

var timestampLayouts = [...]string{millis: "2006-01-02T15:04:05.000", micros: "2006-01-02T15:04:05.000000", nanos: "2006-01-02T15:04:05.000000000"}

// appendTimestamp writes an instant as an RFC 3339 string in UTC with the unit's digits ("Z" unless local).
// RFC 3339 has four-digit years: an instant outside the years 0000 to 9999 has no such string, and is refused.
func appendTimestamp(dst []byte, v int64, u timeUnit, utc bool) ([]byte, error) {
	t := u.time(v).UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return dst, errYear
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, timestampLayouts[u])
	if utc {
		dst = append(dst, 'Z')
	}
	return append(dst, '"'), nil
}

// appendDate writes days since 1970-01-01 as "YYYY-MM-DD"; a day outside the years 0000 to 9999 is refused.
func appendDate(dst []byte, days int64) ([]byte, error) {
	t := time.Unix(days*86400, 0).UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return dst, errYear
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, "2006-01-02")
	return append(dst, '"'), nil
}

var errYear = errorString("a date outside the years 0000 to 9999, which RFC 3339 cannot write")

// appendTimeOfDay writes a time of day (milliseconds or microseconds after midnight) as "HH:MM:SS.fff" with
// the unit's digits; a value outside the day does not match its schema.
func appendTimeOfDay(dst []byte, v int64, u timeUnit) ([]byte, error) {
	perSecond, digits := int64(1000), 3
	if u == micros {
		perSecond, digits = 1_000_000, 6
	}
	if v < 0 || v >= 86400*perSecond {
		return dst, errTimeOfDay
	}
	s, frac := v/perSecond, v%perSecond
	dst = append(dst, '"')
	dst = append2(dst, s/3600)
	dst = append(dst, ':')
	dst = append2(dst, s/60%60)
	dst = append(dst, ':')
	dst = append2(dst, s%60)
	dst = append(dst, '.')
	f := strconv.AppendInt(nil, frac, 10)
	for range digits - len(f) {
		dst = append(dst, '0')
	}
	dst = append(dst, f...)
	return append(dst, '"'), nil
}

var errTimeOfDay = errorString("a time of day outside the day")

type errorString string

func (e errorString) Error() string { return string(e) }

func append2(dst []byte, v int64) []byte {
	return append(dst, byte('0'+v/10), byte('0'+v%10))
}
