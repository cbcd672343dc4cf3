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

// Detached is what Server.Serve returns for a stream it handed to the writer pool; the stream's end is
// counted in its Stats. It is not a reason a stream ends.
const Detached CloseReason = -1

var reasonNames = [numReasons]string{"client_gone", "behind", "write_failed", "shutdown", "replay_failed", "token_expired"}

// String returns the reason's label, e.g. "client_gone".
func (r CloseReason) String() string {
	if r == Detached {
		return "detached"
	}
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
