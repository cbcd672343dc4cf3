package checkpoint

import "errors"

// Errors of Resolver.Resolve. Any other error is a failure to read Kafka: the caller may try again.
var (
	// ErrInvalid reports an id that is malformed, or names a checkpoint that does not exist, that is not a
	// checkpoint, or that is one of another topic or of an earlier topic of the same name (deleted and
	// created again).
	ErrInvalid = errors.New("checkpoint: invalid compact id")
	// ErrGone reports a checkpoint that the position topic's retention has removed.
	ErrGone = errors.New("checkpoint: checkpoint no longer stored")
)
