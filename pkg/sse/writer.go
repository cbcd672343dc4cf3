package sse

import (
	"bytes"
	"strconv"
)

// replacement is U+FFFD REPLACEMENT CHARACTER in UTF-8. It stands in for the
// bytes that would break framing in an id, an event type or a comment.
const replacement = "\uFFFD"

// AppendEvent appends one complete event to dst and returns the extended
// slice: "id: <id>\n" if id is not empty, "event: <typ>\n" if typ is not
// empty, one "data: <line>\n" per line of data, then the blank line that makes
// a client dispatch the event.
//
// data is split on CR LF, lone CR and lone LF (a CR LF is one line end). An
// empty data gives a single "data:\n" line, so the client still dispatches an
// event with empty data. A trailing line end in data produces a final empty
// data line, so the client gets the value back exactly ("a\n" is written as
// "data: a\ndata:\n"). Empty lines are written "data:\n", without a trailing
// space. The client sees every line end of data as LF.
//
// id and typ can never break framing: CR and LF in them (and NUL in id, which
// would make a client ignore the id) are each replaced by U+FFFD. Data bytes
// other than line ends are passed through unchanged, including invalid UTF-8,
// which a client's UTF-8 decoder turns into U+FFFD just as it would anyway.
//
// AppendEvent does not allocate when dst has enough capacity.
func AppendEvent(dst []byte, id, typ string, data []byte) []byte {
	return appendEvent(dst, id, typ, data)
}

// AppendEventBytes is AppendEvent for callers that hold the id and event type
// as byte slices (Kafka header values, for example), so they need no string
// conversion. It writes exactly what AppendEvent writes for the same bytes.
func AppendEventBytes(dst []byte, id, typ, data []byte) []byte {
	return appendEvent(dst, id, typ, data)
}

// AppendID appends an id-only block, "id: <id>\n\n", and returns the extended
// slice. It moves a client's last event id without firing an event. An empty
// id is written "id:\n\n" and resets the client's last event id to empty. id
// is sanitized as in AppendEvent.
func AppendID(dst []byte, id string) []byte {
	if id == "" {
		return append(dst, "id:\n\n"...)
	}
	dst = append(dst, "id: "...)
	dst = appendSanitized(dst, id, true)
	return append(dst, "\n\n"...)
}

// AppendRetry appends "retry: <ms>\n" and returns the extended slice. It
// writes no blank line: callers combine it with the next block, which a
// client reads as part of that block. A negative ms is written as 0, because a
// client ignores a retry value that is not all digits.
func AppendRetry(dst []byte, ms int64) []byte {
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, max(ms, 0), 10)
	return append(dst, '\n')
}

// AppendComment appends the comment block ": <text>\n\n" and returns the
// extended slice. CR and LF inside text are replaced by U+FFFD so it stays one
// comment line. Servers send comments to keep idle connections open; the
// blank line after it dispatches nothing on its own.
func AppendComment(dst []byte, text string) []byte {
	dst = append(dst, ": "...)
	dst = appendSanitized(dst, text, false)
	return append(dst, "\n\n"...)
}

// appendEvent is the one implementation behind AppendEvent and
// AppendEventBytes. Being generic it compiles to one copy for string and one
// for []byte, so neither caller pays for a conversion.
func appendEvent[T string | []byte](dst []byte, id, typ T, data []byte) []byte {
	if len(id) > 0 {
		dst = append(dst, "id: "...)
		dst = appendSanitized(dst, id, true)
		dst = append(dst, '\n')
	}
	if len(typ) > 0 {
		dst = append(dst, "event: "...)
		dst = appendSanitized(dst, typ, false)
		dst = append(dst, '\n')
	}
	dst = appendData(dst, data)
	return append(dst, '\n')
}

// appendSanitized appends s with every CR and LF (and NUL when nul is set)
// replaced by U+FFFD. Values here are short (ids, event types), so a byte loop
// beats searching for three different bytes.
func appendSanitized[T string | []byte](dst []byte, s T, nul bool) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\r' || c == '\n' || (c == 0 && nul) {
			dst = append(dst, s[start:i]...)
			dst = append(dst, replacement...)
			start = i + 1
		}
	}
	return append(dst, s[start:]...)
}

// appendData appends data as "data:" lines, one per line of data.
//
// It looks for CR and LF with bytes.IndexByte and remembers where the next of
// each is, so a value with many lines of one kind is not rescanned for the
// other kind on every line (that would be quadratic).
func appendData(dst, data []byte) []byte {
	n := len(data)
	// cr and lf are the positions of the next CR and LF at or after the
	// positions they were searched from, or n when there is none. A value
	// below pos is stale and searched again.
	cr, lf := -1, -1
	pos := 0
	for {
		if cr < pos {
			cr = indexFrom(data, pos, '\r')
		}
		if lf < pos {
			lf = indexFrom(data, pos, '\n')
		}
		end := min(cr, lf)
		dst = appendDataLine(dst, data[pos:end])
		if end == n {
			return dst
		}
		pos = end + 1
		if data[end] == '\r' && pos < n && data[pos] == '\n' {
			pos++
		}
	}
}

// appendDataLine appends one "data:" line holding line, which has no line end.
func appendDataLine(dst, line []byte) []byte {
	if len(line) == 0 {
		return append(dst, "data:\n"...)
	}
	dst = append(dst, "data: "...)
	dst = append(dst, line...)
	return append(dst, '\n')
}

// indexFrom returns the index of the first c in b at or after from, or len(b).
func indexFrom(b []byte, from int, c byte) int {
	if i := bytes.IndexByte(b[from:], c); i >= 0 {
		return from + i
	}
	return len(b)
}
