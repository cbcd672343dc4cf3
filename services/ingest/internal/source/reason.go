package source

// Reason is why a connection ended (or never started). It is a log field and a metric label.
type Reason int

// The reasons. Every one but ReasonNoContent and ReasonShutdown leads to a reconnection.
const (
	ReasonConnectError Reason = iota // the request failed: DNS, refused, TLS, no response headers in time
	ReasonServerError                // a 5xx status
	ReasonThrottled                  // a 429 status
	ReasonBadStatus                  // any other status but 200 and 204
	ReasonContentType                // 200 with a content type other than text/event-stream
	ReasonRedirect                   // a redirect the source's RedirectPolicy refuses (RedirectError)
	ReasonEndOfStream                // the server ended the body cleanly
	ReasonReadError                  // the body failed mid-stream (reset, cut)
	ReasonIdleTimeout                // no bytes for the idle timeout
	ReasonKafka                      // a produce or commit failed; the source resumes from its checkpoint
	ReasonTopicMissing               // a topic the source writes to does not exist and was not created
	ReasonNoContent                  // a 204 status: the source stops
	ReasonShutdown                   // the process is stopping
	numReasons
)

var reasonNames = [numReasons]string{
	"connect-error", "server-error", "throttled", "bad-status", "content-type", "redirect-refused",
	"end-of-stream", "read-error", "idle-timeout", "kafka-error", "topic-missing", "no-content", "shutdown",
}

// String returns the reason's label, such as "idle-timeout".
func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// Reasons returns every reason, for metric labels.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}
