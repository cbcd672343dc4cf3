package stream

// CloseReason says why a stream ended. Its String form is used as a log field and a metric label.
type CloseReason int

// Reasons a stream ends.
const (
	// ReasonClientGone: the client closed the connection.
	ReasonClientGone CloseReason = iota
	// ReasonBehind: the client read so slowly that its next frame was evicted from the ring, and it could
	// not catch up from Kafka. It resumes from the id of the last frame it got.
	ReasonBehind
	// ReasonWriteFailed: a write failed or did not finish within the write timeout.
	ReasonWriteFailed
	// ReasonShutdown: the server is draining before it stops.
	ReasonShutdown
	// ReasonReplayFailed: what the client needs is not in the ring and could not be read from Kafka. It
	// reconnects with its last id and tries again.
	ReasonReplayFailed
	// ReasonTokenExpired: the client's token expired (Params.Expires). The stream's last frame,
	// "event: token-expired", carries the client's position; it reconnects with a new token and resumes.
	ReasonTokenExpired

	numReasons
)

// parked is what a stream's loop returns when it handed its connection to the writer pool: not a reason a
// stream ends (the pool ends it later), so it never leaves the package (see Outcome).
const parked CloseReason = -1

// Outcome is what Server.Serve did with a stream.
type Outcome struct {
	// Parked says the stream was handed to the writer pool, which serves it from now on: its end is counted
	// in its Stats, and Reason means nothing.
	Parked bool
	// Reason is why the stream ended, when it was not parked.
	Reason CloseReason
}

// outcome returns the Outcome of a loop that returned r.
func outcome(r CloseReason) Outcome {
	if r == parked {
		return Outcome{Parked: true}
	}
	return Outcome{Reason: r}
}

var reasonNames = [numReasons]string{"client_gone", "behind", "write_failed", "shutdown", "replay_failed", "token_expired"}

// String returns the reason's label, e.g. "client_gone".
func (r CloseReason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// Reasons returns every CloseReason, for pre-registering metric series.
func Reasons() []CloseReason {
	rs := make([]CloseReason, numReasons)
	for i := range rs {
		rs[i] = CloseReason(i)
	}
	return rs
}
