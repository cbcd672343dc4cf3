package sse

import "errors"

// ErrLineTooLong is returned by Parser.Next when a line of the stream is longer
// than the limit set with WithMaxLineBytes. The event containing the line is
// dropped; the Parser stays usable (see WithMaxLineBytes).
var ErrLineTooLong = errors.New("sse: line too long")

// ErrEventTooLarge is returned by Parser.Next when the data of one event grows
// beyond the limit set with WithMaxEventBytes. The event is dropped; the Parser
// stays usable (see WithMaxEventBytes).
var ErrEventTooLarge = errors.New("sse: event too large")

// errBadReadCount is returned when the underlying reader reports reading a
// negative number of bytes or more than it was given room for, which breaks
// the io.Reader contract.
var errBadReadCount = errors.New("sse: reader returned an invalid count")
