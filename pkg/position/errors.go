package position

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Parse wraps exactly one of them in a *SyntaxError; test with
// errors.Is.
var (
	// ErrEmpty reports an empty id string.
	ErrEmpty = errors.New("position: empty id")
	// ErrVersion reports an id that does not start with Prefix: an unknown
	// version such as "v2:", or no version at all.
	ErrVersion = errors.New("position: unknown version prefix")
	// ErrSyntax reports any other malformed id: a stray or non-ASCII
	// character, whitespace, an empty entry, a trailing ".", a missing "-",
	// a "+" sign or a leading zero.
	ErrSyntax = errors.New("position: invalid syntax")
	// ErrNegative reports a negative number: a "-" sign where a digit was
	// expected, or a negative partition or offset given to FromEntries.
	ErrNegative = errors.New("position: negative number")
	// ErrRange reports a partition above math.MaxInt32 or an offset above
	// math.MaxInt64.
	ErrRange = errors.New("position: number out of range")
	// ErrDuplicate reports a partition that appears twice in a row in an id,
	// or twice anywhere in the entries given to FromEntries.
	ErrDuplicate = errors.New("position: duplicate partition")
	// ErrOrder reports a partition lower than the one before it. Parse
	// compares each partition only with its predecessor, so one that goes
	// down and also repeats an earlier partition ("v1:1-0.2-0.1-0") is
	// ErrOrder, not ErrDuplicate.
	ErrOrder = errors.New("position: partitions not ascending")
	// ErrTooLong reports an id longer than MaxLen bytes.
	ErrTooLong = errors.New("position: id too long")
)

// maxExcerpt is the most bytes of a hostile id that an error message repeats.
const maxExcerpt = 32

// SyntaxError is the error Parse returns for an id it rejects. It says where
// the problem is and wraps one of the sentinels, so errors.Is(err, ErrRange)
// works through it.
type SyntaxError struct {
	// Offset is the byte index in the id where the problem starts: the first
	// byte of the offending number or character, len(id) when the id ended
	// too early, and MaxLen for ErrTooLong.
	Offset int
	// Err is the sentinel that says what is wrong, such as ErrSyntax.
	Err error

	// excerpt is a copy of at most maxExcerpt bytes of the id from Offset,
	// kept so the message can show context without holding on to the whole
	// (possibly 32 KiB) header value.
	excerpt string
	// cut reports that the id went on after excerpt.
	cut bool
	// atEnd reports that Offset is the end of the id: more was expected.
	atEnd bool
}

// Error returns a message such as
// `position: malformed id at byte 3 near "4294967296-1": number out of range`.
// It quotes at most 32 bytes of the id, escaped, never the whole id.
func (e *SyntaxError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "position: malformed id at byte %d", e.Offset)
	switch {
	case e.excerpt != "":
		fmt.Fprintf(&b, " near %q", e.excerpt)
		if e.cut {
			b.WriteString("...")
		}
	case e.atEnd:
		b.WriteString(" (unexpected end)")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "position: "))
	}
	return b.String()
}

// Unwrap returns Err, the sentinel that describes the problem.
func (e *SyntaxError) Unwrap() error { return e.Err }

// syntaxError builds a *SyntaxError at byte off of id, copying a short excerpt.
func syntaxError[S ~string | ~[]byte](id S, off int, err error) *SyntaxError {
	e := &SyntaxError{Offset: off, Err: err}
	switch {
	case errors.Is(err, ErrTooLong), errors.Is(err, ErrEmpty), off < 0:
		return e
	case off >= len(id):
		e.atEnd = true
		return e
	}
	end := min(off+maxExcerpt, len(id))
	// Clone so that the error does not pin a 32 KiB header in memory when S
	// is a string type (for []byte, string() has copied already).
	e.excerpt = strings.Clone(string(id[off:end]))
	e.cut = end < len(id)
	return e
}
