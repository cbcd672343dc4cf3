package position

import (
	"math"
	"strconv"
	"strings"
)

// Prefix is the version prefix every id starts with.
const Prefix = "v1:"

// MaxLen is the longest id Parse accepts, in bytes. It bounds the work and
// memory a hostile Last-Event-ID header can cause. Any vector of up to 1056
// partitions fits (an entry is at most 31 bytes with its "."), and about 2000
// with 10-digit offsets. A Vector may hold more, and String encodes it, but
// Parse rejects such an id with ErrTooLong.
const MaxLen = 32 << 10

// Parse decodes an id in the canonical form Vector.String produces. Any other
// spelling is rejected with a *SyntaxError wrapping ErrEmpty, ErrTooLong,
// ErrVersion, ErrSyntax, ErrNegative, ErrRange, ErrDuplicate or ErrOrder.
// Parse never panics; it runs in time linear in len(id) and allocates only
// the entries slice on success.
func Parse(id string) (Vector, error) {
	return parse(id)
}

// MustParse is like Parse but panics if id is invalid. It is meant for tests,
// examples and package-level variables.
func MustParse(id string) Vector {
	v, err := Parse(id)
	if err != nil {
		panic(err)
	}
	return v
}

// UnmarshalText implements encoding.TextUnmarshaler with the rules of Parse.
// On error v is left unchanged.
func (v *Vector) UnmarshalText(b []byte) error {
	w, err := parse(b)
	if err != nil {
		return err
	}
	*v = w
	return nil
}

// parse is Parse for both string and []byte, so UnmarshalText need not copy
// its input.
//
// The grammar, checked in one left-to-right pass, reporting the first
// problem in byte order:
//
//	id     = "v1:" [ entry *( "." entry ) ]
//	entry  = number "-" number
//	number = "0" | %x31-39 *DIGIT
//
// A partition lower than its predecessor is ErrOrder and an equal one is
// ErrDuplicate. Only the predecessor is compared, so "v1:1-0.2-0.1-0", where
// the last 1 both repeats and goes down, reports ErrOrder.
func parse[S ~string | ~[]byte](id S) (Vector, error) {
	n := len(id)
	switch {
	case n > MaxLen:
		return Vector{}, syntaxError(id, MaxLen, ErrTooLong)
	case n == 0:
		return Vector{}, syntaxError(id, 0, ErrEmpty)
	case n < len(Prefix) || string(id[:len(Prefix)]) != Prefix:
		// The string() conversion in a comparison does not allocate.
		return Vector{}, syntaxError(id, 0, ErrVersion)
	case n == len(Prefix):
		return Vector{}, nil
	}

	// Pre-size the entries: one more than the separators, but no more than
	// the shortest possible entries ("0-0" plus ".") could fill, so a run of
	// dots cannot make us allocate more than a valid id would.
	dots := 0
	for i := len(Prefix); i < n; i++ {
		if id[i] == '.' {
			dots++
		}
	}
	es := make([]Entry, 0, min(dots+1, (n-len(Prefix)+1)/4))

	i := len(Prefix)
	for {
		start := i
		p, j, err := parseNumber(id, i, math.MaxInt32)
		if err != nil {
			return Vector{}, syntaxError(id, j, err)
		}
		if k := len(es); k > 0 {
			switch prev := es[k-1].Partition; {
			case int32(p) == prev:
				return Vector{}, syntaxError(id, start, ErrDuplicate)
			case int32(p) < prev:
				return Vector{}, syntaxError(id, start, ErrOrder)
			}
		}
		i = j
		if i == n || id[i] != '-' {
			return Vector{}, syntaxError(id, i, ErrSyntax)
		}
		i++
		off, j, err := parseNumber(id, i, math.MaxInt64)
		if err != nil {
			return Vector{}, syntaxError(id, j, err)
		}
		i = j
		es = append(es, Entry{Partition: int32(p), Offset: int64(off)})
		if i == n {
			return Vector{e: es}, nil
		}
		if id[i] != '.' {
			return Vector{}, syntaxError(id, i, ErrSyntax)
		}
		i++
	}
}

// parseNumber reads the decimal number that starts at s[i] and must not
// exceed limit. It returns the value and the index just past it, or an error
// sentinel and the index to report it at.
func parseNumber[S ~string | ~[]byte](s S, i int, limit uint64) (uint64, int, error) {
	if i == len(s) {
		return 0, i, ErrSyntax
	}
	switch c := s[i]; {
	case c == '-':
		return 0, i, ErrNegative
	case c == '0':
		if i+1 < len(s) && isDigit(s[i+1]) {
			return 0, i, ErrSyntax // leading zero
		}
		return 0, i + 1, nil
	case !isDigit(c):
		return 0, i, ErrSyntax
	}
	start := i
	var v uint64
	for ; i < len(s) && isDigit(s[i]); i++ {
		d := uint64(s[i] - '0')
		if v > (limit-d)/10 {
			return 0, start, ErrRange
		}
		v = v*10 + d
	}
	return v, i, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// String returns the canonical id of v, such as "v1:0-5812.1-5790", or
// "v1:" for the empty vector. Parse accepts it and no other spelling.
func (v Vector) String() string {
	var b strings.Builder
	b.Grow(v.textLen())
	var scratch [20]byte // fits math.MaxInt64
	b.WriteString(Prefix)
	for i, x := range v.e {
		if i > 0 {
			b.WriteByte('.')
		}
		b.Write(strconv.AppendInt(scratch[:0], int64(x.Partition), 10))
		b.WriteByte('-')
		b.Write(strconv.AppendInt(scratch[:0], x.Offset, 10))
	}
	return b.String()
}

// AppendText implements encoding.TextAppender: it appends the canonical id of
// v to b. It never fails for a Vector built by this package, and it does not
// allocate when b has room for the id.
func (v Vector) AppendText(b []byte) ([]byte, error) {
	b = append(b, Prefix...)
	for i, x := range v.e {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendInt(b, int64(x.Partition), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, x.Offset, 10)
	}
	return b, nil
}

// MarshalText implements encoding.TextMarshaler; it returns the canonical id.
func (v Vector) MarshalText() ([]byte, error) {
	return v.AppendText(make([]byte, 0, v.textLen()))
}

// textLen returns the exact length of the canonical id of v.
func (v Vector) textLen() int {
	n := len(Prefix)
	for _, x := range v.e {
		n += decLen(uint64(x.Partition)) + 1 + decLen(uint64(x.Offset)) + 1
	}
	if len(v.e) > 0 {
		n-- // no "." after the last entry
	}
	return n
}

// decLen returns the number of decimal digits of x.
func decLen(x uint64) int {
	n := 1
	for x >= 10 {
		x /= 10
		n++
	}
	return n
}
