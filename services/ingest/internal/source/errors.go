package source

import (
	"errors"
	"fmt"
)

// Sentinel errors of the source package.
var (
	// ErrNoContent is returned by Run when the server answered 204 No Content: the source stops for good,
	// as the SSE standard tells a client to.
	ErrNoContent = errors.New("source: server answered 204 No Content; source stopped")
	// ErrBadSpec wraps what is wrong with a Spec or Options, naming the setting.
	ErrBadSpec = errors.New("source: invalid setting")
)

// errIdle is returned by an idleReader whose connection delivered no bytes within the idle timeout.
var errIdle = errors.New("source: no bytes within the idle timeout")

// TopicMissingError says that a topic the source writes to does not exist and was not created: creation is
// off for it (Create false), or the creation failed (Create true, Err says why). The source retries with a
// growing backoff, in state StateTopicMissing, without connecting to the upstream.
type TopicMissingError struct {
	// Topic is the missing topic.
	Topic string
	// Role is "destination" (the source's topic) or "dead-letter".
	Role string
	// Create is true when ingest tried to create the topic.
	Create bool
	// Err is why the creation failed; nil when it was not tried.
	Err error
}

// Error names the topic and what to do about it.
func (e *TopicMissingError) Error() string {
	if !e.Create {
		return fmt.Sprintf("source: %s topic %s does not exist and create-topics is off: create it, or turn create-topics on", e.Role, e.Topic)
	}
	return fmt.Sprintf("source: %s topic %s does not exist and could not be created: %v", e.Role, e.Topic, e.Err)
}

// Unwrap returns the creation error, if any.
func (e *TopicMissingError) Unwrap() error { return e.Err }

// RedirectError says that the source's server answered with a redirect the source did not follow: to
// another origin while the source's RedirectPolicy is RedirectSameOrigin, any redirect with RedirectNone,
// one from https to http (never followed), or one past the limit of a connection. The connection ends
// with ReasonRedirect and is retried after backoff-max, like a bad status.
type RedirectError struct {
	// From is the URL that answered with the redirect, To the redirect's target; both without user info
	// and query, which may hold credentials.
	From, To string
	// Policy is the source's redirect policy.
	Policy RedirectPolicy
	// Why says why the redirect was refused.
	Why string
}

// Error names both URLs and why the redirect was refused.
func (e *RedirectError) Error() string {
	return fmt.Sprintf("source: refused redirect from %s to %s: %s", e.From, e.To, e.Why)
}
