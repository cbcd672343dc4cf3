// Package sse is the Server-Sent Events wire format shared by the ssegate
// services: a frame writer for the gateway and a parser for the ingest service.
//
// # Writing
//
// AppendEvent, AppendEventBytes, AppendID, AppendRetry and AppendComment append
// one block of the text/event-stream format to a byte slice and return the
// extended slice, like strconv.AppendInt. They allocate only when dst has to
// grow, so the gateway can encode a record once into a reused buffer and share
// the bytes with every connection.
//
// Nothing a caller passes can break the framing: values are split into one
// "data:" line per line (CR LF, lone CR and lone LF all end a line), and CR and
// LF in an id or event type (and NUL in an id, which would make a browser
// ignore the id) are replaced by U+FFFD. A client therefore sees exactly one
// event per AppendEvent, whose data is the value with every line end turned
// into LF, as the HTML standard prescribes for any SSE client.
//
// # Parsing
//
// Parser reads a stream and returns its events the way a browser EventSource
// would, following the WHATWG HTML sections "Parsing an event stream" and
// "Interpreting an event stream" exactly: UTF-8 decoding with U+FFFD for
// ill-formed bytes (one per maximal subpart, as the WHATWG "UTF-8 decode"
// does), one leading byte order mark dropped, CR LF, CR and LF line ends (also
// when a CR and an LF arrive in different reads), comments, the data, event,
// id and retry fields, and dispatch on a blank line. An event without its
// terminating blank line at the end of the stream is dropped.
//
// It deliberately differs from a browser in one way: it bounds memory. A line
// longer than WithMaxLineBytes or an event whose data exceeds
// WithMaxEventBytes is dropped and reported with ErrLineTooLong or
// ErrEventTooLarge; the parser then carries on with the next event.
// Connection handling (Last-Event-ID, reconnection, HTTP status) is left to
// the caller; LastEventID and Retry give it what the stream said. A Parser
// reads one response, while the WHATWG last event id belongs to the event
// source and outlives the connection: a reconnecting caller starts the next
// Parser with WithLastEventID, so that an event without an id carries the id
// the previous connection ended with, as in a browser. A caller that saves its
// position asks for WithIDOnlyBlocks, so that blocks that fire no event but
// move the id (an id-only block) reach it too.
//
// # Concurrency
//
// The Append functions are pure and safe for concurrent use; concurrent calls
// must not share a dst. A Parser is not safe for concurrent use: one goroutine
// at a time calls Next, LastEventID and Retry. Event values returned by Next
// share no memory with the Parser and may be handed to other goroutines.
package sse
