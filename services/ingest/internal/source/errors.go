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
