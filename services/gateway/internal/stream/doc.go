// Package stream serves one SSE connection from a topic's ring.
//
// A connection is a cursor into the ring. It writes a "retry:" line and an id-only block carrying the
// position it starts at (so a client that drops before its first event still resumes exactly); the response
// head and the "retry:" line go out before its first call to Kafka, so every request is answered whatever
// Kafka does (conn.open). Then it loops in
// one select: when the ring wakes it, it writes every frame it has not written as a few contiguous spans and
// flushes once, under a write deadline; when the heartbeat interval passes without a write it writes a
// comment; when the client goes away, or falls behind the oldest frame in the ring, or the server drains, or
// the client's token expires (after an "event: token-expired" frame with its position), it ends with a
// CloseReason.
//
// A stream's Params may be narrowed to what the client's token allows (Params.Narrow: forced keys and event
// types that a query can narrow and never widen); an id never widens a key-filtered stream to a partition its
// keys cannot be in.
//
// Concurrency: a Server is safe for concurrent use; each Serve call runs on its request's goroutine and
// shares nothing with other connections but the ring and the atomic counters in Stats.
package stream
